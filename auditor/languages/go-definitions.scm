(function_declaration
  name: (identifier) @name
  body: (block)? @body) @definition.function

; Methods: the receiver's type name (without pointer or type parameters) qualifies the name.
(method_declaration
  receiver: (parameter_list
    (parameter_declaration
      type: [
        (type_identifier) @receiver
        (pointer_type (type_identifier) @receiver)
        (generic_type type: (type_identifier) @receiver)
        (pointer_type (generic_type type: (type_identifier) @receiver))
      ]))
  name: (field_identifier) @name
  body: (block)? @body) @definition.method

; Struct and interface types play the part of classes.
(type_spec
  name: (type_identifier) @name
  type: (struct_type (field_declaration_list) @body)) @definition.class

(type_spec
  name: (type_identifier) @name
  type: (interface_type) @body) @definition.class

; Function literals that run on their own (goroutines, parameterless callbacks; see
; extract._runs_on_its_own) are functions named after their enclosing one: outer.func1.
; So is a goroutine started by name (`go worker(queue)`): the call is its only statement.
(go_statement (call_expression function: (func_literal) @definition.closure))

(go_statement (call_expression function: [(identifier) (selector_expression)]) @definition.closure)

(argument_list (func_literal) @definition.closure)

(return_statement (expression_list (func_literal) @definition.closure))

(function_declaration
  name: (identifier) @name
  body: (_) @body) @definition.function

(generator_function_declaration
  name: (identifier) @name
  body: (_) @body) @definition.function

(class_declaration
  name: (type_identifier) @name
  body: (_) @body) @definition.class

(abstract_class_declaration
  name: (type_identifier) @name
  body: (_) @body) @definition.class

(interface_declaration
  name: (type_identifier) @name
  body: (_) @body) @definition.class

(method_definition
  name: (_) @name
  body: (_) @body) @definition.method

(variable_declarator
  name: (identifier) @name
  value: [
    (arrow_function body: (_) @body)
    (function_expression body: (_) @body)
    (generator_function body: (_) @body)
  ]) @definition.function

(assignment_expression
  left: [
    (identifier) @name
    (member_expression property: (property_identifier) @name)
  ]
  right: [
    (arrow_function body: (_) @body)
    (function_expression body: (_) @body)
  ]) @definition.function

(pair
  key: (property_identifier) @name
  value: [
    (arrow_function body: (_) @body)
    (function_expression body: (_) @body)
  ]) @definition.function

; Decorators: on the class itself, on its export statement, or before a class member.
(class_declaration
  decorator: (decorator) @decorator) @owner

(abstract_class_declaration
  decorator: (decorator) @decorator) @owner

(export_statement
  decorator: (decorator) @decorator
  declaration: (_) @owner)

(class_body
  (decorator)+ @decorator
  .
  (method_definition) @owner)

(class_declaration
  (class_heritage (extends_clause value: (_) @base))) @owner

(class_declaration
  (class_heritage (implements_clause (_) @base))) @owner

(abstract_class_declaration
  (class_heritage (extends_clause value: (_) @base))) @owner

(abstract_class_declaration
  (class_heritage (implements_clause (_) @base))) @owner

(interface_declaration
  (extends_type_clause type: (_) @base)) @owner

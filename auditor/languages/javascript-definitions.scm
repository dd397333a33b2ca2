(function_declaration
  name: (identifier) @name
  body: (_) @body) @definition.function

(generator_function_declaration
  name: (identifier) @name
  body: (_) @body) @definition.function

(class_declaration
  name: (identifier) @name
  body: (_) @body) @definition.class

(method_definition
  name: (_) @name
  body: (_) @body) @definition.method

; const handler = (req, res) => {...} / function () {...}
(variable_declarator
  name: (identifier) @name
  value: [
    (arrow_function body: (_) @body)
    (function_expression body: (_) @body)
    (generator_function body: (_) @body)
  ]) @definition.function

; exports.handler = async (event) => {...}
(assignment_expression
  left: [
    (identifier) @name
    (member_expression property: (property_identifier) @name)
  ]
  right: [
    (arrow_function body: (_) @body)
    (function_expression body: (_) @body)
  ]) @definition.function

; { save: function () {...}, load: () => {...} }
(pair
  key: (property_identifier) @name
  value: [
    (arrow_function body: (_) @body)
    (function_expression body: (_) @body)
  ]) @definition.function

(class_declaration
  decorator: (decorator) @decorator) @owner

(method_definition
  decorator: (decorator) @decorator) @owner

(class_declaration
  (class_heritage (_) @base)) @owner

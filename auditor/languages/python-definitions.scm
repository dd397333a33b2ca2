; Definitions: functions (methods when directly inside a class) and classes.
(function_definition
  name: (identifier) @name
  body: (block) @body) @definition.function

(class_definition
  name: (identifier) @name
  body: (block) @body) @definition.class

; Decorators, and the decorated span that starts at the first decorator. Decorators are
; tied to their definition through the wrapper (@outer): a pattern naming both a decorator
; and the `definition` field after it is quadratic in the number of stacked decorators.
(decorated_definition
  (decorator) @decorator) @outer

(decorated_definition
  definition: (_) @owner) @outer

; Base classes (keyword arguments such as metaclass=... are not bases).
(class_definition
  superclasses: (argument_list
    [(identifier) (attribute) (subscript) (call)] @base)) @owner

; Docstrings: a string literal as the first statement of the body.
(function_definition
  body: (block . (expression_statement [(string) (concatenated_string)] @doc))) @owner

(class_definition
  body: (block . (expression_statement [(string) (concatenated_string)] @doc))) @owner

; repo.findAll().save(x): the callee runs from the object to the method name.
(method_invocation
  object: (_)? @object
  name: (identifier) @name
  arguments: (argument_list) @args) @call

(object_creation_expression
  type: (_) @callee
  arguments: (argument_list) @args) @call

(explicit_constructor_invocation
  constructor: (_) @callee
  arguments: (argument_list) @args) @call

; Explicit type arguments are not part of the callee: this.<T>convert(x) -> this.convert
(method_invocation
  type_arguments: (_) @drop) @call

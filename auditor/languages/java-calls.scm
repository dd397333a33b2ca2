; Argument lists come from the call's `arguments` field (see extract._extract_calls):
; capturing them here makes the query quadratic in the length of a call chain.
; repo.findAll().save(x): the callee runs from the object to the method name.
(method_invocation
  object: (_)? @object
  name: (identifier) @name) @call

(object_creation_expression
  type: (_) @callee) @call

(explicit_constructor_invocation
  constructor: (_) @callee) @call

; Explicit type arguments are not part of the callee: this.<T>convert(x) -> this.convert
(method_invocation
  type_arguments: (_) @drop) @call

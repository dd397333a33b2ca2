(call_expression
  function: (_) @callee
  arguments: (_) @args) @call

(new_expression
  constructor: (_) @callee
  arguments: (_)? @args) @call

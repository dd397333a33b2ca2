(call_expression
  function: (_) @callee
  arguments: (_) @args) @call

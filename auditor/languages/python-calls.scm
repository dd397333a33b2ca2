(call
  function: (_) @callee
  arguments: (_) @args) @call

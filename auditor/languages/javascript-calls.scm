; Argument lists come from the call's `arguments` field (see extract._extract_calls):
; capturing them here makes the query quadratic in the length of a call chain.
(call_expression
  function: (_) @callee) @call

(new_expression
  constructor: (_) @callee) @call

; The argument list is the call's `arguments` field (see extract._extract_calls): capturing
; it here would make the query quadratic in the length of a call chain.
(call
  function: (_) @callee) @call

; inherits: javascript

; Type arguments are not part of the callee: this.http.post<Order>(...) -> this.http.post
(call_expression
  type_arguments: (_) @drop) @call

; The grammar parses `await f<T>(x)` as a call of `await f`; the callee is `f`.
(call_expression
  function: (await_expression "await" @drop)) @call

; Module-level NAME = "literal" / True / False (settings such as ATOMIC_REQUESTS).
(module
  (expression_statement
    (assignment
      left: (identifier) @name
      right: [(string) (true) (false)] @value)))

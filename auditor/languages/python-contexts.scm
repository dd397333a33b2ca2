; One context block per `with` item; `expr as name` keeps only the expression.
(with_statement
  (with_clause
    (with_item
      value: (as_pattern . (_) @item)))) @block

(with_statement
  (with_clause
    (with_item
      value: (primary_expression) @item))) @block

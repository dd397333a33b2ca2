; `if __name__ == "__main__":` at module level.
(module
  (if_statement
    condition: (comparison_operator) @_condition) @main
  (#match? @_condition "__name__")
  (#match? @_condition "__main__"))

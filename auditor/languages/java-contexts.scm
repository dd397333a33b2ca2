; try-with-resources: one context block per resource.
(try_with_resources_statement
  resources: (resource_specification
    (resource value: (_) @item))) @block

(try_with_resources_statement
  resources: (resource_specification
    (resource . [(identifier) (field_access)] @item .))) @block

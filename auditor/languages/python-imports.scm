(import_statement
  name: (dotted_name) @module) @import

(import_statement
  name: (aliased_import
    name: (dotted_name) @module
    alias: (identifier) @alias)) @import

(import_from_statement
  module_name: (_) @module
  name: (dotted_name) @name) @import

(import_from_statement
  module_name: (_) @module
  name: (aliased_import
    name: (dotted_name) @name
    alias: (identifier) @alias)) @import

(import_from_statement
  module_name: (_) @module
  (wildcard_import) @name) @import

((future_import_statement
  name: (dotted_name) @name) @import
  (#set! module "__future__"))

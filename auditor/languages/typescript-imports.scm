; inherits: javascript

; import orders = require('./orders')
(import_statement
  (import_require_clause
    (identifier) @alias
    source: (string) @module)) @import

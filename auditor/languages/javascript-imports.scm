; import './polyfill'
(import_statement
  . (string) @module) @import

; import orders from './orders'
((import_statement
  (import_clause (identifier) @alias)
  source: (string) @module) @import
  (#set! name "default"))

; import * as orders from './orders'
(import_statement
  (import_clause (namespace_import (identifier) @alias))
  source: (string) @module) @import

; import { save, load as fetch } from './orders'
(import_statement
  (import_clause
    (named_imports
      (import_specifier
        name: (_) @name
        alias: (_)? @alias)))
  source: (string) @module) @import

; const orders = require('./orders')
((variable_declarator
  name: (identifier) @alias
  value: (call_expression
    function: (identifier) @_require
    arguments: (arguments . (string) @module))) @import
  (#eq? @_require "require"))

; const { save, load: fetch } = require('./orders')
((variable_declarator
  name: (object_pattern (shorthand_property_identifier_pattern) @name)
  value: (call_expression
    function: (identifier) @_require
    arguments: (arguments . (string) @module))) @import
  (#eq? @_require "require"))

((variable_declarator
  name: (object_pattern
    (pair_pattern
      key: (_) @name
      value: (identifier) @alias))
  value: (call_expression
    function: (identifier) @_require
    arguments: (arguments . (string) @module))) @import
  (#eq? @_require "require"))

; require('./side-effect')
((expression_statement
  (call_expression
    function: (identifier) @_require
    arguments: (arguments . (string) @module))) @import
  (#eq? @_require "require"))

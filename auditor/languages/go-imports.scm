(import_spec
  name: (_)? @alias
  path: (_) @module) @import

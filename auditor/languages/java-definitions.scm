(class_declaration
  name: (identifier) @name
  body: (_) @body) @definition.class

(interface_declaration
  name: (identifier) @name
  body: (_) @body) @definition.class

(enum_declaration
  name: (identifier) @name
  body: (_) @body) @definition.class

(record_declaration
  name: (identifier) @name
  body: (_) @body) @definition.class

(annotation_type_declaration
  name: (identifier) @name
  body: (_) @body) @definition.class

(method_declaration
  name: (identifier) @name
  body: (block)? @body) @definition.method

(constructor_declaration
  name: (identifier) @name
  body: (constructor_body) @body) @definition.method

(compact_constructor_declaration
  name: (identifier) @name
  body: (block) @body) @definition.method

; Annotations live in the declaration's modifiers (owners that are not definitions,
; such as fields and parameters, are ignored by the index).
(_
  (modifiers [(annotation) (marker_annotation)] @decorator)) @owner

(class_declaration
  superclass: (superclass (_) @base)) @owner

(class_declaration
  interfaces: (super_interfaces (type_list (_) @base))) @owner

(enum_declaration
  interfaces: (super_interfaces (type_list (_) @base))) @owner

(record_declaration
  interfaces: (super_interfaces (type_list (_) @base))) @owner

(interface_declaration
  (extends_interfaces (type_list (_) @base))) @owner

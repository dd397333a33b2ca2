; import com.x.Orders;  import static com.x.Orders.save;
(import_declaration
  (scoped_identifier) @module .) @import

; import com.x.*;
(import_declaration
  (scoped_identifier) @module
  (asterisk) @name) @import

package com.example.orders;

import java.sql.Connection;
import static org.junit.Assert.assertEquals;
import com.example.core.*;

/** Order endpoints. */
@RestController
@RequestMapping("/orders")
public class OrderController extends BaseController implements Serializable, Closeable {

    private final OrderRepository repository;

    public OrderController(OrderRepository repository) {
        super();
        this.repository = repository;
    }

    /** Saves an order. */
    @Transactional
    @PostMapping("/save")
    public Order save(@RequestBody Order order) throws SQLException {
        try (Connection connection = dataSource.getConnection(); stream) {
            repository.findById(order.getId()).orElseThrow();
        }
        return repository.save(new Order(order));
    }

    interface Listener {
        void onSave(Order order);
    }
}

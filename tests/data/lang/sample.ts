import { Injectable } from '@angular/core';
import type { Order } from './order';
import fs = require('fs');

export interface Repository<T> extends Base {
  save(item: T): Promise<void>;
}

@Injectable({ providedIn: 'root' })
export class OrderService extends BaseService<Order> implements Repository<Order>, Disposable {
  constructor(private readonly http: HttpClient) {
    super();
  }

  @Get('/orders')
  @Transactional()
  async save(order: Order): Promise<void> {
    await this.http.post<Order>('/api/orders', order).toPromise();
    this.log(`saved ${order.id}`);
  }
}

export function total(orders: Order[]): number {
  return orders.reduce((sum, order) => sum + order.amount, 0);
}

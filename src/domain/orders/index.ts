// Orders: a shop's orders, their states and refunds, and what each earns; every write goes through
// the ledger in the same transaction.

export { MULTIPLIER_ONE } from './order-earn.js';
export { upsertOrder } from './order-writes.js';
export {
  getOrder, listOrdersOfCustomers, MAX_ORDER_DISCOUNT_CODES, type Order, type OrderDiscountCode, ORDER_STATUSES, orderIdSchema, orderInputSchema, type OrderLine,
} from './orders.js';

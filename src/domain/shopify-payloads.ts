import { z } from 'zod';
import { RuleViolationError } from './errors.js';
import { formatMoney, parseMoney } from './money.js';
import { validationErrorFrom } from './validation.js';

/**
 * Shopify's webhook bodies (Admin REST shapes: Order, Refund, Customer) read as the facts we need,
 * and the order turned into the full state PUT /orders takes. Pure: no database. Unknown fields
 * are ignored (Shopify adds fields in every API version); ids arrive as JSON numbers.
 */

const id = z.union([z.number().int(), z.string().min(1)]).transform(String);
const time = z.iso.datetime({ offset: true });
const amount = z.union([z.string(), z.number()]).transform(String);
const moneySet = z.object({ shop_money: z.object({ amount }) }).nullish();
/** Prefer the shop-currency amount of a `*_set`, as the order's `currency` is the shop's. */
const shopAmount = (set: z.output<typeof moneySet>, plain: string | null | undefined) => set?.shop_money.amount ?? plain ?? undefined;

const refundSchema = z.object({
  id,
  order_id: id,
  created_at: time,
  refund_line_items: z
    .array(z.object({ line_item_id: id, quantity: z.number().int().min(0) }))
    .default([]),
  transactions: z
    .array(z.object({ kind: z.string(), status: z.string().nullish(), amount, amount_set: moneySet }))
    .default([]),
});

const orderSchema = z.object({
  id,
  email: z.string().nullish(),
  currency: z.string(),
  financial_status: z.string().nullish(),
  cancelled_at: time.nullish(),
  processed_at: time.nullish(),
  updated_at: time,
  total_price: amount,
  total_price_set: moneySet,
  total_tax: amount.nullish(),
  total_tax_set: moneySet,
  total_shipping_price_set: moneySet,
  customer: z.object({ id, email: z.string().nullish() }).nullish(),
  line_items: z.array(
    z.object({
      id,
      product_id: id.nullish(),
      variant_id: id.nullish(),
      quantity: z.number().int().min(0),
      price: amount,
      price_set: moneySet,
      discount_allocations: z.array(z.object({ amount, amount_set: moneySet })).default([]),
    }),
  ),
  refunds: z.array(refundSchema).default([]),
});

const customerSchema = z.object({ id, email: z.string().nullish() });

export type ShopifyOrder = z.output<typeof orderSchema>;
export type ShopifyRefund = z.output<typeof refundSchema>;
export type ShopifyCustomer = z.output<typeof customerSchema>;

function parsed<S extends z.ZodType>(schema: S, body: unknown, what: string): z.output<S> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  throw validationErrorFrom(result.error.issues.map((i) => ({ ...i, message: `${what}: ${i.message}` })));
}

export const parseShopifyOrder = (body: unknown) => parsed(orderSchema, body, 'not a Shopify order');
export const parseShopifyRefund = (body: unknown) => parsed(refundSchema, body, 'not a Shopify refund');
export const parseShopifyCustomer = (body: unknown) => parsed(customerSchema, body, 'not a Shopify customer');

/** The customer as POST /customers would take it: Shopify's customer id is the shop's customer id. */
export function customerInput(customer: { id: string; email?: string | null }): { shopifyCustomerId: string; email?: string } {
  return customer.email ? { shopifyCustomerId: customer.id, email: customer.email } : { shopifyCustomerId: customer.id };
}

/** Shopify's states onto ours; a cancellation wins over any payment state. */
function statusOf(order: ShopifyOrder): string {
  if (order.cancelled_at) return 'cancelled';
  switch (order.financial_status) {
    case 'paid':
      return 'paid';
    case 'partially_refunded':
      return 'partially_refunded';
    case 'refunded':
      return 'refunded';
    case 'voided':
      return 'cancelled';
    default:
      // pending, authorized, partially_paid, expired: not paid yet, earns nothing yet.
      return 'pending';
  }
}

/**
 * The order's full state for PUT /orders, from its latest body and every refund known for it (the
 * body's own and those that came alone, with refunds/create), each refund counted once by its id:
 * the same facts in any arrival order give the same state.
 */
export function orderPut(order: ShopifyOrder, refunds: readonly ShopifyRefund[]): { orderId: string; body: Record<string, unknown> } {
  if (!order.customer) {
    throw new RuleViolationError('shopify_order_without_customer', `Shopify order ${order.id} has no customer (a guest checkout): it earns no points`);
  }
  const currency = order.currency;
  const minor = (value: string | undefined, path: string) => {
    if (value === undefined) return 0;
    const money = parseMoney(value, currency);
    if (!money.ok) throw validationErrorFrom([{ path: [path], message: money.message }]);
    return money.minor;
  };
  const allRefunds = [...new Map([...order.refunds, ...refunds].map((r) => [r.id, r])).values()];
  const refundedUnits = new Map<string, number>();
  for (const line of allRefunds.flatMap((r) => r.refund_line_items)) refundedUnits.set(line.line_item_id, (refundedUnits.get(line.line_item_id) ?? 0) + line.quantity);

  const lines = order.line_items.map((l) => {
    const priceMinor = minor(shopAmount(l.price_set, l.price), 'line_items.price');
    const discountMinor = l.discount_allocations.reduce((sum, d) => sum + minor(shopAmount(d.amount_set, d.amount), 'line_items.discount_allocations'), 0);
    return {
      priceMinor,
      discountMinor,
      put: {
        // A custom line (no product) is still money spent; it matches no product list.
        productId: l.product_id ?? `line-${l.id}`,
        variantId: l.variant_id ?? null,
        quantity: l.quantity,
        price: formatMoney(priceMinor, currency),
        discount: formatMoney(discountMinor, currency),
        refundedQuantity: Math.min(l.quantity, refundedUnits.get(l.id) ?? 0),
      },
    };
  });
  const total = minor(shopAmount(order.total_price_set, order.total_price), 'total_price');
  const refunded = allRefunds
    .flatMap((r) => r.transactions)
    .filter((t) => t.kind === 'refund' && (t.status ?? 'success') === 'success')
    .reduce((sum, t) => sum + minor(shopAmount(t.amount_set, t.amount), 'refunds.transactions.amount'), 0);
  const updatedAt = [order.updated_at, ...allRefunds.map((r) => r.created_at)].reduce((a, b) => (Date.parse(b) > Date.parse(a) ? b : a));

  return {
    orderId: order.id,
    body: {
      customerIdentifier: order.customer.id,
      currency,
      // Our subtotal is the lines' sum (after their discounts), which is what Shopify's subtotal_price is.
      subtotal: formatMoney(lines.reduce((sum, l) => sum + l.priceMinor * l.put.quantity - l.discountMinor, 0), currency),
      shipping: formatMoney(minor(shopAmount(order.total_shipping_price_set, undefined), 'total_shipping_price_set'), currency),
      tax: formatMoney(minor(shopAmount(order.total_tax_set, order.total_tax ?? undefined), 'total_tax'), currency),
      total: formatMoney(total, currency),
      // Shopify never refunds more than was paid; a total lowered by an edit keeps ours consistent.
      refunded: formatMoney(Math.min(refunded, total), currency),
      status: statusOf(order),
      lineItems: lines.map((l) => l.put),
      processedAt: order.processed_at ? new Date(order.processed_at).toISOString() : null,
      sourceUpdatedAt: new Date(updatedAt).toISOString(),
    },
  };
}

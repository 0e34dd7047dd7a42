import { isSafeNumber, parse as parseLossless } from 'lossless-json';
import { z } from 'zod';
import { formatMoney, parseMoney, RuleViolationError, validationErrorFrom } from '../kernel/index.js';

/**
 * Shopify's webhook bodies (Admin REST shapes: Order, Refund, Customer) read as the facts we need,
 * and the order turned into the full state PUT /orders takes. Pure: no database. Unknown fields
 * are ignored (Shopify adds fields in every API version).
 */

/** A number with more than 15 significant digits somewhere in the text: JSON.parse could round it. */
const LONG_NUMBER = /\d(?:\.?\d){15}/;

/**
 * A Shopify body as JSON, without losing a digit: Shopify's ids are JSON numbers that pass 2^53
 * (its documented samples carry 18 digits), which JSON.parse rounds. A number a double cannot hold
 * exactly stays its text (lossless-json); the others are numbers as usual. Text where no number
 * can be that long (most real bodies) takes the native parser, six times faster.
 */
export function parseShopifyJson(text: string): unknown {
  if (!LONG_NUMBER.test(text)) return JSON.parse(text);
  return parseLossless(text, null, (digits) => (isSafeNumber(digits) ? Number(digits) : digits));
}

/** Shopify's ids are kept as text everywhere: a number here is always a safe one (parseShopifyJson). */
const id = z.union([z.number().int(), z.string().regex(/^\d{1,32}$/, 'expected a Shopify id')]).transform(String);
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

/** created_at: when the customer signed up with the shop (the sign-up bonus goes by it); updated_at orders their states. */
const customerSchema = z.object({ id, email: z.string().nullish(), created_at: time.nullish(), updated_at: time.nullish() });

const orderSchema = z.object({
  id,
  email: z.string().nullish(),
  /** A test order (Shopify's Bogus gateway, or a test payment): earns only if the shop says so. */
  test: z.boolean().nullish(),
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
  customer: customerSchema.nullish(),
  line_items: z.array(
    z.object({
      id,
      product_id: id.nullish(),
      variant_id: id.nullish(),
      quantity: z.number().int().min(0),
      price: amount,
      price_set: moneySet,
      gift_card: z.boolean().nullish(),
      discount_allocations: z.array(z.object({ amount, amount_set: moneySet })).default([]),
    }),
  ),
  refunds: z.array(refundSchema).default([]),
  /** The codes the checkout applied (`type`: fixed_amount, percentage, shipping; `amount` what it took off, in the shop's currency). */
  discount_codes: z.array(z.object({ code: z.string(), amount, type: z.string().nullish() })).default([]),
});

/** products/* and collections/*: only the id is used (which products a collection holds is read from the Admin API). */
const resourceSchema = z.object({ id });

/**
 * Shopify's mandatory compliance webhooks (customers/data_request, customers/redact, shop/redact):
 * the shop, and for the first two the customer (by id, e-mail, phone), the orders concerned and, for
 * a data request, Shopify's id of the request.
 */
const complianceSchema = z.object({
  shop_id: id.nullish(),
  shop_domain: z.string().nullish(),
  customer: z.object({ id: id.nullish(), email: z.string().nullish(), phone: z.string().nullish() }).nullish(),
  orders_requested: z.array(id).nullish(),
  orders_to_redact: z.array(id).nullish(),
  data_request: z.object({ id }).nullish(),
});

export type ShopifyOrder = z.output<typeof orderSchema>;
export type ShopifyRefund = z.output<typeof refundSchema>;
export type ShopifyCustomer = z.output<typeof customerSchema>;

function parsed<S extends z.ZodType>(schema: S, body: unknown, what: string): z.output<S> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  throw validationErrorFrom(result.error.issues.map((i) => ({ ...i, message: `${what}: ${i.message}` })));
}

export type ShopifyComplianceRequest = {
  topic: 'customers/data_request' | 'customers/redact' | 'shop/redact';
  /** Who it is about (null for shop/redact): Shopify's customer id, and the e-mail to match when that id is unknown here. */
  customer: { id: string | null; email: string | null } | null;
  /** The orders Shopify names (orders_requested, orders_to_redact). */
  orders: string[];
  /** data_request.id: what the shop quotes when it answers. */
  dataRequestId: string | null;
};

export function parseShopifyCompliance(topic: ShopifyComplianceRequest['topic'], body: unknown): ShopifyComplianceRequest {
  const b = parsed(complianceSchema, body, `not a Shopify ${topic} request`);
  if (topic === 'shop/redact') return { topic, customer: null, orders: [], dataRequestId: null };
  if (!b.customer?.id && !b.customer?.email) throw validationErrorFrom([{ path: ['customer'], message: `a ${topic} request names its customer by id or e-mail` }]);
  return {
    topic,
    customer: { id: b.customer.id ?? null, email: b.customer.email ?? null },
    orders: b.orders_requested ?? b.orders_to_redact ?? [],
    dataRequestId: b.data_request?.id ?? null,
  };
}

export const parseShopifyOrder = (body: unknown) => parsed(orderSchema, body, 'not a Shopify order');
export const parseShopifyRefund = (body: unknown) => parsed(refundSchema, body, 'not a Shopify refund');
export const parseShopifyCustomer = (body: unknown) => parsed(customerSchema, body, 'not a Shopify customer');
export const parseShopifyResource = (body: unknown, what: 'product' | 'collection') => parsed(resourceSchema, body, `not a Shopify ${what}`);

/** The products an order's lines name (custom lines name none). */
export const orderProductIds = (order: ShopifyOrder) => order.line_items.flatMap((l) => (l.product_id ? [l.product_id] : []));

/** The customer as POST /customers would take it: Shopify's customer id is the shop's customer id. */
export function customerInput(customer: { id: string; email?: string | null }): { shopifyCustomerId: string; email?: string } {
  return customer.email ? { shopifyCustomerId: customer.id, email: customer.email } : { shopifyCustomerId: customer.id };
}

/**
 * Shopify's states onto ours; a cancellation wins over any payment state. A paid order's refunds
 * count by their money: after refunds/create alone its body still says `paid`, and what the
 * refunds gave back says whether it is refunded in part or in full.
 */
function statusOf(order: ShopifyOrder, refundedMinor: number, totalMinor: number): string {
  if (order.cancelled_at) return 'cancelled';
  switch (order.financial_status) {
    case 'paid':
    case 'partially_refunded':
      if (totalMinor > 0 && refundedMinor >= totalMinor) return 'refunded';
      return refundedMinor > 0 || order.financial_status === 'partially_refunded' ? 'partially_refunded' : 'paid';
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
 * the same facts in any arrival order give the same state. `collections`: the collections known
 * for its products (read from the Admin API; the body names none), which each line carries.
 */
export function orderPut(
  order: ShopifyOrder,
  refunds: readonly ShopifyRefund[],
  collections: ReadonlyMap<string, readonly string[]> = new Map(),
): { orderId: string; body: Record<string, unknown> } {
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
        collectionIds: l.product_id ? [...(collections.get(l.product_id) ?? [])] : [],
        quantity: l.quantity,
        price: formatMoney(priceMinor, currency),
        discount: formatMoney(discountMinor, currency),
        refundedQuantity: Math.min(l.quantity, refundedUnits.get(l.id) ?? 0),
        giftCard: l.gift_card ?? false,
      },
    };
  });
  const total = minor(shopAmount(order.total_price_set, order.total_price), 'total_price');
  const refunded = allRefunds
    .flatMap((r) => r.transactions)
    .filter((t) => t.kind === 'refund' && (t.status ?? 'success') === 'success')
    .reduce((sum, t) => sum + minor(shopAmount(t.amount_set, t.amount), 'refunds.transactions.amount'), 0);
  const refundedMinor = Math.min(refunded, total);
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
      refunded: formatMoney(refundedMinor, currency),
      status: statusOf(order, refundedMinor, total),
      test: order.test ?? false,
      lineItems: lines.map((l) => l.put),
      discountCodes: order.discount_codes.map((c) => ({ code: c.code, amount: formatMoney(minor(c.amount, 'discount_codes.amount'), currency) })),
      processedAt: order.processed_at ? new Date(order.processed_at).toISOString() : null,
      sourceUpdatedAt: new Date(updatedAt).toISOString(),
    },
  };
}

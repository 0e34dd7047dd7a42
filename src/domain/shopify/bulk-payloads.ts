import { z } from 'zod';
import { formatMoney, parseMoney, validationErrorFrom } from '../kernel/index.js';
import { parseShopifyCustomer, parseShopifyOrder, type ShopifyCustomer, type ShopifyOrder } from './shopify-payloads.js';

/**
 * The objects of a bulk operation's result (the Admin GraphQL shapes the history import's queries
 * select: src/shopify-admin/operations.ts) turned into the webhooks' REST shapes, so the history
 * goes through the connector's own mapping and keys: `legacyResourceId` is the numeric id the
 * webhooks carry, money stays text. Pure: no database.
 */

/** A line of the JSONL: a top-level object, or a child of a nested connection naming its parent. */
export type BulkObject = Record<string, unknown> & { id?: string; __parentId?: string };

const legacyId = z.union([z.string().regex(/^\d{1,32}$/), z.number().int()]).transform(String);
const time = z.iso.datetime({ offset: true });
const money = z.object({ shopMoney: z.object({ amount: z.union([z.string(), z.number()]).transform(String) }) });
/** The numeric tail of a gid (`gid://shopify/LineItem/12` → `12`): a line item has no legacyResourceId. */
const gidTail = z.string().regex(/^gid:\/\/shopify\/\w+\/\d{1,32}$/, 'expected a Shopify gid').transform((gid) => gid.slice(gid.lastIndexOf('/') + 1));

const customerSchema = z.object({
  legacyResourceId: legacyId,
  defaultEmailAddress: z.object({ emailAddress: z.string().nullish() }).nullish(),
  createdAt: time.nullish(),
  updatedAt: time.nullish(),
});

const lineItemSchema = z.object({
  id: gidTail,
  quantity: z.number().int().min(0),
  currentQuantity: z.number().int().min(0),
  isGiftCard: z.boolean().nullish(),
  originalUnitPriceSet: money,
  product: z.object({ legacyResourceId: legacyId }).nullish(),
  variant: z.object({ legacyResourceId: legacyId }).nullish(),
  discountAllocations: z
    .array(z.object({ allocatedAmountSet: money, discountApplication: z.object({ code: z.string().nullish() }).passthrough().nullish() }))
    .default([]),
});

const orderSchema = z.object({
  legacyResourceId: legacyId,
  email: z.string().nullish(),
  test: z.boolean().nullish(),
  currencyCode: z.string(),
  displayFinancialStatus: z.string().nullish(),
  cancelledAt: time.nullish(),
  processedAt: time.nullish(),
  updatedAt: time,
  totalPriceSet: money,
  totalTaxSet: money.nullish(),
  totalShippingPriceSet: money.nullish(),
  discountCodes: z.array(z.string()).default([]),
  customer: customerSchema.nullish(),
  refunds: z.array(z.object({ legacyResourceId: legacyId, createdAt: time.nullish(), totalRefundedSet: money })).default([]),
});

function parsed<S extends z.ZodType>(schema: S, value: unknown, what: string): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  throw validationErrorFrom(result.error.issues.map((i) => ({ ...i, message: `${what}: ${i.message}` })));
}

const restCustomer = (c: z.output<typeof customerSchema>) => ({
  id: c.legacyResourceId,
  email: c.defaultEmailAddress?.emailAddress ?? null,
  created_at: c.createdAt ?? null,
  updated_at: c.updatedAt ?? null,
});

/** A Customer object of the customers query, as customers/create delivers it. */
export function customerFromBulk(object: BulkObject): ShopifyCustomer {
  return parseShopifyCustomer(restCustomer(parsed(customerSchema, object, 'not a Shopify Customer')));
}

/**
 * An Order object and its LineItem children, as the order webhooks deliver it (`text`: that body as
 * JSON, which the connector keeps). The bulk output knows refunded units per line, not per refund:
 * they ride on the order's latest refund, each refund carrying its money (what the points go by);
 * units a line lost to an edit without a refund count as bought, as the webhooks' bodies have them.
 * A code's amount is what its allocations took off the lines.
 */
export function orderFromBulk(object: BulkObject, children: readonly BulkObject[]): { order: ShopifyOrder; text: string } {
  const o = parsed(orderSchema, object, 'not a Shopify Order');
  const lines = children.map((child) => parsed(lineItemSchema, child, 'not a Shopify LineItem'));
  const minor = (amount: string) => {
    const m = parseMoney(amount, o.currencyCode);
    if (!m.ok) throw validationErrorFrom([{ path: ['discountAllocations'], message: m.message }]);
    return m.minor;
  };
  const codeAmounts = new Map(o.discountCodes.map((code) => [code, 0]));
  for (const allocation of lines.flatMap((l) => l.discountAllocations)) {
    const code = allocation.discountApplication?.code;
    if (code && codeAmounts.has(code)) codeAmounts.set(code, codeAmounts.get(code)! + minor(allocation.allocatedAmountSet.shopMoney.amount));
  }
  const refunds = [...o.refunds].sort((a, b) => Date.parse(a.createdAt ?? '') - Date.parse(b.createdAt ?? ''));
  const rest = {
    id: o.legacyResourceId,
    email: o.email ?? null,
    test: o.test ?? false,
    currency: o.currencyCode,
    financial_status: o.displayFinancialStatus?.toLowerCase() ?? null,
    cancelled_at: o.cancelledAt ?? null,
    processed_at: o.processedAt ?? null,
    updated_at: o.updatedAt,
    total_price: o.totalPriceSet.shopMoney.amount,
    total_tax: o.totalTaxSet?.shopMoney.amount ?? null,
    total_shipping_price_set: o.totalShippingPriceSet ? { shop_money: { amount: o.totalShippingPriceSet.shopMoney.amount } } : null,
    customer: o.customer ? restCustomer(o.customer) : null,
    line_items: lines.map((l) => ({
      id: l.id,
      product_id: l.product?.legacyResourceId ?? null,
      variant_id: l.variant?.legacyResourceId ?? null,
      quantity: l.quantity,
      price: l.originalUnitPriceSet.shopMoney.amount,
      gift_card: l.isGiftCard ?? false,
      discount_allocations: l.discountAllocations.map((d) => ({ amount: d.allocatedAmountSet.shopMoney.amount })),
    })),
    refunds: refunds.map((r, i) => ({
      id: r.legacyResourceId,
      order_id: o.legacyResourceId,
      created_at: r.createdAt ?? o.updatedAt,
      refund_line_items:
        i === refunds.length - 1
          ? lines.filter((l) => l.currentQuantity < l.quantity).map((l) => ({ line_item_id: l.id, quantity: l.quantity - l.currentQuantity }))
          : [],
      transactions: [{ kind: 'refund', status: 'success', amount: r.totalRefundedSet.shopMoney.amount }],
    })),
    discount_codes: [...codeAmounts].map(([code, amount]) => ({ code, amount: formatMoney(amount, o.currencyCode) })),
  };
  return { order: parseShopifyOrder(rest), text: JSON.stringify(rest) };
}

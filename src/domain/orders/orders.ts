import { hash } from 'node:crypto';
import { type RawBuilder, sql } from 'kysely';
import { z } from 'zod';
import type { EarningRuleRow, OrderDiscountCode, OrderRow, OrderStatus } from '../../db/schema.js';
import type { Queryable } from '../../db/transaction.js';
import { customerIdentifierSchema } from '../customers/index.js';
import { currencySchema, formatMoney, NotFoundError, type Page, type PageArgs, pageBySeq, pagesBySeq, parseInput, parseMoney, RuleViolationError, type SeqList, validationErrorFrom } from '../kernel/index.js';
import type { EarnRule, EarnSnapshot, LineState, OrderState } from './order-earn.js';

export type { OrderDiscountCode };

export const ORDER_STATUSES = ['pending', 'paid', 'partially_refunded', 'refunded', 'cancelled'] as const satisfies readonly OrderStatus[];

/** The order as the API shows it: its last state, money as decimal strings, and what it earned. */
export type Order = {
  _id: string;
  orderId: string;
  customer: string;
  currency: string;
  subtotal: string;
  shipping: string;
  tax: string;
  total: string;
  refunded: string;
  status: OrderStatus;
  /** A test order (Shopify's `test`): earns nothing unless the shop's earnOnTestOrders says so. */
  test: boolean;
  lineItems: OrderLine[];
  /** The discount codes the order used, as given (unknown ones too); each issued code of the shop among them is used by the order. */
  discountCodes: OrderDiscountCode[];
  processedAt: Date | null;
  /** Net points the order has earned (pending ones included): what its current state earns. */
  pointsEarned: number;
  /** Of those, still waiting for the shop's pendingDays. */
  pointsPending: number;
  /** Taken back by refunds and cancellations, in all. */
  pointsClawedBack: number;
  /** Of those, what the balance no longer held (already spent): the balance stopped at 0. */
  unrecoveredPoints: number;
  /** Why the order earns nothing, when that is not obvious (another currency, no active rule). */
  earnNote: string | null;
  createdAt: Date;
  updatedAt: Date;
};

export type OrderLine = {
  productId: string;
  variantId: string | null;
  collectionIds: string[];
  quantity: number;
  price: string;
  discount: string;
  refundedQuantity: number;
  /** A gift card sold (Shopify's `gift_card`): earns only under a rule with includeGiftCards. */
  giftCard: boolean;
};

/** Money arrives as strings and is checked against the order's currency once that is known. */
const moneyText = z.unknown();
const idText = z.string().trim().min(1).max(255);
const dateTime = z.iso.datetime({ offset: true }).transform((s) => new Date(s));

/** At most this many codes on one order (Shopify applies a handful). */
export const MAX_ORDER_DISCOUNT_CODES = 50;

const discountCodeSchema = z.strictObject({ code: z.string().trim().min(1).max(255), amount: moneyText });

const lineSchema = z.strictObject({
  productId: idText,
  variantId: idText.nullish(),
  collectionIds: z.array(idText).max(100).nullish(),
  quantity: z.number().int().min(0).max(1_000_000),
  price: moneyText,
  discount: moneyText.optional(),
  refundedQuantity: z.number().int().min(0).max(1_000_000).nullish(),
  giftCard: z.boolean().nullish(),
});

export const orderInputSchema = z.strictObject({
  customerIdentifier: customerIdentifierSchema,
  currency: currencySchema,
  subtotal: moneyText,
  shipping: moneyText.optional(),
  tax: moneyText.optional(),
  total: moneyText,
  refunded: moneyText.optional(),
  status: z.enum(ORDER_STATUSES),
  test: z.boolean().nullish(),
  lineItems: z.array(lineSchema).max(500),
  /** The codes the order used; left out (or null), the order keeps the ones it has. */
  discountCodes: z.array(discountCodeSchema).max(MAX_ORDER_DISCOUNT_CODES).nullish(),
  processedAt: dateTime.nullish(),
  /** The source's own last-change time (Shopify's updated_at): an older state than the stored one changes nothing. */
  sourceUpdatedAt: dateTime.nullish(),
});

export const orderIdSchema = z.string().trim().min(1).max(255).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');
// Built once: zod compiles an object schema on its first parse, so one made per call costs that each time.
const orderIdParams = z.object({ orderId: orderIdSchema });

export type ParsedOrder = z.output<typeof orderInputSchema>;
export type Amounts = {
  subtotal: number; shipping: number; tax: number; total: number; refunded: number;
  lines: Array<{ price: number; discount: number }>;
  /** Each discount code's amount, in the order's currency; null when the PUT names none. */
  codes: number[] | null;
};

/** Every money field in the currency's minor units; all issues at once, each with its path. */
function amountsOf(data: ParsedOrder): Amounts {
  const issues: Array<{ path: PropertyKey[]; message: string }> = [];
  const money = (value: unknown, path: PropertyKey[], fallback?: number): number => {
    // Optional amounts may be left out (or null, as GraphQL sends them): zero.
    if ((value === undefined || value === null) && fallback !== undefined) return fallback;
    const parsed = parseMoney(value, data.currency);
    if (parsed.ok) return parsed.minor;
    issues.push({ path, message: parsed.message });
    return 0;
  };
  const amounts = {
    subtotal: money(data.subtotal, ['subtotal']),
    shipping: money(data.shipping, ['shipping'], 0),
    tax: money(data.tax, ['tax'], 0),
    total: money(data.total, ['total']),
    refunded: money(data.refunded, ['refunded'], 0),
    lines: data.lineItems.map((l, i) => ({ price: money(l.price, ['lineItems', i, 'price']), discount: money(l.discount, ['lineItems', i, 'discount'], 0) })),
    codes: data.discountCodes?.map((c, i) => money(c.amount, ['discountCodes', i, 'amount'])) ?? null,
  };
  data.lineItems.forEach((l, i) => {
    if ((l.refundedQuantity ?? 0) > l.quantity) issues.push({ path: ['lineItems', i, 'refundedQuantity'], message: 'more than the quantity' });
  });
  if (issues.length) throw validationErrorFrom(issues);
  return amounts;
}

/** What the shop says must hold between an order's numbers; a state that breaks it is refused whole. */
function checkConsistent(data: ParsedOrder, amounts: Amounts): void {
  const lines = data.lineItems.reduce((sum, l, i) => sum + amounts.lines[i]!.price * l.quantity - amounts.lines[i]!.discount, 0);
  if (data.lineItems.length > 0 && lines !== amounts.subtotal) {
    throw new RuleViolationError(
      'order_totals_mismatch',
      `the line items add up to ${formatMoney(lines, data.currency)} (price × quantity − discount), not the subtotal ${formatMoney(amounts.subtotal, data.currency)}`,
      ['subtotal'],
    );
  }
  if (amounts.refunded > amounts.total) {
    throw new RuleViolationError('refund_exceeds_total', `refunded ${formatMoney(amounts.refunded, data.currency)} is more than the total`, ['refunded']);
  }
}

/** Later in an order's life means a higher rank; a state may not go back (refunded → paid). */
const STATUS_RANK: Record<OrderStatus, number> = { pending: 0, paid: 1, partially_refunded: 2, refunded: 3, cancelled: 3 };

/** One PUT of an order's full state, checked and normalised before it meets the database. */
export type OrderPut = {
  shopId: string;
  orderId: string;
  data: ParsedOrder;
  amounts: Amounts;
  lineItems: OrderLine[];
  /** The codes as the order keeps them (amounts formatted); null when the PUT leaves the stored ones. */
  discountCodes: OrderDiscountCode[] | null;
  /** Of the state alone: the same state again, however its customer is named, changes nothing. */
  stateHash: string;
  now: Date;
};

/** Everything about a PUT that needs no database: the request's shape, its money, its sums. */
export function parseOrderPut(shopId: string, orderIdInput: unknown, input: unknown, now: Date): OrderPut {
  const orderId = parseInput(orderIdParams, { orderId: orderIdInput }).orderId;
  const data = parseInput(orderInputSchema, input);
  const amounts = amountsOf(data);
  checkConsistent(data, amounts);
  const lineItems = normalizedLines(data, amounts);
  const discountCodes = data.discountCodes?.map((c, i) => ({ code: c.code, amount: formatMoney(amounts.codes![i]!, data.currency) })) ?? null;
  // A flag at its default hashes as before it existed: a state sent again after the upgrade that added it is still the same state.
  const hashed = [data.currency, amounts.subtotal, amounts.shipping, amounts.tax, amounts.total, amounts.refunded, data.status, lineItems.map(({ giftCard, ...l }) => (giftCard ? { ...l, giftCard } : l)), data.processedAt ?? null];
  const stateHash = hash('sha256', JSON.stringify(data.test ? [...hashed, 'test'] : hashed), 'base64url');
  return { shopId, orderId, data, amounts, lineItems, discountCodes, stateHash, now };
}

/** Refuses a new state that an order's stored one cannot become. */
export function checkTransition(row: OrderRow, put: OrderPut): void {
  const { data, amounts } = put;
  if (STATUS_RANK[data.status] < STATUS_RANK[row.status]) {
    throw new RuleViolationError('order_status_backwards', `the order is ${row.status}; it cannot become ${data.status}`, ['status']);
  }
  if (data.currency !== row.currency) throw new RuleViolationError('order_currency_changed', `the order is in ${row.currency}`, ['currency']);
  if (amounts.refunded < row.refunded_minor) {
    throw new RuleViolationError('order_refund_decreased', `${formatMoney(row.refunded_minor, row.currency)} was refunded already; a refund cannot be taken back`, ['refunded']);
  }
}

/** The arithmetic's view of a PUT's state. */
export function orderState(put: OrderPut): OrderState {
  const { data, amounts } = put;
  return { status: data.status, shippingMinor: amounts.shipping, taxMinor: amounts.tax, totalMinor: amounts.total, refundedMinor: amounts.refunded, lineItems: lineStates(put.lineItems, data.currency) };
}

/** What a snapshot keeps of a rule's row. */
export type SnapshotRuleRow = Pick<
  EarningRuleRow,
  'id' | 'name' | 'earn_point' | 'spent_minor' | 'include_product_ids' | 'exclude_product_ids' | 'include_collection_ids' | 'exclude_collection_ids' | 'include_shipping' | 'include_tax' | 'include_gift_cards'
>;

/** The shop's active place_order rules (in creation order) and the customer's tier multiplier, as an earn's snapshot keeps them. */
export function earnSnapshot(rows: SnapshotRuleRow[], multiplierBp: number, now: Date): EarnSnapshot {
  const rules = rows.map(
    (r): EarnRule => ({
      id: r.id,
      name: r.name,
      earnPoint: r.earn_point,
      spentMinor: Number(r.spent_minor),
      includeProductIds: r.include_product_ids,
      excludeProductIds: r.exclude_product_ids,
      includeCollectionIds: r.include_collection_ids,
      excludeCollectionIds: r.exclude_collection_ids,
      includeShipping: r.include_shipping,
      includeTax: r.include_tax,
      includeGiftCards: r.include_gift_cards,
    }),
  );
  return { rules, multiplierBp, takenAt: now.toISOString() };
}

function normalizedLines(data: ParsedOrder, amounts: Amounts): OrderLine[] {
  return data.lineItems.map((l, i) => ({
    productId: l.productId,
    variantId: l.variantId ?? null,
    collectionIds: l.collectionIds ?? [],
    quantity: l.quantity,
    price: formatMoney(amounts.lines[i]!.price, data.currency),
    discount: formatMoney(amounts.lines[i]!.discount, data.currency),
    refundedQuantity: l.refundedQuantity ?? 0,
    giftCard: l.giftCard ?? false,
  }));
}

/** The arithmetic's view of the lines, from their stored (API) form. */
function lineStates(lines: OrderLine[], currency: string): LineState[] {
  return lines.map((l) => ({
    productId: l.productId,
    collectionIds: l.collectionIds,
    quantity: l.quantity,
    priceMinor: minor(l.price, currency),
    discountMinor: minor(l.discount, currency),
    refundedQuantity: l.refundedQuantity,
    giftCard: l.giftCard,
  }));
}

/** Stored amounts are our own formatting: they parse. */
function minor(text: string, currency: string): number {
  const parsed = parseMoney(text, currency);
  if (!parsed.ok) throw new Error(`stored amount ${text} ${currency} does not parse: ${parsed.message}`);
  return parsed.minor;
}

export function toOrder(row: OrderRow): Order {
  return {
    _id: row.id,
    orderId: row.order_id,
    customer: row.customer_id,
    currency: row.currency,
    subtotal: formatMoney(row.subtotal_minor, row.currency),
    shipping: formatMoney(row.shipping_minor, row.currency),
    tax: formatMoney(row.tax_minor, row.currency),
    total: formatMoney(row.total_minor, row.currency),
    refunded: formatMoney(row.refunded_minor, row.currency),
    status: row.status,
    test: row.test,
    // Lines stored before gift cards were told apart have no flag: none was one.
    lineItems: (row.line_items as OrderLine[]).map((l) => (l.giftCard === undefined ? { ...l, giftCard: false } : l)),
    discountCodes: row.discount_codes,
    processedAt: row.processed_at,
    pointsEarned: row.points_earned - row.points_clawed_back,
    pointsPending: row.points_pending,
    pointsClawedBack: row.points_clawed_back,
    unrecoveredPoints: row.unrecovered_points,
    earnNote: row.earn_note,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/**
 * toOrder in SQL: the data of the orders/created event a statement writes with a new order (its
 * input carries no second copy of the order). `row` is the order's row as JSON (plannedRow: dates
 * as the API writes them), `money` its amounts as the API formats them (subtotal, shipping, tax,
 * total, refunded), `customer` our id of its customer.
 */
export function orderJson(row: RawBuilder<unknown>, money: RawBuilder<unknown>, customer: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`jsonb_build_object(
    '_id', ${row}->'id', 'orderId', ${row}->'order_id', 'customer', ${customer}, 'currency', ${row}->'currency',
    'subtotal', ${money}->0, 'shipping', ${money}->1, 'tax', ${money}->2, 'total', ${money}->3, 'refunded', ${money}->4,
    'status', ${row}->'status', 'test', ${row}->'test', 'lineItems', ${row}->'line_items',
    'discountCodes', ${row}->'discount_codes', 'processedAt', ${row}->'processed_at',
    'pointsEarned', (${row}->>'points_earned')::int - (${row}->>'points_clawed_back')::int, 'pointsPending', ${row}->'points_pending',
    'pointsClawedBack', ${row}->'points_clawed_back', 'unrecoveredPoints', ${row}->'unrecovered_points', 'earnNote', ${row}->'earn_note',
    'createdAt', ${row}->'created_at', 'updatedAt', ${row}->'updated_at')`;
}

export async function getOrder(db: Queryable, shopId: string, orderIdInput: unknown): Promise<Order> {
  const { orderId } = parseInput(orderIdParams, { orderId: orderIdInput });
  const row = await db.selectFrom('orders').selectAll().where('shop_id', '=', shopId).where('order_id', '=', orderId).executeTakeFirst();
  if (!row) throw new NotFoundError('order_not_found', `this shop has no order ${orderId}`, ['orderId']);
  return toOrder(row);
}

/** A customer's orders, newest first. */
function ordersList(db: Queryable, shopId: string): SeqList<OrderRow> {
  return {
    table: 'orders',
    parent: 'customer_id',
    rowsOf: (customerId) => db.selectFrom('orders').selectAll().where('shop_id', '=', shopId).where('customer_id', '=', customerId),
    column: 'seq',
    direction: 'desc',
  };
}

export function listOrders(db: Queryable, shopId: string, customerId: string, args: PageArgs): Promise<Page<Order>> {
  return pageBySeq(db, customerId, ordersList(db, shopId), args, toOrder);
}

/** listOrders for many customers in one statement, in the order of `customerIds`. */
export function listOrdersOfCustomers(db: Queryable, shopId: string, customerIds: readonly string[], args: PageArgs): Promise<Array<Page<Order>>> {
  return pagesBySeq(db, customerIds, ordersList(db, shopId), args, toOrder);
}

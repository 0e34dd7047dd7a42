import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { DB } from '../db/database.js';
import type { OrderRow, OrderStatus } from '../db/schema.js';
import { inTransaction, type Queryable, type Trx } from '../db/transaction.js';
import { customerIdentifierSchema, getCustomer } from './customers.js';
import { NotFoundError, RuleViolationError } from './errors.js';
import { recordEvent } from './events.js';
import { newId } from './ids.js';
import { currencySchema, formatMoney, parseMoney } from './money.js';
import { type EarnRule, type EarnSnapshot, EARNING_STATUSES, type LineState, MULTIPLIER_ONE, orderPoints, type OrderState } from './order-earn.js';
import { type Page, type PageArgs, pageBySeq, pagesBySeq, type SeqList } from './pagination.js';
import { holdPendingPoints, takePendingPoints } from './pending-points.js';
import { MAX_AMOUNT, writeBalanceChange } from './points.js';
import { parseInput, validationErrorFrom } from './validation.js';

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
  lineItems: OrderLine[];
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
};

/** Money arrives as strings and is checked against the order's currency once that is known. */
const moneyText = z.unknown();
const idText = z.string().trim().min(1).max(255);
const dateTime = z.iso.datetime({ offset: true }).transform((s) => new Date(s));

const lineSchema = z.strictObject({
  productId: idText,
  variantId: idText.nullish(),
  collectionIds: z.array(idText).max(100).nullish(),
  quantity: z.number().int().min(0).max(1_000_000),
  price: moneyText,
  discount: moneyText.optional(),
  refundedQuantity: z.number().int().min(0).max(1_000_000).nullish(),
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
  lineItems: z.array(lineSchema).max(500),
  processedAt: dateTime.nullish(),
  /** The source's own last-change time (Shopify's updated_at): an older state than the stored one changes nothing. */
  sourceUpdatedAt: dateTime.nullish(),
});

export const orderIdSchema = z.string().trim().min(1).max(255).regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces');

type ParsedOrder = z.output<typeof orderInputSchema>;
type Amounts = { subtotal: number; shipping: number; tax: number; total: number; refunded: number; lines: Array<{ price: number; discount: number }> };

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

function normalizedLines(data: ParsedOrder, amounts: Amounts): OrderLine[] {
  return data.lineItems.map((l, i) => ({
    productId: l.productId,
    variantId: l.variantId ?? null,
    collectionIds: l.collectionIds ?? [],
    quantity: l.quantity,
    price: formatMoney(amounts.lines[i]!.price, data.currency),
    discount: formatMoney(amounts.lines[i]!.discount, data.currency),
    refundedQuantity: l.refundedQuantity ?? 0,
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
    lineItems: row.line_items as OrderLine[],
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

/** The shop's active place_order rules, as an earn's snapshot keeps them. */
async function takeSnapshot(trx: Trx, shopId: string, now: Date): Promise<EarnSnapshot> {
  const rows = await trx
    .selectFrom('earning_rules')
    .selectAll()
    .where('shop_id', '=', shopId)
    .where('type', '=', 'place_order')
    .where('active', '=', true)
    .orderBy('created_at')
    .orderBy('id')
    .execute();
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
    }),
  );
  // Tiers (their multiplier) come with the next part of the engine; ×1 until then.
  return { rules, multiplierBp: MULTIPLIER_ONE, takenAt: now.toISOString() };
}

export type UpsertResult = { order: Order; created: boolean; changed: boolean };

/**
 * PUT semantics: the order's full state. The same state again changes nothing; a new state applies
 * exactly the difference between what it earns and what was credited before, once: the order's row
 * lock serialises concurrent PUTs of one order, and each compares with the state committed before it.
 * Lock order: order row, then its pending points, then the customer (as every engine path takes them).
 */
export async function upsertOrder(db: DB, shopId: string, orderIdInput: unknown, input: unknown, now = new Date()): Promise<UpsertResult> {
  const orderId = parseInput(z.object({ orderId: orderIdSchema }), { orderId: orderIdInput }).orderId;
  const data = parseInput(orderInputSchema, input);
  const amounts = amountsOf(data);
  checkConsistent(data, amounts);
  const lineItems = normalizedLines(data, amounts);
  const stateHash = createHash('sha256')
    .update(JSON.stringify([data.customerIdentifier.toLowerCase(), data.currency, amounts.subtotal, amounts.shipping, amounts.tax, amounts.total, amounts.refunded, data.status, lineItems, data.processedAt ?? null]))
    .digest('base64url');

  return inTransaction(db, async (trx) => {
    const customer = await getCustomer(trx, shopId, data.customerIdentifier);
    const shop = await trx.selectFrom('shops').select(['currency', 'pending_days']).where('id', '=', shopId).executeTakeFirstOrThrow();
    let row = await lockOrder(trx, shopId, orderId);
    let created = false;
    if (!row) {
      // Two first PUTs at once: one inserts, the other waits on its row and then applies as an update.
      row = await trx
        .insertInto('orders')
        .values({
          id: newId(),
          shop_id: shopId,
          customer_id: customer.id,
          order_id: orderId,
          currency: data.currency,
          subtotal_minor: 0,
          shipping_minor: 0,
          tax_minor: 0,
          total_minor: 0,
          refunded_minor: 0,
          status: 'pending',
          line_items: '[]',
          state_hash: '',
          created_at: now,
          updated_at: now,
        })
        .onConflict((oc) => oc.columns(['shop_id', 'order_id']).doNothing())
        .returningAll()
        .executeTakeFirst();
      created = row !== undefined;
      row ??= (await lockOrder(trx, shopId, orderId))!;
    }
    if (row.customer_id !== customer.id) {
      throw new RuleViolationError('order_customer_changed', `order ${orderId} belongs to another customer; an order cannot move`, ['customerIdentifier']);
    }
    if (!created) {
      const stale = data.sourceUpdatedAt && row.source_updated_at && data.sourceUpdatedAt < row.source_updated_at;
      if (stale || row.state_hash === stateHash) return { order: toOrder(row), created: false, changed: false };
      if (STATUS_RANK[data.status] < STATUS_RANK[row.status]) {
        throw new RuleViolationError('order_status_backwards', `the order is ${row.status}; it cannot become ${data.status}`, ['status']);
      }
      if (data.currency !== row.currency) throw new RuleViolationError('order_currency_changed', `the order is in ${row.currency}`, ['currency']);
      if (amounts.refunded < row.refunded_minor) {
        throw new RuleViolationError('order_refund_decreased', `${formatMoney(row.refunded_minor, row.currency)} was refunded already; a refund cannot be taken back`, ['refunded']);
      }
    }

    // The rules of the first paid state stay the order's rules: refunds and edits recompute against them.
    const state: OrderState = { status: data.status, shippingMinor: amounts.shipping, taxMinor: amounts.tax, totalMinor: amounts.total, refundedMinor: amounts.refunded, lineItems: lineStates(lineItems, data.currency) };
    let snapshot = row.earn_snapshot as EarnSnapshot | null;
    let earnNote = row.earn_note;
    if (!snapshot && EARNING_STATUSES.has(data.status)) {
      if (data.currency !== shop.currency) {
        earnNote = `the order is in ${data.currency} and the shop's program in ${shop.currency}: it earns nothing`;
      } else {
        snapshot = await takeSnapshot(trx, shopId, now);
        earnNote = snapshot.rules.length ? null : 'no place_order rule was active when the order was paid';
      }
    }
    const target = data.currency === shop.currency ? orderPoints(snapshot, state) : 0;
    if (target > MAX_AMOUNT) throw new RuleViolationError('order_points_limit', `the order would earn ${target} points; at most ${MAX_AMOUNT}`, ['total']);

    const counters = { earned: row.points_earned, pending: row.points_pending, clawedBack: row.points_clawed_back, unrecovered: row.unrecovered_points };
    const difference = target - (counters.earned - counters.clawedBack);
    const description = `order ${orderId}`;
    if (difference > 0) {
      counters.earned += difference;
      if (shop.pending_days > 0) {
        const availableAt = new Date(now.getTime() + shop.pending_days * 86_400_000);
        await holdPendingPoints(trx, { shopId, customerId: customer.id, orderId: row.id, points: difference, availableAt, description });
        counters.pending += difference;
      } else {
        await writeBalanceChange(trx, shopId, { customerId: customer.id }, { op: 'add', amount: difference, type: 'earn_points', settingType: 'order', description, note: null, topic: 'points/earned' });
      }
    } else if (difference < 0) {
      const owed = -difference;
      counters.clawedBack += owed;
      // Pending points first: they were never spendable.
      const fromPending = await takePendingPoints(trx, { orderId: row.id, customerId: customer.id, points: owed });
      counters.pending -= fromPending;
      const rest = owed - fromPending;
      const fromBalance = Math.min(rest, await balanceOf(trx, customer.id));
      counters.unrecovered += rest - fromBalance;
      if (fromBalance > 0) {
        const written = await writeBalanceChange(trx, shopId, { customerId: customer.id }, { op: 'subtract', amount: fromBalance, type: 'clawback_points', settingType: 'order', description, note: null, topic: 'points/clawed_back' });
        if (!written) throw new Error(`clawback of ${fromBalance} refused for locked customer ${customer.id}`);
      } else {
        // No ledger entry (the balance did not move): the event says what was taken, and from where.
        await recordEvent(trx, shopId, 'points/clawed_back', { customer: customer.id, order: row.id, orderId, points: owed, fromPending, unrecovered: rest });
      }
    }

    const updated = await trx
      .updateTable('orders')
      .set({
        subtotal_minor: amounts.subtotal,
        shipping_minor: amounts.shipping,
        tax_minor: amounts.tax,
        total_minor: amounts.total,
        refunded_minor: amounts.refunded,
        status: data.status,
        line_items: JSON.stringify(lineItems),
        processed_at: data.processedAt ?? row.processed_at,
        source_updated_at: data.sourceUpdatedAt ?? row.source_updated_at,
        state_hash: stateHash,
        earn_snapshot: snapshot ? JSON.stringify(snapshot) : null,
        earn_note: earnNote,
        points_earned: counters.earned,
        points_pending: counters.pending,
        points_clawed_back: counters.clawedBack,
        unrecovered_points: counters.unrecovered,
        updated_at: now,
      })
      .where('id', '=', row.id)
      .returningAll()
      .executeTakeFirstOrThrow();
    const order = toOrder(updated);
    await recordEvent(trx, shopId, created ? 'orders/created' : 'orders/updated', order);
    return { order, created, changed: true };
  });
}

/**
 * The customer's balance under the row lock balance changes take, so a clawback never takes more
 * than is there (points spent meanwhile are the shortfall, not a negative balance).
 */
async function balanceOf(trx: Trx, customerId: string): Promise<number> {
  const row = await trx.selectFrom('customers').select('points').where('id', '=', customerId).forNoKeyUpdate().executeTakeFirstOrThrow();
  return row.points;
}

function lockOrder(trx: Trx, shopId: string, orderId: string): Promise<OrderRow | undefined> {
  return trx.selectFrom('orders').selectAll().where('shop_id', '=', shopId).where('order_id', '=', orderId).forUpdate().executeTakeFirst();
}

export async function getOrder(db: Queryable, shopId: string, orderIdInput: unknown): Promise<Order> {
  const { orderId } = parseInput(z.object({ orderId: orderIdSchema }), { orderId: orderIdInput });
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

import { type RawBuilder, sql } from 'kysely';
import type { OrderDiscountCode, OrderRow, OrderStatus } from '../../db/schema.js';
import type { Queryable } from '../../db/transaction.js';
import type { CodeUse } from '../codes/index.js';
import { parseIdentifier } from '../customers/index.js';
import { DomainError, RuleViolationError } from '../kernel/index.js';
import { type Hold, MAX_AMOUNT } from '../ledger/index.js';
import { EARNING_STATUSES, type EarnSnapshot, MULTIPLIER_ONE, orderPoints } from './order-earn.js';
import { checkTransition, earnSnapshot, type Order, type OrderPut, orderState, type SnapshotRuleRow, toOrder } from './orders.js';

/**
 * What an order write decides before it writes (shared by its two writers, order-first-states.ts
 * and order-writes.ts): what the batch's PUTs are planned with, and each PUT's plan.
 */

export type UpsertResult = { order: Order; created: boolean; changed: boolean };
export type Outcome = UpsertResult | DomainError;

/** What a shop's orders earn by: its currency, pendingDays, whether test orders earn, and active place_order rules (in creation order), at a version. */
export type ShopProgram = {
  currency: string; pendingDays: number; earnOnTestOrders: boolean; version: number; rules: SnapshotRuleRow[];
  /** A fully refunded or cancelled order gives back the points of the codes it used (read afresh by the locked path, which does it). */
  returnCodePointsOnRefund: boolean;
};

export type OrderContext = {
  /** Our id of the customer each PUT names, by the PUT's index (undefined: no such customer). */
  customerIds: Array<string | undefined>;
  /** The multiplier of the tier that customer holds, in basis points, by the PUT's index. */
  multipliers: number[];
  programs: Map<string, ShopProgram>;
};

/** A PUT whose customer exists, and the multiplier of the tier they hold (basis points). */
export type Found = { put: OrderPut; index: number; customerId: string; multiplierBp: number };

/** One PUT on its way through a batch: what the database said, and what it will write. */
export type Plan = Found & {
  /** The stored row; none for an order's first state. */
  row: OrderRow | undefined;
  snapshot: EarnSnapshot | null;
  earnNote: string | null;
  /** What the new state earns minus what the order holds now: credited (> 0) or taken back (< 0). */
  difference: number;
  /** The order's counters once the plan is written (a clawback's are settled against the balance). */
  counters: { earned: number; pending: number; clawedBack: number; unrecovered: number };
};

export const orderKey = (put: OrderPut) => `${put.shopId} ${put.orderId}`;

export const isPlan = (outcome: unknown): outcome is Plan => typeof outcome === 'object' && outcome !== null && 'difference' in outcome;

/** `plan()`, or the domain error it threw. */
export function attempt<T>(plan: () => T): T | DomainError {
  try {
    return plan();
  } catch (err) {
    if (err instanceof DomainError) return err;
    throw err;
  }
}

/** The shops' programs, as a json array of ShopProgram & { id }. */
function programsJson(shopIds: string[]) {
  return sql`(
    select coalesce(json_agg(json_build_object('id', s.id, 'currency', s.currency, 'pendingDays', s.pending_days, 'earnOnTestOrders', s.earn_on_test_orders, 'version', s.program_version,
      'returnCodePointsOnRefund', s.return_code_points_on_refund,
      'rules', (select coalesce(json_agg(json_build_object('id', r.id, 'name', r.name, 'earn_point', r.earn_point, 'spent_minor', r.spent_minor,
          'include_product_ids', r.include_product_ids, 'exclude_product_ids', r.exclude_product_ids, 'include_collection_ids', r.include_collection_ids,
          'exclude_collection_ids', r.exclude_collection_ids, 'include_shipping', r.include_shipping, 'include_tax', r.include_tax,
          'include_gift_cards', r.include_gift_cards) order by r.created_at, r.id), '[]')
        from earning_rules r where r.shop_id = s.id and r.type = 'place_order' and r.active))), '[]')
    from shops s where s.id = any(${shopIds}::text[]))`;
}

type ProgramRow = { id: string } & ShopProgram;
const programMap = (rows: ProgramRow[]) => new Map(rows.map(({ id, ...program }) => [id, program]));

export async function readPrograms(db: Queryable, shopIds: string[]): Promise<Map<string, ShopProgram>> {
  const { rows } = await sql<{ programs: ProgramRow[] }>`select ${programsJson(shopIds)} as programs`.execute(db);
  return programMap(rows[0]!.programs);
}

/**
 * What the batch's PUTs are planned with, in one statement: our id of the customer each names (one
 * index probe each) and the shops' programs.
 */
export async function readContext(db: Queryable, puts: OrderPut[]): Promise<OrderContext> {
  const named = puts.map((p) => parseIdentifier(p.data.customerIdentifier));
  const { rows } = await sql<{ customers: Array<{ ord: number; id: string; multiplier: number }>; programs: ProgramRow[] }>`
    select
      (select coalesce(json_agg(json_build_object('ord', i.ord - 1, 'id', c.id, 'multiplier', ${tierMultiplier(sql`c.id`)})), '[]')
        from unnest(${puts.map((p) => p.shopId)}::text[], ${named.map((n) => ('email' in n ? n.email : null))}::text[],
          ${named.map((n) => ('shopifyCustomerId' in n ? n.shopifyCustomerId : null))}::text[]) with ordinality as i(shop_id, email, shopify_id, ord)
        cross join lateral (${customerNamed(sql`i`)}) c) as customers,
      ${programsJson([...new Set(puts.map((p) => p.shopId))])} as programs`.execute(db);
  const customerIds: Array<string | undefined> = puts.map(() => undefined);
  const multipliers = puts.map(() => MULTIPLIER_ONE);
  for (const c of rows[0]!.customers) {
    customerIds[c.ord] = c.id;
    multipliers[c.ord] = c.multiplier;
  }
  return { customerIds, multipliers, programs: programMap(rows[0]!.programs) };
}

/** The place_order multiplier of the tier a customer holds (basis points; ×1 without one), as an SQL expression. */
export function tierMultiplier(customerId: RawBuilder<unknown>) {
  return sql`coalesce((select t.multiplier_bp from tier_members m join tiers t on t.id = m.tier_id where m.customer_id = ${customerId}), ${MULTIPLIER_ONE})`;
}

/** The customer a row of `input` (shop_id, email, shopify_id) names, for a lateral join: one index probe. */
export function customerNamed(input: RawBuilder<unknown>) {
  return sql`
    select c.id from customers c where c.shop_id = ${input}.shop_id and lower(c.email) = ${input}.email
    union all
    select c.id from customers c where c.shop_id = ${input}.shop_id and c.shopify_customer_id = ${input}.shopify_id
    limit 1`;
}

/**
 * A PUT against its order's stored state (none: the order's first state): refused (it throws),
 * unchanged (the outcome), or a plan with the difference to apply and the counters it leaves.
 */
export function planPut(f: Found, row: OrderRow | undefined, shop: ShopProgram): Plan | UpsertResult {
  const { put, customerId } = f;
  if (row) {
    if (row.customer_id !== customerId) {
      throw new RuleViolationError('order_customer_changed', `order ${put.orderId} belongs to another customer; an order cannot move`, ['customerIdentifier']);
    }
    const stale = put.data.sourceUpdatedAt && row.source_updated_at && put.data.sourceUpdatedAt < row.source_updated_at;
    if (stale || (row.state_hash === put.stateHash && sameCodes(row.discount_codes, put.discountCodes))) return { order: toOrder(row), created: false, changed: false };
    checkTransition(row, put);
  }
  // The rules of the first paid state stay the order's rules: refunds and edits recompute against them.
  // Whether a test order earns is decided then too (earnOnTestOrders), and the note says why it does not.
  let snapshot = (row?.earn_snapshot ?? null) as EarnSnapshot | null;
  let earnNote = row?.earn_note ?? null;
  if (!snapshot && EARNING_STATUSES.has(put.data.status)) {
    if (put.data.currency !== shop.currency) {
      earnNote = `the order is in ${put.data.currency} and the shop's program in ${shop.currency}: it earns nothing`;
    } else if (put.data.test && !shop.earnOnTestOrders) {
      // A snapshot without rules: the order's later states earn nothing either, whatever the setting becomes.
      snapshot = earnSnapshot([], f.multiplierBp, put.now);
      earnNote = 'a test order: it earns nothing (the shop\'s earnOnTestOrders setting is off)';
    } else {
      snapshot = earnSnapshot(shop.rules, f.multiplierBp, put.now);
      earnNote = snapshot.rules.length ? null : 'no place_order rule was active when the order was paid';
    }
  }
  const target = put.data.currency === shop.currency ? orderPoints(snapshot, orderState(put)) : 0;
  if (target > MAX_AMOUNT) throw new RuleViolationError('order_points_limit', `the order would earn ${target} points; at most ${MAX_AMOUNT}`, ['total']);
  const counters = row
    ? { earned: row.points_earned, pending: row.points_pending, clawedBack: row.points_clawed_back, unrecovered: row.unrecovered_points }
    : { earned: 0, pending: 0, clawedBack: 0, unrecovered: 0 };
  const difference = target - (counters.earned - counters.clawedBack);
  // What is credited is known now (how a clawback splits between pending and balance is not, yet).
  if (difference > 0) {
    counters.earned += difference;
    if (shop.pendingDays > 0) counters.pending += difference;
  }
  return { ...f, row, snapshot, earnNote, difference, counters };
}

/** Codes left out of a PUT are the stored ones; the codes are not in the state's hash, so the hashes of orders stored before codes still match. */
const sameCodes = (stored: OrderDiscountCode[], given: OrderDiscountCode[] | null) => given === null || JSON.stringify(stored) === JSON.stringify(given);

/** The codes an order ends in a state of: (fully) refunded or cancelled; the shop may give their points back then. */
export const ENDED_STATUSES: ReadonlySet<OrderStatus> = new Set(['refunded', 'cancelled']);

/**
 * What a written plan does to codes: the ones it uses (all it names on the order's first state,
 * those a later PUT adds), and whether the order's codes give their points back now (the order
 * became refunded or cancelled, and the shop says so).
 */
export function codesOfPlan(plan: Plan, created: boolean, shop: ShopProgram): { uses: CodeUse[]; returnsPoints: boolean } {
  const { put, row, customerId } = plan;
  const before = created || !row ? [] : row.discount_codes.map((c) => c.code);
  const uses = (put.discountCodes ?? [])
    .filter((c) => !before.includes(c.code))
    .map((c) => ({ shopId: put.shopId, code: c.code, at: put.now, orderId: put.orderId, customerId }));
  const becameEnded = ENDED_STATUSES.has(put.data.status) && (created || !row || !ENDED_STATUSES.has(row.status));
  return { uses, returnsPoints: becameEnded && shop.returnCodePointsOnRefund };
}

/** A first state with codes that ends the order at once: its codes' points may come back, which only the locked path does. */
export const needsLockedPath = (put: OrderPut) => (put.discountCodes?.length ?? 0) > 0 && ENDED_STATUSES.has(put.data.status);

/** What a plan credits (`difference` > 0) holds back for the shop's pendingDays, for the order of our id `orderId`. */
export function holdOf(plan: Plan, orderId: string, pendingDays: number): Hold {
  const { put, customerId, difference } = plan;
  return { shopId: put.shopId, customerId, orderId, points: difference, availableAt: new Date(put.now.getTime() + pendingDays * 86_400_000), description: orderDescription(put) };
}

/** How the ledger and events name an order's points (the tier metric's rebuild finds an order's credits by it: migration 2026_11_27_017). */
export const orderDescription = (put: OrderPut) => `order ${put.orderId}`;

/** The row a plan leaves: the stored one (or, for a first state, `id`'s) with the new state and counters. */
export function plannedRow({ put, customerId, row, snapshot, earnNote, counters }: Plan, id = row?.id): OrderRow {
  return {
    seq: row?.seq ?? 0,
    id: id!,
    shop_id: put.shopId,
    customer_id: customerId,
    order_id: put.orderId,
    currency: put.data.currency,
    subtotal_minor: put.amounts.subtotal,
    shipping_minor: put.amounts.shipping,
    tax_minor: put.amounts.tax,
    total_minor: put.amounts.total,
    refunded_minor: put.amounts.refunded,
    status: put.data.status,
    test: put.data.test ?? false,
    line_items: put.lineItems,
    processed_at: put.data.processedAt ?? row?.processed_at ?? null,
    source_updated_at: put.data.sourceUpdatedAt ?? row?.source_updated_at ?? null,
    state_hash: put.stateHash,
    earn_snapshot: snapshot,
    earn_note: earnNote,
    points_earned: counters.earned,
    points_pending: counters.pending,
    points_clawed_back: counters.clawedBack,
    unrecovered_points: counters.unrecovered,
    created_at: row?.created_at ?? put.now,
    updated_at: put.now,
    discount_codes: put.discountCodes ?? row?.discount_codes ?? [],
  };
}

/** What a PUT sets of an order (all but its ids, customer, currency and creation). */
const STATE_COLUMNS = ['subtotal_minor', 'shipping_minor', 'tax_minor', 'total_minor', 'refunded_minor', 'status', 'test', 'line_items', 'discount_codes', 'processed_at', 'source_updated_at',
  'state_hash', 'earn_snapshot', 'earn_note', 'points_earned', 'points_pending', 'points_clawed_back', 'unrecovered_points', 'updated_at'];
const INSERT_COLUMNS = ['id', 'shop_id', 'customer_id', 'order_id', 'currency', 'created_at', ...STATE_COLUMNS];

/**
 * Inserts planned rows (plannedRow) in key order, so two batches inserting the same new orders wait
 * for each other instead of deadlocking, leaving alone an order stored already or being inserted by
 * another transaction (which this one then waits for). `from` yields the rows as `o` (of type
 * orders); `customerId`, where the plan left the customer to the statement, names it.
 */
export function insertPlannedRows(from: RawBuilder<unknown>, customerId: RawBuilder<unknown> = sql`o.customer_id`): RawBuilder<unknown> {
  const values = INSERT_COLUMNS.map((c) => (c === 'customer_id' ? customerId : sql.raw(`o.${c}`)));
  return sql`
    insert into orders (${sql.raw(INSERT_COLUMNS.join(', '))})
    select ${sql.join(values)}
    from ${from}
    order by o.shop_id, o.order_id
    on conflict (shop_id, order_id) do nothing`;
}

/** Sets planned rows' (plannedRow) new states on the stored orders of their ids. */
export function updatePlannedRows(rows: OrderRow[]): RawBuilder<unknown> {
  return sql`
    update orders set (${sql.raw(STATE_COLUMNS.join(', '))}) = (${sql.raw(STATE_COLUMNS.map((c) => `o.${c}`).join(', '))})
    from jsonb_populate_recordset(null::orders, ${JSON.stringify(rows)}::jsonb) o
    where orders.id = o.id`;
}

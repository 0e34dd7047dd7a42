import { sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../../db/database.js';
import type { CustomerRow } from '../../db/schema.js';
import { inTransaction, type Trx } from '../../db/transaction.js';
import { customerIdentifierSchema, getCustomer, toCustomer, type Customer } from '../customers/index.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { announceOutboxWrite, type DueWork, failedItems, parseInput, RuleViolationError, runClaimedInBatches, ValidationError } from '../kernel/index.js';
import { readProgram, type TierOverride, tierNotFound, toTier } from './tiers.js';

/**
 * Staff override a customer's tier until a date (docs/tiers.md "Overrides"; issue 35). The
 * override lives on the member's row (migration 2026_11_27_026): tier_id is the override's tier,
 * so orders earn by its multiplier, and while override_until is set neither the upgrade on earn
 * nor the daily evaluation moves it. It ends when cleared, or at `until` by the due-work kind
 * below; either way the customer is then judged by their metric at that moment, as the daily
 * evaluation judges (up or down). Every change of tier is a tiers/changed event in the same
 * transaction.
 *
 * Lock order, as a ladder change's: the shop's row (shared here: overrides do not wait for each
 * other), then the member's. A tier cannot be deleted, nor the shop's last tier take the members
 * with it, between reading the tier and holding it.
 */

const overrideSchema = z.strictObject({
  customerIdentifier: customerIdentifierSchema,
  // Required, null for "no tier": an omitted tier must not silently take a customer's tier away.
  tierId: z.string().trim().min(1).max(64).nullable(),
  until: z.date(),
  reason: z.string().trim().max(500).nullish(),
});
const clearSchema = z.strictObject({ customerIdentifier: customerIdentifierSchema });

export type TierOverrideResult = { customer: Customer; tierOverride: TierOverride | null };

type EndReason = 'override_cleared' | 'override_ended';

export async function overrideTier(db: DB, shopId: string, input: unknown, now = new Date(), actor?: Actor): Promise<TierOverrideResult> {
  const fields = parseInput(overrideSchema, input);
  if (fields.until.getTime() <= now.getTime()) {
    const message = 'until must be in the future: the override ends then';
    throw new ValidationError(message, [{ path: 'until', message }]);
  }
  const reason = fields.reason || null;
  return inTransaction(db, async (trx) => {
    await shareTierShop(trx, shopId);
    const customer = await getCustomer(trx, shopId, fields.customerIdentifier);
    const tier = fields.tierId === null ? null : await trx.selectFrom('tiers').selectAll().where('id', '=', fields.tierId).where('shop_id', '=', shopId).executeTakeFirst();
    if (tier === undefined) throw tierNotFound(fields.tierId!, 'tierId');
    const member = await lockMember(trx, customer);
    const tierId = tier?.id ?? null;
    const changes = member.tier_id !== tierId;
    await trx
      .updateTable('tier_members')
      .set({ tier_id: tierId, since: changes ? now : member.since, override_until: fields.until, override_reason: reason, override_at: now })
      .where('customer_id', '=', customer.id)
      .execute();
    if (changes) {
      await sql`insert into outbox_events (id, shop_id, type, data)
        values (new_event_id(), ${shopId}, 'tiers/changed', tier_event(${customer.id}, ${member.tier_id}, ${tierId}, 'override') || jsonb_build_object('until', ${fields.until.toISOString()}::text))`.execute(trx);
      announceOutboxWrite(trx);
    }
    await recordAudit(trx, shopId, actor, {
      kind: 'tierOverride.set',
      subject: { type: 'customer', id: customer.id },
      before: { tierId: member.tier_id, until: member.override_until, reason: member.override_reason },
      after: { tierId, until: fields.until, reason },
    }, now);
    const program = await readProgram(trx, shopId);
    return { customer: toCustomer(customer), tierOverride: { tier: tier ? toTier(tier, program) : null, until: fields.until, reason, createdAt: now } };
  });
}

/** Ends the customer's override now; they take the tier their metric reaches. */
export async function clearTierOverride(db: DB, shopId: string, input: unknown, now = new Date(), actor?: Actor): Promise<TierOverrideResult> {
  const { customerIdentifier } = parseInput(clearSchema, input);
  return inTransaction(db, async (trx) => {
    await shareTierShop(trx, shopId);
    const customer = await getCustomer(trx, shopId, customerIdentifier);
    const member = await lockMember(trx, customer);
    const ended = await endOverrides(trx, [customer.id], now, 'override_cleared');
    if (!ended) throw new RuleViolationError('tier_override_not_found', 'the customer\'s tier is not overridden (it may have ended meanwhile)', ['customerIdentifier']);
    const after = await trx.selectFrom('tier_members').select('tier_id').where('customer_id', '=', customer.id).executeTakeFirstOrThrow();
    await recordAudit(trx, shopId, actor, {
      kind: 'tierOverride.clear',
      subject: { type: 'customer', id: customer.id },
      before: { tierId: member.tier_id, until: member.override_until, reason: member.override_reason },
      after: { tierId: after.tier_id, until: null, reason: null },
    }, now);
    return { customer: toCustomer(customer), tierOverride: null };
  });
}

/**
 * The shop's tiers by name, lowercased (names are unique whatever their case), with its row shared
 * as an override shares it: none of them can be deleted before the caller's transaction ends. Empty
 * when the shop has no tiers. For placing tiers by name (placeTiers).
 */
export async function shareTiersByName(trx: Trx, shopId: string): Promise<Map<string, string>> {
  await shareShops(trx, [shopId]);
  const tiers = await trx.selectFrom('tiers').select(['id', 'name']).where('shop_id', '=', shopId).execute();
  return new Map(tiers.map((t) => [t.name.toLowerCase(), t.id]));
}

/**
 * Places customers in tiers they earned elsewhere (an import from another program), without
 * re-earning them: each placement is an override until `until` with `reason`, set as
 * overrideTier sets one, so the metric earned here decides once it ends. A member who holds the
 * tier under an override already is left as they are (a re-run changes nothing). The caller holds
 * the shop's row shared (shareTiersByName) and the customers' rows. Returns how many were placed.
 */
export async function placeTiers(
  trx: Trx,
  shopId: string,
  placements: ReadonlyArray<{ customerId: string; tierId: string }>,
  until: Date,
  reason: string,
  now: Date,
): Promise<number> {
  if (placements.length === 0) return 0;
  const sorted = [...placements].sort((a, b) => (a.customerId < b.customerId ? -1 : a.customerId > b.customerId ? 1 : 0));
  const ids = sorted.map((p) => p.customerId);
  await trx
    .insertInto('tier_members')
    .expression(sql`select id, ${shopId} from unnest(${ids}::text[]) as input(id) order by id`)
    .onConflict((oc) => oc.column('customer_id').doNothing())
    .execute();
  const { rows } = await sql<{ changed: boolean }>`
    with input as (
      select * from unnest(${ids}::text[], ${sorted.map((p) => p.tierId)}::text[]) as input(customer_id, tier_id)
    ), locked as (
      select m.customer_id, m.tier_id as held from tier_members m join input using (customer_id)
      where m.tier_id is distinct from input.tier_id or m.override_until is null
      order by m.customer_id for update of m
    ), placed as (
      update tier_members m set tier_id = i.tier_id, since = case when i.tier_id is distinct from l.held then ${now}::timestamptz else m.since end,
        override_until = ${until}::timestamptz, override_reason = ${reason}, override_at = ${now}::timestamptz
      from locked l join input i using (customer_id) where m.customer_id = l.customer_id
      returning m.customer_id, l.held, m.tier_id
    ), events as (
      insert into outbox_events (id, shop_id, type, data)
      select new_event_id(), ${shopId}, 'tiers/changed', tier_event(customer_id, held, tier_id, 'override') || jsonb_build_object('until', ${until.toISOString()}::text)
      from placed where tier_id is distinct from held order by customer_id
    )
    select tier_id is distinct from held as changed from placed`.execute(trx);
  if (rows.some((r) => r.changed)) announceOutboxWrite(trx);
  return rows.length;
}

/** The shops' rows, shared: their ladders and tiers_on hold still until commit. In id order, as every shop lock is taken. */
function shareShops(trx: Trx, shopIds: readonly string[]) {
  return trx.selectFrom('shops').select('tiers_on').where('id', 'in', shopIds).orderBy('id').forShare().execute();
}

/** The shop's row shared (as above), refused when it has no tiers. */
async function shareTierShop(trx: Trx, shopId: string): Promise<void> {
  const [shop] = await shareShops(trx, [shopId]);
  if (!shop?.tiers_on) throw new RuleViolationError('no_tiers', 'the shop has no tiers: create one before overriding a customer\'s tier');
}

/** The customer's member row (made if they have none yet), locked: upgrades, evaluations and ends of this customer wait. */
async function lockMember(trx: Trx, customer: CustomerRow) {
  await trx.insertInto('tier_members').values({ customer_id: customer.id, shop_id: customer.shop_id }).onConflict((oc) => oc.column('customer_id').doNothing()).execute();
  return trx.selectFrom('tier_members').selectAll().where('customer_id', '=', customer.id).forUpdate().executeTakeFirstOrThrow();
}

/**
 * Ends the overrides of these (locked) members: each takes the tier their metric reaches at `now`
 * (the daily evaluation's judgement: up or down), with a tiers/changed event when it differs from
 * the override's. Members without an override are left as they are. Returns how many ended.
 */
async function endOverrides(trx: Trx, customerIds: readonly string[], now: Date, reason: EndReason): Promise<number> {
  const { rows } = await sql<{ customer_id: string; changed: boolean }>`
    with target as (
      select m.customer_id, m.shop_id, m.tier_id as held, tier_for(m.shop_id, v.metric_value) as tier_id
      from tier_members m join shops s on s.id = m.shop_id
      cross join lateral tier_values(array[m.customer_id], s.tier_metric, s.tier_window, s.tier_window_days, s.timezone, ${now}::timestamptz, true) v
      where m.customer_id = any(${[...customerIds]}::text[]) and m.override_until is not null
    ), ended as (
      update tier_members m set tier_id = t.tier_id, since = case when t.tier_id is distinct from t.held then ${now}::timestamptz else m.since end,
        override_until = null, override_reason = null, override_at = null
      from target t where m.customer_id = t.customer_id
      returning m.customer_id, m.shop_id, t.held, t.tier_id
    ), events as (
      insert into outbox_events (id, shop_id, type, data)
      select new_event_id(), shop_id, 'tiers/changed', tier_event(customer_id, held, tier_id, ${reason}) from ended
      where tier_id is distinct from held order by customer_id
    )
    select customer_id, tier_id is distinct from held as changed from ended`.execute(trx);
  if (rows.some((r) => r.changed)) announceOutboxWrite(trx);
  return rows.length;
}

/** Overrides one end transaction claims at most: each is judged on its own metric, a read per member. */
const ENDS_PER_TRANSACTION = 100;

/**
 * Overrides end at their `until` (DESIGN.md "Time-driven work"): due members are claimed FOR
 * UPDATE SKIP LOCKED through tier_members_override_idx, so each ends once whichever instance
 * claims it, and a backlog left by downtime is caught up (judged by the metric when it runs).
 * An override changed or cleared meanwhile holds the row's lock, and is no longer due once it commits.
 */
export const tierOverrideEnd: DueWork = {
  name: 'tier_override_end',
  runDue: (db: DB, now: Date, limit: number) =>
    runClaimedInBatches(db, now, 'tier_override_end', limit, ENDS_PER_TRANSACTION, {
      claim: (trx, batch, skip) => claimDue(trx, now, batch, skip),
      keyOf: (row) => ({ item: row.customer_id, shopId: row.shop_id }),
      work: (trx, rows) => endOverrides(trx, rows.map((r) => r.customer_id), now, 'override_ended'),
    }),
  async oldestDue(db: DB, now: Date): Promise<Date | null> {
    const skip = await failedItems(db, 'tier_override_end');
    let query = db.selectFrom('tier_members').select('override_until').where('override_until', '<=', now);
    if (skip.length) query = query.where('customer_id', 'not in', skip);
    const row = await query.orderBy('override_until').limit(1).executeTakeFirst();
    return row?.override_until ?? null;
  },
};

/** Up to `limit` members whose override is due, none of `skip`, locked after their shops (shared), as overrides lock. */
async function claimDue(trx: Trx, now: Date, limit: number, skip: readonly string[]) {
  const due = () => {
    let query = trx.selectFrom('tier_members').select(['customer_id', 'shop_id']).where('override_until', '<=', now);
    if (skip.length) query = query.where('customer_id', 'not in', skip);
    return query.orderBy('override_until').orderBy('customer_id').limit(limit);
  };
  const shops = [...new Set((await due().execute()).map((r) => r.shop_id))];
  if (!shops.length) return [];
  await shareShops(trx, shops);
  return due().where('shop_id', 'in', shops).forUpdate().skipLocked().execute();
}

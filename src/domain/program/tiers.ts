import { type RawBuilder, sql } from 'kysely';
import { z } from 'zod';
import { type DB, PREPARED } from '../../db/database.js';
import type { CustomerRow } from '../../db/schema.js';
import { inTransaction, type Queryable, type Trx } from '../../db/transaction.js';
import { type Customer, customerIdentifierSchema, customerNotFound, matchesIdentifier, toCustomer } from '../customers/index.js';
import { type Actor, changedFields, recordAudit } from '../audit/index.js';
import { ConflictError, type DueWork, formatMoney, newId, nextDay, NotFoundError, parseInput, parseMoney, RuleViolationError, shopPeriods, ValidationError } from '../kernel/index.js';
import { MAX_AMOUNT } from '../ledger/index.js';
import { MULTIPLIER_ONE } from '../orders/index.js';
import { moveShopDay, oldestDueShopDay, runDueShopDays, type ShopDayRun } from './shop-days.js';

/**
 * VIP tiers (DESIGN.md "VIP tiers"; docs/tiers.md). A shop ranks its customers by one metric over
 * one window; each tier is a threshold on it and a place_order multiplier.
 *
 * The metric is kept by the database, per customer and shop-local day (tier_metric_days, and their
 * lifetime sums in tier_metric_totals), by two triggers (migration 2026_11_24_011): every ledger entry adds to points_earned and every order
 * write to amount_spent, in the writing statement, and the customer's tier rises at once when it
 * reaches a higher threshold. It falls only here, at the daily evaluation (`tierEvaluation`), so a
 * refund or a window moving on never flaps a tier within a day.
 */

export const TIER_METRICS = ['points_earned', 'amount_spent'] as const;
export const TIER_WINDOWS = ['lifetime', 'calendar_year', 'rolling_days'] as const;
export type TierSettings = { metric: (typeof TIER_METRICS)[number]; window: (typeof TIER_WINDOWS)[number]; days: number };

/** A rolling window of at most three years: longer is lifetime in all but name. */
export const TIER_WINDOW_DAYS_MAX = 1096;
/** A ladder, not a catalogue. */
const MAX_TIERS = 20;
/** ×100 at most: past that a tier is a typo. */
const MAX_MULTIPLIER_BP = 100 * MULTIPLIER_ONE;

export const tierSettingsSchema = z.strictObject({
  metric: z.enum(TIER_METRICS).optional(),
  window: z.enum(TIER_WINDOWS).optional(),
  days: z.number().int().min(1).max(TIER_WINDOW_DAYS_MAX).optional(),
});

export type Tier = {
  id: string;
  name: string;
  /** Points (points_earned) or a decimal amount in the shop's currency (amount_spent). */
  threshold: string;
  /** The place_order multiplier, a decimal string: "1", "1.25". */
  multiplier: string;
  createdAt: Date;
  updatedAt: Date;
};

type TierRow = { id: string; name: string; threshold: number; multiplier_bp: number; created_at: Date; updated_at: Date };
type Program = { metric: TierSettings['metric']; currency: string };

/** "1.25" for 12,500 basis points. */
export function formatMultiplier(bp: number): string {
  const whole = Math.floor(bp / MULTIPLIER_ONE);
  const fraction = String(bp % MULTIPLIER_ONE).padStart(4, '0').replace(/0+$/, '');
  return fraction ? `${whole}.${fraction}` : String(whole);
}

/** A metric amount as the API shows it: points, or money in the shop's currency. */
export function formatMetric(value: number, program: Program): string {
  return program.metric === 'amount_spent' ? formatMoney(value, program.currency) : String(value);
}

export function toTier(row: TierRow, program: Program): Tier {
  return {
    id: row.id,
    name: row.name,
    threshold: formatMetric(row.threshold, program),
    multiplier: formatMultiplier(row.multiplier_bp),
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

const tierFieldsSchema = z.strictObject({
  name: z.string().trim().min(1).max(64),
  threshold: z.string().trim().max(32),
  multiplier: z.string().trim().regex(/^\d{1,3}(\.\d{1,4})?$/, 'a decimal such as "1.5", at most 4 decimals').optional(),
});
const tierUpdateSchema = tierFieldsSchema.partial().extend({ id: z.string().min(1).max(64) });

function parseThreshold(value: string, program: Program): number {
  if (program.metric === 'amount_spent') {
    const money = parseMoney(value, program.currency);
    if (!money.ok) throw new ValidationError(money.message, [{ path: 'threshold', message: money.message }]);
    return money.minor;
  }
  if (!/^\d{1,10}$/.test(value) || Number(value) > MAX_AMOUNT) {
    const message = `points_earned thresholds are whole points from 0 to ${MAX_AMOUNT}, as a string ("500")`;
    throw new ValidationError(message, [{ path: 'threshold', message }]);
  }
  return Number(value);
}

function parseMultiplier(value: string): number {
  const [whole, fraction = ''] = value.split('.');
  const bp = Number(whole) * MULTIPLIER_ONE + Number(fraction.padEnd(4, '0'));
  if (bp < MULTIPLIER_ONE || bp > MAX_MULTIPLIER_BP) {
    const message = 'a multiplier is from 1 (points as the rules say) to 100';
    throw new ValidationError(message, [{ path: 'multiplier', message }]);
  }
  return bp;
}

/** Locks the shop's row (tier changes wait for each other, and for no ledger write but a moment) and reads what tiers are counted by. */
async function lockProgram(trx: Trx, shopId: string): Promise<Program & { tiersOn: boolean }> {
  const shop = await trx.selectFrom('shops').select(['tier_metric', 'currency', 'tiers_on']).where('id', '=', shopId).forUpdate().executeTakeFirst();
  if (!shop) throw new NotFoundError('shop_not_found', `no shop with id ${shopId}`);
  return { metric: shop.tier_metric as Program['metric'], currency: shop.currency, tiersOn: shop.tiers_on };
}

export async function readProgram(db: Queryable, shopId: string): Promise<Program> {
  const shop = await db.selectFrom('shops').select(['tier_metric', 'currency']).where('id', '=', shopId).executeTakeFirstOrThrow();
  return { metric: shop.tier_metric as Program['metric'], currency: shop.currency };
}

export async function listTiers(db: Queryable, shopId: string): Promise<Tier[]> {
  const [program, rows] = await Promise.all([readProgram(db, shopId), listTierRows(db, shopId)]);
  return rows.map((r) => toTier(r, program));
}

/**
 * Tiers form a ladder: thresholds differ (two tiers never overlap) and a higher tier never
 * multiplies less than a lower one. Checked on the whole ladder as the change leaves it, under the shop's lock.
 */
async function checkLadder(trx: Trx, shopId: string): Promise<void> {
  const rows = await trx.selectFrom('tiers').select(['name', 'threshold', 'multiplier_bp']).where('shop_id', '=', shopId).orderBy('threshold').execute();
  if (rows.length > MAX_TIERS) throw new RuleViolationError('tier_limit', `a shop has at most ${MAX_TIERS} tiers`);
  for (let i = 1; i < rows.length; i++) {
    if (rows[i]!.multiplier_bp < rows[i - 1]!.multiplier_bp) {
      throw new RuleViolationError(
        'tier_order',
        `tier "${rows[i]!.name}" has a higher threshold than "${rows[i - 1]!.name}" but a lower multiplier: a higher tier never earns less`,
        ['multiplier'],
      );
    }
  }
}

function translateConflict(err: unknown): never {
  const { code, constraint } = err as { code?: string; constraint?: string };
  if (code === '23505' && constraint === 'tiers_shop_name_key') throw new ConflictError('tier_name_taken', 'the shop already has a tier of that name', ['name']);
  if (code === '23505') throw new ConflictError('tier_threshold_taken', 'another tier has that threshold: two tiers cannot overlap', ['threshold']);
  throw err;
}

export async function createTier(db: DB, shopId: string, input: unknown, now = new Date(), actor?: Actor): Promise<{ tier: Tier }> {
  const fields = parseInput(tierFieldsSchema, input);
  return inTransaction(db, async (trx) => {
    const program = await lockProgram(trx, shopId);
    const row = await trx
      .insertInto('tiers')
      .values({
        id: newId(),
        shop_id: shopId,
        name: fields.name,
        threshold: parseThreshold(fields.threshold, program),
        multiplier_bp: fields.multiplier === undefined ? MULTIPLIER_ONE : parseMultiplier(fields.multiplier),
        created_at: now,
        updated_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow()
      .catch(translateConflict);
    await checkLadder(trx, shopId);
    if (!program.tiersOn) await startKeepingMetric(trx, shopId);
    await evaluateNow(trx, shopId, now);
    const tier = toTier(row, program);
    await recordAudit(trx, shopId, actor, { kind: 'tier.create', subject: { type: 'tier', id: row.id }, after: tier }, now);
    return { tier };
  });
}

export async function updateTier(db: DB, shopId: string, input: unknown, now = new Date(), actor?: Actor): Promise<{ tier: Tier }> {
  const { id, ...patch } = parseInput(tierUpdateSchema, input);
  return inTransaction(db, async (trx) => {
    const program = await lockProgram(trx, shopId);
    const prior = await trx.selectFrom('tiers').selectAll().where('id', '=', id).where('shop_id', '=', shopId).executeTakeFirst();
    const row = await trx
      .updateTable('tiers')
      .set({
        name: patch.name,
        threshold: patch.threshold === undefined ? undefined : parseThreshold(patch.threshold, program),
        multiplier_bp: patch.multiplier === undefined ? undefined : parseMultiplier(patch.multiplier),
        updated_at: now,
      })
      .where('id', '=', id)
      .where('shop_id', '=', shopId)
      .returningAll()
      .executeTakeFirst()
      .catch(translateConflict);
    if (!row || !prior) throw tierNotFound(id);
    await checkLadder(trx, shopId);
    await evaluateNow(trx, shopId, now);
    const tier = toTier(row, program);
    await recordAudit(trx, shopId, actor, { kind: 'tier.update', subject: { type: 'tier', id }, ...changedFields(toTier(prior, program), tier) }, now);
    return { tier };
  });
}

/**
 * A tier nobody holds can go. One held is refused: its holders would fall on the spot, which
 * only the daily evaluation may do. Raise its threshold out of reach, and delete it the day after.
 */
export async function deleteTier(db: DB, shopId: string, id: string, now = new Date(), actor?: Actor): Promise<{ deletedId: string }> {
  return inTransaction(db, async (trx) => {
    const program = await lockProgram(trx, shopId);
    const tier = await trx.selectFrom('tiers').selectAll().where('id', '=', id).where('shop_id', '=', shopId).executeTakeFirst();
    if (!tier) throw tierNotFound(id);
    const held = await trx.selectFrom('tier_members').select((eb) => eb.fn.countAll<number>().as('n')).where('tier_id', '=', id).executeTakeFirstOrThrow();
    if (Number(held.n) > 0) {
      throw new ConflictError('tier_in_use', `${held.n} customer(s) hold this tier; raise its threshold, let the daily evaluation move them, then delete it`, ['id']);
    }
    await trx
      .deleteFrom('tiers')
      .where('id', '=', id)
      .execute()
      .catch((err) => {
        // A customer reached it (an upgrade, an evaluation) while this waited for their commit.
        if ((err as { code?: string }).code === '23503') throw new ConflictError('tier_in_use', 'a customer reached this tier meanwhile; try again once nobody holds it', ['id']);
        throw err;
      });
    const left = await trx.selectFrom('tiers').select('id').where('shop_id', '=', shopId).limit(1).executeTakeFirst();
    if (left) await evaluateNow(trx, shopId, now);
    else await stopKeepingMetric(trx, shopId);
    await recordAudit(trx, shopId, actor, { kind: 'tier.delete', subject: { type: 'tier', id }, before: toTier(tier, program) }, now);
    return { deletedId: id };
  });
}

export function tierNotFound(id: string, field = 'id') {
  return new NotFoundError('tier_not_found', `no tier with id ${id}`, [field]);
}

/**
 * The shop's first tier: from now on the triggers keep its metric, and what happened before
 * counts too: the ledger and the orders so far are summed per customer and day, once
 * (`tier_metric_rebuild`, migration 2026_11_27_017), under the shop's lock (ledger and order
 * writes wait on it for that long).
 */
async function startKeepingMetric(trx: Trx, shopId: string): Promise<void> {
  await trx.updateTable('shops').set({ tiers_on: true }).where('id', '=', shopId).execute();
  await sql`select tier_metric_rebuild(${shopId})`.execute(trx);
}

/** The shop's last tier is gone: its metric is no longer kept, nor its evaluation run. */
async function stopKeepingMetric(trx: Trx, shopId: string): Promise<void> {
  await trx.updateTable('shops').set({ tiers_on: false }).where('id', '=', shopId).execute();
  await sql`delete from tier_metric_days d using tier_members m where m.shop_id = ${shopId} and d.customer_id = m.customer_id`.execute(trx);
  await sql`delete from tier_order_points p using tier_members m where m.shop_id = ${shopId} and p.customer_id = m.customer_id`.execute(trx);
  await trx.deleteFrom('tier_members').where('shop_id', '=', shopId).execute();
  await trx.deleteFrom('shop_day_runs').where('shop_id', '=', shopId).where('kind', '=', 'tiers').execute();
}

/**
 * The ladder or the window changed: every member is evaluated again now (an evaluation run due
 * at once), and the daily evaluation goes on from today.
 */
export async function evaluateNow(trx: Trx, shopId: string, now: Date): Promise<void> {
  const { timezone, tiers_on } = await trx.selectFrom('shops').select(['timezone', 'tiers_on']).where('id', '=', shopId).executeTakeFirstOrThrow();
  if (!tiers_on) return;
  const { day } = shopPeriods(now, timezone);
  await trx
    .insertInto('shop_day_runs')
    .values({ shop_id: shopId, kind: 'tiers', day, due_at: now, after_id: null })
    .onConflict((oc) => oc.columns(['shop_id', 'kind']).doUpdateSet({ day, due_at: now, after_id: null }))
    .execute();
}

/**
 * The metric can change only while no tier counts by it (thresholds mean points or money); the
 * window can change at any time, and everyone is evaluated again. Called by the settings writer
 * with the shop's row locked.
 */
export async function changeTierSettings(trx: Trx, shopId: string, before: { tier_metric: string }, after: { tier_metric: string }, now: Date): Promise<void> {
  if (before.tier_metric !== after.tier_metric) {
    const tier = await trx.selectFrom('tiers').select('id').where('shop_id', '=', shopId).limit(1).executeTakeFirst();
    if (tier) {
      throw new RuleViolationError('tier_metric_in_use', `the shop's tiers count ${before.tier_metric}; delete them before counting ${after.tier_metric}`, ['tiers', 'metric']);
    }
  }
  await evaluateNow(trx, shopId, now);
}

export type CustomerTier = { tier: Tier; since: Date };
/** `current`, `remaining` and the thresholds count `metric`: whole points, or money in `currency` (null for points). */
export type TierProgress = { current: string; next: Tier | null; remaining: string | null; metric: TierSettings['metric']; currency: string | null };

/** The tiers customers hold, for a loader: by customer id, in the order asked (null: none). */
export async function customerTiers(db: Queryable, shopId: string, customerIds: readonly string[]): Promise<Array<CustomerTier | null>> {
  const [program, rows] = await Promise.all([
    readProgram(db, shopId),
    db
      .selectFrom('tier_members as m')
      .innerJoin('tiers as t', 't.id', 'm.tier_id')
      .select(['m.customer_id', 'm.since', 't.id', 't.name', 't.threshold', 't.multiplier_bp', 't.created_at', 't.updated_at'])
      .where('m.shop_id', '=', shopId)
      .where('m.customer_id', 'in', customerIds)
      .execute(),
  ]);
  const byCustomer = new Map(rows.map((r) => [r.customer_id, { tier: toTier(r, program), since: r.since! }]));
  return customerIds.map((id) => byCustomer.get(id) ?? null);
}

/** Staff's override of a customer's tier (tier-overrides.ts): the tier (null: none) they hold until `until`, whatever their metric. */
export type TierOverride = { tier: Tier | null; until: Date; reason: string | null; createdAt: Date };

/** The overrides that hold customers' tiers, for a loader: by customer id, in the order asked (null: none). */
export async function tierOverrides(db: Queryable, shopId: string, customerIds: readonly string[]): Promise<Array<TierOverride | null>> {
  const [program, rows] = await Promise.all([
    readProgram(db, shopId),
    db
      .selectFrom('tier_members as m')
      .leftJoin('tiers as t', 't.id', 'm.tier_id')
      .select(['m.customer_id', 'm.override_until', 'm.override_reason', 'm.override_at', 't.id', 't.name', 't.threshold', 't.multiplier_bp', 't.created_at', 't.updated_at'])
      .where('m.shop_id', '=', shopId)
      .where('m.customer_id', 'in', customerIds)
      .where('m.override_until', 'is not', null)
      .execute(),
  ]);
  const byCustomer = new Map(
    rows.map((r) => [
      r.customer_id,
      {
        tier: r.id === null ? null : toTier(r as TierRow, program),
        until: r.override_until!,
        reason: r.override_reason,
        createdAt: r.override_at!,
      },
    ]),
  );
  return customerIds.map((id) => byCustomer.get(id) ?? null);
}

/** Where a customer stands: the tier held (null: none) and the progress toward the next. */
export type TierStanding = { held: CustomerTier | null; progress: TierProgress };

/**
 * Where customers stand, for a loader: the tier each holds and their metric over the window now
 * (this year's, for calendar_year), the next tier above the one held, and what it takes to reach
 * it. Read live, like nextExpiry, in one query (the standings with what the shop counts and the
 * ladder), so a customer's tier and progress together cost one round. Prepared: planning
 * tier_values, inlined with its windows, took 2.2 ms a call, thirty times running it (0.07 ms).
 */
export async function tierStandings(db: Queryable, shopId: string, customerIds: readonly string[], now = new Date()): Promise<TierStanding[]> {
  return standingsOf(await standingRows(db, shopId, customerIds, now, false), customerIds);
}

/**
 * A customer's record with their standing, in the standing's statement: the storefront's `me`
 * reads the record afresh at every request, and this way in the same round as its rewards. With
 * the shop's rewards_version, which tells whether the rewards an instance keeps are still the shop's.
 */
export async function customerWithStanding(
  db: Queryable,
  shopId: string,
  customerId: string,
  now = new Date(),
): Promise<{ customer: Customer; standing: TierStanding; rewardsVersion: string }> {
  const rows = await standingRows(db, shopId, [customerId], now, true);
  const row = rows.find((r) => r.customer_id === customerId);
  if (!row) throw customerNotFound({ id: customerId });
  return { customer: toCustomer(row as CustomerRow), standing: standingsOf(rows, [customerId])[0]!, rewardsVersion: row.rewards_version! };
}

type StandingRow = { tier_metric: string; currency: string; ladder: LadderJson; customer_id: string | null; value: number | null; tier_id: string | null; since: Date | null; rewards_version?: string };

/** The standings' statement, one row per customer asked for; `withRecords`: each customer's own columns too (`c.*`), and the shop's rewards_version. */
async function standingRows(db: Queryable, shopId: string, customerIds: readonly string[], now: Date, withRecords: boolean): Promise<Array<StandingRow & Partial<CustomerRow>>> {
  // One customer (the storefront's me) as array[$1]: the generic plan of an array parameter counts
  // on ten elements, so PostgreSQL judged it dearer than a custom plan and planned every call.
  const ids = customerIds.length === 1 ? sql`array[${customerIds[0]}]` : sql`${[...customerIds]}::text[]`;
  const { rows } = await sql<StandingRow & Partial<CustomerRow>>`${sql.raw(PREPARED)}
    select s.tier_metric, s.currency, l.ladder, c.id as customer_id, v.metric_value as value, m.tier_id, m.since${withRecords ? sql`, s.rewards_version, c.*` : sql``}
    from shops s
    -- Once per query, not per customer (offset 0 keeps the planner from moving it into every row).
    cross join lateral (select ${ladderJson(sql`s.id`)} as ladder offset 0) l
    left join lateral tier_values(${ids}, s.tier_metric, s.tier_window, s.tier_window_days, s.timezone, ${now}, false) v on true
    left join customers c on c.id = v.member_id and c.shop_id = s.id
    left join tier_members m on m.customer_id = c.id
    where s.id = ${shopId}`.execute(db);
  return rows;
}

function standingsOf(rows: StandingRow[], customerIds: readonly string[]): TierStanding[] {
  const program: Program = { metric: rows[0]!.tier_metric as Program['metric'], currency: rows[0]!.currency };
  const ladder = ladderRows(rows[0]!.ladder);
  const byCustomer = new Map(rows.filter((r) => r.customer_id !== null).map((r) => [r.customer_id!, r]));
  return customerIds.map((id) => {
    const row = byCustomer.get(id);
    const held = row?.tier_id ? ladder.find((t) => t.id === row.tier_id) : undefined;
    return {
      held: held ? { tier: toTier(held, program), since: row!.since! } : null,
      progress: standing(Number(row?.value ?? 0), held ? held.threshold : null, ladder, program),
    };
  });
}

/** A customer's progress from their metric's value and the threshold of the tier they hold: the next tier is the lowest above both. */
function standing(value: number, heldThreshold: number | null, ladder: readonly TierRow[], program: Program): TierProgress {
  const next = ladder.find((t) => t.threshold > Math.max(value, heldThreshold === null ? -1 : Number(heldThreshold)));
  return {
    current: formatMetric(value, program),
    next: next ? toTier(next, program) : null,
    remaining: next ? formatMetric(Math.max(0, next.threshold - value), program) : null,
    metric: program.metric,
    currency: program.metric === 'amount_spent' ? program.currency : null,
  };
}

export type CustomerTierStatus = {
  customer: string;
  tier: Tier | null;
  since: Date | null;
  metric: TierSettings['metric'];
  window: TierSettings['window'];
  progress: Pick<TierProgress, 'current' | 'next' | 'remaining'>;
  /** While staff's override holds the tier (which `tier` then is): until when, and why. */
  override: Omit<TierOverride, 'tier'> | null;
};

/**
 * GET /vip/tiers/customer: the customer's tier, since when, and their progress, by the shop's
 * customer id or e-mail. One round: the customer found with the member, the shop's settings and
 * the metric's value (a kept row for a lifetime window) and the ladder in one query; prepared, as
 * tierStandings's.
 */
export async function customerTierStatus(db: Queryable, shopId: string, query: unknown, now = new Date()): Promise<CustomerTierStatus> {
  const { customerIdentifier } = parseInput(z.object({ customerIdentifier: customerIdentifierSchema }), query);
  const { rows } = await sql<{
    customer_id: string; tier_metric: string; tier_window: string; currency: string; ladder: LadderJson; value: number;
    tier_id: string | null; since: Date | null; override_until: Date | null; override_reason: string | null; override_at: Date | null;
  }>`${sql.raw(PREPARED)}
    select c.id as customer_id, s.tier_metric, s.tier_window, s.currency, ${ladderJson(sql`s.id`)} as ladder, v.metric_value as value,
      m.tier_id, m.since, m.override_until, m.override_reason, m.override_at
    from shops s
    join (select id from customers where shop_id = ${shopId} and ${matchesIdentifier(customerIdentifier)}) c on true
    cross join lateral tier_values(array[c.id], s.tier_metric, s.tier_window, s.tier_window_days, s.timezone, ${now}, false) v
    left join tier_members m on m.customer_id = v.member_id
    where s.id = ${shopId}`.execute(db);
  const row = rows[0];
  if (!row) throw customerNotFound(customerIdentifier);
  const program: Program = { metric: row.tier_metric as Program['metric'], currency: row.currency };
  const ladder = ladderRows(row.ladder);
  const held = row.tier_id === null ? undefined : ladder.find((t) => t.id === row.tier_id);
  const progress = standing(Number(row.value), held ? held.threshold : null, ladder, program);
  return {
    customer: row.customer_id,
    tier: held ? toTier(held, program) : null,
    since: held ? row.since : null,
    metric: program.metric,
    window: row.tier_window as TierSettings['window'],
    progress: { current: progress.current, next: progress.next, remaining: progress.remaining },
    override: row.override_until ? { until: row.override_until, reason: row.override_reason, createdAt: row.override_at! } : null,
  };
}

function listTierRows(db: Queryable, shopId: string) {
  return db.selectFrom('tiers').selectAll().where('shop_id', '=', shopId).orderBy('threshold').execute();
}

/** The shop's tiers as JSON, lowest first: the ladder read inside a customer's query, not beside it on a second connection. */
type LadderJson = Array<Omit<TierRow, 'created_at' | 'updated_at'> & { created_at: string; updated_at: string }>;

function ladderJson(shopId: RawBuilder<unknown>) {
  return sql`(select coalesce(json_agg(json_build_object('id', t.id, 'name', t.name, 'threshold', t.threshold, 'multiplier_bp', t.multiplier_bp,
    'created_at', t.created_at, 'updated_at', t.updated_at) order by t.threshold), '[]') from tiers t where t.shop_id = ${shopId})`;
}

function ladderRows(ladder: LadderJson): TierRow[] {
  return ladder.map((t) => ({ ...t, created_at: new Date(t.created_at), updated_at: new Date(t.updated_at) }));
}

/**
 * Members' metrics at `now` over the shop's window (member_id, metric_value), as an SQL subquery;
 * with_prior: for calendar_year, this year's or last year's, the better (what decides the tier).
 */
function memberValues(shopId: string, ids: RawBuilder<unknown>, now: Date, withPrior: boolean) {
  return sql`(select v.member_id, v.metric_value from shops s
    cross join lateral tier_values(${ids}, s.tier_metric, s.tier_window, s.tier_window_days, s.timezone, ${now}, ${withPrior}) v where s.id = ${shopId})`;
}

/** How many members one evaluation transaction walks: short enough that live writes barely wait on it. */
const EVALUATION_BATCH = 2000;

/**
 * The daily evaluation (DESIGN.md "Time-driven work"): each shop with tiers has a shop_day_runs
 * row, due when its day begins in its time zone. Whichever instance claims it (FOR UPDATE SKIP
 * LOCKED) walks the shop's members in batches, one transaction each, setting every tier to what
 * the metric now reaches: the only place a tier falls. A member whose tier staff override holds is
 * left alone (tier-overrides.ts ends the override, and judges them then).
 */
export const tierEvaluation: DueWork = {
  name: 'tier_evaluation',
  runDue: (db: DB, now: Date, limit: number) => runDueShopDays(db, 'tier_evaluation', 'tiers', now, limit, (trx, run) => evaluateBatch(trx, run, now)),
  oldestDue: (db: DB, now: Date) => oldestDueShopDay(db, 'tier_evaluation', 'tiers', now),
};

/** Evaluates the next batch of a claimed shop's run. Counts members walked, and the day's end as one. */
async function evaluateBatch(trx: Trx, run: ShopDayRun, now: Date): Promise<number> {
  const shopId = run.shop_id;
  // What each member of the batch should hold, read without locks: most hold it already.
  const { rows } = await sql<{ customer_id: string; changes: boolean }>`
    with batch as (
      select m.customer_id, m.tier_id, m.override_until from tier_members m
      where m.shop_id = ${shopId} and m.customer_id > ${run.after_id ?? ''}
      order by m.customer_id limit ${EVALUATION_BATCH}
    )
    select b.customer_id, b.override_until is null and tier_for(${shopId}, v.metric_value) is distinct from b.tier_id as changes
    from batch b join ${memberValues(shopId, sql`array(select customer_id from batch)`, now, true)} v on v.member_id = b.customer_id
    order by b.customer_id`.execute(trx);
  const changing = rows.filter((r) => r.changes).map((r) => r.customer_id);
  if (changing.length) {
    // Then only those are locked and judged again, on what writers committed meanwhile: a live
    // write's upgrade, or its metric, is never undone by the first read.
    await sql`select 1 from tier_members where customer_id = any(${changing}::text[]) order by customer_id for update`.execute(trx);
    await sql`
      with changed as (
        update tier_members m set tier_id = t.tier_id, since = ${now}
        from (select m.customer_id, m.tier_id as held, tier_for(${shopId}, v.metric_value) as tier_id
              from tier_members m join ${memberValues(shopId, sql`${changing}::text[]`, now, true)} v on v.member_id = m.customer_id
              where m.override_until is null) t
        where m.customer_id = t.customer_id and t.tier_id is distinct from t.held
        returning m.customer_id, t.held, t.tier_id
      )
      insert into outbox_events (id, shop_id, type, data)
      select new_event_id(), ${shopId}, 'tiers/changed', tier_event(customer_id, held, tier_id, 'evaluation') from changed order by customer_id`.execute(trx);
  }
  const walked = rows.length;
  const last = rows.at(-1)?.customer_id ?? null;
  if (walked === EVALUATION_BATCH) {
    await trx.updateTable('shop_day_runs').set({ after_id: last }).where('shop_id', '=', run.shop_id).where('kind', '=', 'tiers').execute();
    return walked;
  }
  // Done: the next evaluation is due when the shop's next day begins. Days missed while the service
  // was down need no walk of their own: this one judged every member by the window as it is now.
  const { timezone } = await trx.selectFrom('shops').select('timezone').where('id', '=', run.shop_id).executeTakeFirstOrThrow();
  const today = shopPeriods(now, timezone).day;
  await moveShopDay(trx, run.shop_id, 'tiers', nextDay(run.day > today ? run.day : today));
  return walked + 1;
}

import { sql } from 'kysely';
import type { DB } from '../../db/database.js';
import type { Queryable, Trx } from '../../db/transaction.js';
import { type DueWork, failedItems, failingItems, recordShopEvents, runClaimed, runClaimedInBatches } from '../kernel/index.js';
import { writeLockedBalanceChanges } from '../ledger/index.js';

/**
 * Points that expire (DESIGN.md "Expiry"). The shop's mode decides what expires:
 * - `inactivity`: the whole balance, `days` after the customer's last points activity;
 * - `per_earn`: each credit is a lot that expires `days` after it became available, and spending
 *   draws the lot that expires soonest.
 * Points expire at the end of the shop-local day: earned on 1 March with 30 days, they can be
 * spent through 31 March. The ledger keeps lots and timers itself: the `activities_expiry` trigger
 * (migration 2026_11_24_008) turns every entry into a lot, a draw or a timer move in the statement
 * that writes it, whichever path wrote it. This module reads them, runs the due work, and applies
 * a change of mode.
 */
export const EXPIRY_MODES = ['none', 'inactivity', 'per_earn'] as const;
export type ExpiryMode = (typeof EXPIRY_MODES)[number];

export type ExpirySettings = { mode: ExpiryMode; days: number; warningDays: number };

/** How many due lots a sweep reads per customer it means to claim. */
const LOTS_PER_CUSTOMER = 10;

/** Long enough for any program (ten years); a typo cannot make points last forever. */
export const EXPIRY_DAYS_MAX = 3650;

/** The soonest expiry of a customer's points: how many, and when they go. Null when nothing will expire. */
export type NextExpiry = { points: number; at: Date };

/** nextExpiry of each of `customerIds` (of the shop), in their order, in one statement. */
export async function nextExpiries(db: Queryable, shopId: string, customerIds: readonly string[]): Promise<Array<NextExpiry | null>> {
  const { rows } = await sql<{ customer_id: string; points: number; at: Date }>`
    select i.customer_id, x.points, x.at from unnest(${customerIds}::text[]) as i(customer_id)
    cross join lateral (
      -- By customer alone, grouped in the index's order: a condition on expires_at could lead the
      -- planner to the due index and through every lot of that date.
      (select sum(l.points)::int as points, l.expires_at as at from point_lots l
      where l.customer_id = i.customer_id and l.shop_id = ${shopId}
      group by l.expires_at order by l.expires_at limit 1)
      union all
      select c.points::int, t.expires_at from expiry_timers t join customers c on c.id = t.customer_id
      where t.customer_id = i.customer_id and t.shop_id = ${shopId} and c.points > 0
    ) x`.execute(db);
  const byCustomer = new Map(rows.map((r) => [r.customer_id, { points: r.points, at: r.at }]));
  return customerIds.map((id) => byCustomer.get(id) ?? null);
}

/**
 * Applies a change of mode, in the settings' transaction: from then on (docs/expiry.md). Leaving
 * a mode drops its lots or timers (nothing expires by them any more); entering one starts every
 * positive balance afresh, as if earned now. The caller holds the shop row FOR UPDATE: every
 * ledger write of the shop holds its KEY SHARE lock (the activities foreign key) until it
 * commits, so taking it waited for the writes in flight, and the ones after it wait for this
 * commit and then see the new mode; no entry falls between the two.
 */
export async function switchExpiryMode(trx: Trx, shopId: string, mode: ExpiryMode, now: Date): Promise<void> {
  await trx.deleteFrom('point_lots').where('shop_id', '=', shopId).execute();
  await trx.deleteFrom('expiry_timers').where('shop_id', '=', shopId).execute();
  await sql`delete from expiry_warnings w using customers c where c.id = w.customer_id and c.shop_id = ${shopId}`.execute(trx);
  if (mode === 'none') return;
  const table = mode === 'per_earn' ? sql`point_lots (shop_id, customer_id, points, expires_at, warn_at, created_at)` : sql`expiry_timers (shop_id, customer_id, expires_at, warn_at)`;
  const extra = mode === 'per_earn' ? sql`c.points, e.expires_at, expiry_warn_at(e.expires_at, s.timezone, s.expiry_warning_days), ${now}::timestamptz` : sql`e.expires_at, expiry_warn_at(e.expires_at, s.timezone, s.expiry_warning_days)`;
  await sql`
    insert into ${table}
    select c.shop_id, c.id, ${extra}
    from customers c join shops s on s.id = c.shop_id
    cross join lateral (select expiry_at(${now}::timestamptz, s.timezone, s.expiry_days) as expires_at) e
    where c.shop_id = ${shopId} and c.points > 0`.execute(trx);
}

/**
 * Expired points leave the balance: for each customer with due lots (per_earn) or a due timer
 * (inactivity), one `expire_points` entry and a `points/expired` event. Customers are claimed
 * FOR UPDATE SKIP LOCKED in id order, at most 50 per transaction: a customer's row lock
 * guards their lots, so a live write waits at most for one short batch, and two instances never
 * take the same customer. The entry's draw (the trigger) takes the due lots, which are the
 * soonest. Counts lots and timers done, so a batch of customers with many lots each is full.
 */
export const pointExpiry: DueWork = {
  name: 'point_expiry',
  // Small transactions, many of them: each commits little WAL, so the commits of live writes
  // beside a mass expiry never wait long behind one (docs/benchmarks.md, "Expiry").
  runDue: (db: DB, now: Date, limit: number) =>
    runClaimedInBatches(db, now, 'point_expiry', limit, CUSTOMERS_PER_TRANSACTION, {
      claim: (trx, batch, skip) => claimExpiring(trx, now, batch, skip),
      keyOf: (customer) => ({ item: customer.id, shopId: customer.shop_id }),
      work: (trx, customers) => expire(trx, customers.map((c) => c.id), now),
    }),
  async oldestDue(db: DB, now: Date): Promise<Date | null> {
    return oldest(db, 'expires_at', now, await failedItems(db, 'point_expiry'));
  },
};

/** Customers one expiry transaction claims at most. */
const CUSTOMERS_PER_TRANSACTION = 50;

/** Up to `limit` customers with points due to expire, none of `skip` (their last try failed), locked. */
async function claimExpiring(trx: Trx, now: Date, limit: number, skip: readonly string[]) {
  // Only when a customer's expiry failed: the claim is otherwise the plain walk of the due indexes.
  const notSkipped = skip.length ? sql`and customer_id <> all(${skip}::text[])` : sql``;
  const { rows } = await sql<{ id: string; shop_id: string }>`
    with due as (
      -- A customer has several lots due at once, typically: look further than limit lots for limit customers.
      (select customer_id from point_lots where expires_at <= ${now} ${notSkipped} order by expires_at limit ${limit * LOTS_PER_CUSTOMER})
      union
      (select customer_id from expiry_timers where expires_at <= ${now} ${notSkipped} order by expires_at limit ${limit})
    )
    select c.id, c.shop_id from customers c where c.id in (select customer_id from due)
    order by c.id limit ${limit} for no key update of c skip locked`.execute(trx);
  return rows;
}

/** Expires the due points of claimed customers; returns the lots and timers done. */
async function expire(trx: Trx, ids: string[], now: Date): Promise<number> {
  // Read under the locks just taken (a new statement, a new snapshot): what is due now cannot move.
  // Each customer's lots by customer alone (FILTER, not WHERE, on the date): with a condition on
  // expires_at the planner may walk the due index instead, through every lot due, per customer.
  const { rows } = await sql<{ id: string; shop_id: string; points: number; lots: number | null; items: number; timer_at: Date | null }>`
    select c.id, c.shop_id, c.points, d.lots, d.items + (t.expires_at is not null)::int as items, t.expires_at as timer_at
    from customers c
    cross join lateral (
      select (sum(l.points) filter (where l.expires_at <= ${now}))::int as lots, (count(*) filter (where l.expires_at <= ${now}))::int as items
      from point_lots l where l.customer_id = c.id) d
    left join expiry_timers t on t.customer_id = c.id and t.expires_at <= ${now}
    where c.id = any(${ids}::text[]) order by c.id`.execute(trx);
  const changes = rows.flatMap((r) => {
    // A timer expires the whole balance; lots expire what is left of them.
    const amount = r.timer_at ? r.points : Math.min(r.lots ?? 0, r.points);
    if (amount <= 0) return [];
    const description = r.timer_at ? 'points expired after inactivity' : 'points expired';
    return [{ shopId: r.shop_id, customerId: r.id, change: { op: 'subtract' as const, amount, type: 'expire_points' as const, settingType: 'expiry' as const, description, note: null, topic: 'points/expired' as const } }];
  });
  if (changes.length) await writeLockedBalanceChanges(trx, changes);
  const timedOut = rows.filter((r) => r.timer_at).map((r) => r.id);
  if (timedOut.length) await trx.deleteFrom('expiry_timers').where('customer_id', 'in', timedOut).execute();
  await trx.deleteFrom('expiry_warnings').where('customer_id', 'in', ids).where('expires_at', '<=', now).execute();
  return rows.reduce((n, r) => n + r.items, 0);
}

/**
 * `points/expiring` events, warningDays before an expiry: one per customer per expiry date, with
 * the points that will go then. Lots and timers whose warning fell due are claimed FOR UPDATE
 * SKIP LOCKED (not their customers: a warning moves no balance) and their warn_at cleared;
 * expiry_warnings' key makes a date warned once even when lots of it were warned apart.
 */
export const expiryWarnings: DueWork = {
  name: 'expiry_warnings',
  async runDue(db: DB, now: Date, limit: number): Promise<number> {
    const failing = await failingItems(db, 'expiry_warnings', now);
    return (
      (await runClaimed(db, now, failing, {
        claim: (trx, skip) => claimWarnings(trx, now, limit, skip),
        keyOf: (due) => ({ item: due.customerId, shopId: due.shopId }),
        work: (trx, due) => warn(trx, due, now),
      })) ?? 0
    );
  },
  async oldestDue(db: DB, now: Date): Promise<Date | null> {
    return oldest(db, 'warn_at', now, await failedItems(db, 'expiry_warnings'));
  },
};

/** A customer's lots and timer whose warning fell due (the item a warning's failure is recorded for). */
type DueWarnings = { customerId: string; shopId: string; lots: string[]; timer: boolean };

/** Up to `limit` lots and timers whose warning is due, of customers not in `skip`, locked; by customer. */
async function claimWarnings(trx: Trx, now: Date, limit: number, skip: readonly string[]): Promise<DueWarnings[]> {
  const notSkipped = skip.length ? sql`and customer_id <> all(${skip}::text[])` : sql``;
  const { rows } = await sql<{ lot: string | null; shop_id: string; customer_id: string }>`
    with lots as (
      select id, shop_id, customer_id from point_lots where warn_at <= ${now} ${notSkipped} order by warn_at limit ${limit} for update skip locked
    ), timers as (
      select shop_id, customer_id from expiry_timers where warn_at <= ${now} ${notSkipped} order by warn_at limit ${limit} for update skip locked
    )
    select id::text as lot, shop_id, customer_id from lots union all select null, shop_id, customer_id from timers`.execute(trx);
  const byCustomer = new Map<string, DueWarnings>();
  for (const row of rows) {
    let due = byCustomer.get(row.customer_id);
    if (!due) byCustomer.set(row.customer_id, (due = { customerId: row.customer_id, shopId: row.shop_id, lots: [], timer: false }));
    if (row.lot === null) due.timer = true;
    else due.lots.push(row.lot);
  }
  return [...byCustomer.values()];
}

/** Clears the claimed warnings and records their events; returns the lots and timers done. */
async function warn(trx: Trx, due: DueWarnings[], now: Date): Promise<number> {
  const lots = due.flatMap((d) => d.lots);
  const timers = due.filter((d) => d.timer).map((d) => d.customerId);
  const { rows } = await sql<{ shop_id: string; customer_id: string; expires_at: Date; points: number; fresh: boolean }>`
    with lots as (
      update point_lots l set warn_at = null where l.id = any(${lots}::bigint[])
      returning l.shop_id, l.customer_id, l.expires_at
    ), timers as (
      update expiry_timers t set warn_at = null where t.customer_id = any(${timers}::text[])
      returning t.shop_id, t.customer_id, t.expires_at
    ), claimed as (
      select distinct shop_id, customer_id, expires_at from (select * from lots union all select * from timers) x
    ), warned as (
      insert into expiry_warnings (customer_id, expires_at)
      select customer_id, expires_at from claimed where expires_at > ${now}
      on conflict do nothing
      returning customer_id, expires_at
    )
    select c.shop_id, c.customer_id, c.expires_at, w.customer_id is not null as fresh, coalesce(
      (select sum(l.points)::int from point_lots l where l.customer_id = c.customer_id and l.expires_at = c.expires_at),
      (select cu.points from customers cu join expiry_timers t on t.customer_id = cu.id where cu.id = c.customer_id and t.expires_at = c.expires_at),
      0) as points
    from claimed c left join warned w on w.customer_id = c.customer_id and w.expires_at = c.expires_at
    order by c.customer_id, c.expires_at`.execute(trx);
  const events = rows
    .filter((r) => r.fresh && r.points > 0)
    .map((r) => ({ shopId: r.shop_id, type: 'points/expiring' as const, data: { customer: r.customer_id, points: r.points, expiresAt: r.expires_at.toISOString() } }));
  await recordShopEvents(trx, events);
  return lots.length + timers.length;
}

async function oldest(db: DB, column: 'expires_at' | 'warn_at', now: Date, skip: readonly string[]): Promise<Date | null> {
  const notSkipped = skip.length ? sql`and customer_id <> all(${skip}::text[])` : sql``;
  const { rows } = await sql<{ at: Date | null }>`
    select least(
      (select min(${sql.ref(column)}) from point_lots where ${sql.ref(column)} <= ${now} ${notSkipped}),
      (select min(${sql.ref(column)}) from expiry_timers where ${sql.ref(column)} <= ${now} ${notSkipped})) as at`.execute(db);
  return rows[0]?.at ?? null;
}

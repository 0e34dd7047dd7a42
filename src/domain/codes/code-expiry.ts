import { sql } from 'kysely';
import type { DB } from '../../db/database.js';
import type { DiscountCodeRow } from '../../db/schema.js';
import type { Trx } from '../../db/transaction.js';
import { type DueWork, failedItems, failingItems, recordShopEvents, runClaimed, runClaimedInBatches } from '../kernel/index.js';
import { endCode, returnCodePoints } from './code-states.js';
import { toDiscountCode } from './discount-codes.js';

/**
 * Codes expire at their expiresAt (the reward's expiry, set at issue): due issued codes are claimed
 * FOR UPDATE SKIP LOCKED through discount_codes_expiry_idx, so each expires once whichever instance
 * claims it, and a backlog left by downtime is caught up. The end goes through `endCode`, under the
 * same row lock an order's use and a cancellation take: when they race, one wins. Where the shop
 * returns the points of expired codes, they come back in the same transaction, once.
 */
export const codeExpiry: DueWork = {
  name: 'code_expiry',
  // Short transactions: a returned code's ledger write holds its customer's row lock until commit.
  runDue: (db: DB, now: Date, limit: number) =>
    runClaimedInBatches(db, now, 'code_expiry', limit, CODES_PER_TRANSACTION, {
      claim: (trx, batch, skip) => claimExpired(trx, now, batch, skip),
      keyOf: (row) => ({ item: row.id, shopId: row.shop_id }),
      work: expire,
    }),
  async oldestDue(db: DB, now: Date): Promise<Date | null> {
    const skip = await failedItems(db, 'code_expiry');
    let query = db.selectFrom('discount_codes').select('expires_at').where('status', '=', 'issued').where('expires_at', 'is not', null).where('expires_at', '<=', now);
    if (skip.length) query = query.where('id', 'not in', skip);
    const row = await query.orderBy('expires_at').limit(1).executeTakeFirst();
    return row?.expires_at ?? null;
  },
};

/** Codes one expiry transaction claims at most. */
const CODES_PER_TRANSACTION = 50;

type ExpiringCode = DiscountCodeRow & { return_points: boolean };

/** Up to `limit` issued codes past their expiry, none of `skip` (their last try failed), locked, with their shop's setting. */
function claimExpired(trx: Trx, now: Date, limit: number, skip: readonly string[]): Promise<ExpiringCode[]> {
  let query = trx
    .selectFrom('discount_codes as d')
    .innerJoin('shops as s', 's.id', 'd.shop_id')
    .selectAll('d')
    .select('s.return_points_on_code_expiry as return_points')
    .where('d.status', '=', 'issued')
    .where('d.expires_at', 'is not', null)
    .where('d.expires_at', '<=', now);
  if (skip.length) query = query.where('d.id', 'not in', skip);
  return query.orderBy('d.expires_at').orderBy('d.id').limit(limit).forUpdate(['d']).skipLocked().execute();
}

/** Expires claimed codes, their customers in id order (the ledger's lock order), returning points where the shop says so. */
async function expire(trx: Trx, rows: ExpiringCode[]): Promise<number> {
  for (const { return_points, ...row } of [...rows].sort((a, b) => (a.customer_id < b.customer_id ? -1 : a.customer_id > b.customer_id ? 1 : 0))) {
    const { row: ended, changed } = await endCode(trx, row, { status: 'expired' });
    // A balance at its maximum refuses the points: the code's expiry fails alone, and is tried again.
    if (changed && return_points) await returnCodePoints(trx, ended, `Code ${ended.code} expired`);
  }
  return rows.length;
}

/**
 * `redemptions/expiring`, the shop's codeWarningDays before a code expires, once per code
 * (warned_at). The moment is shop-local, as for points (docs/expiry.md): from the start of the
 * shop's day codeWarningDays before the expiry's day, i.e. while the code expires before the end
 * of the shop's day codeWarningDays from today (`expiry_at(now, zone, days)`, migration 008). A
 * code that ends first (used, cancelled, expired) is never warned. Read per shop that warns, each
 * through discount_codes_warning_idx (migration 021): a pass costs the shops that warn plus the
 * codes due, not the codes that wait.
 */
export const codeWarnings: DueWork = {
  name: 'code_warnings',
  async runDue(db: DB, now: Date, limit: number): Promise<number> {
    const failing = await failingItems(db, 'code_warnings', now);
    return (
      (await runClaimed(db, now, failing, {
        claim: (trx, skip) => claimWarnings(trx, now, limit, skip),
        keyOf: (row) => ({ item: row.id, shopId: row.shop_id }),
        work: (trx, rows) => warn(trx, rows, now),
      })) ?? 0
    );
  },
  async oldestDue(db: DB, now: Date): Promise<Date | null> {
    const { rows } = await sql<{ at: Date | null }>`
      select min(expiry_warn_at(w.expires_at, s.timezone, s.code_warning_days)) as at
      from shops s cross join lateral (${dueWarnings(now, await failedItems(db, 'code_warnings'), 1)}) w
      where s.code_warning_days > 0`.execute(db);
    return rows[0]?.at ?? null;
  },
};

/**
 * The codes of shop `s` whose warning is due at `now`, soonest expiry first: issued, not warned,
 * expiring after now and before the end of the shop's day codeWarningDays ahead. That is
 * expiry_warn_at(expires_at) <= now, written as a range of expires_at the index serves.
 */
function dueWarnings(now: Date, skip: readonly string[], limit: number) {
  const notSkipped = skip.length ? sql`and c.id <> all(${skip}::text[])` : sql``;
  return sql`
    select c.id, c.expires_at from discount_codes c
    where c.shop_id = s.id and c.status = 'issued' and c.warned_at is null and c.expires_at is not null
      and c.expires_at > ${now} and c.expires_at < expiry_at(${now}::timestamptz, s.timezone, s.code_warning_days) ${notSkipped}
    order by c.expires_at limit ${limit}`;
}

/** Up to `limit` codes whose warning is due, none of `skip`, locked; a code ended meanwhile is not taken. */
async function claimWarnings(trx: Trx, now: Date, limit: number, skip: readonly string[]): Promise<DiscountCodeRow[]> {
  const { rows } = await sql<DiscountCodeRow>`
    select d.* from discount_codes d
    where d.id in (
      select w.id from shops s cross join lateral (${dueWarnings(now, skip, limit)}) w
      where s.code_warning_days > 0 order by w.expires_at limit ${limit})
    and d.status = 'issued' and d.warned_at is null
    order by d.id for update skip locked`.execute(trx);
  return rows;
}

/** Marks claimed codes warned and records their events. */
async function warn(trx: Trx, rows: DiscountCodeRow[], now: Date): Promise<number> {
  const warned = await trx.updateTable('discount_codes').set({ warned_at: now }).where('id', 'in', rows.map((r) => r.id)).returningAll().execute();
  await recordShopEvents(trx, warned.map((row) => ({ shopId: row.shop_id, type: 'redemptions/expiring' as const, data: toDiscountCode(row) })));
  return rows.length;
}

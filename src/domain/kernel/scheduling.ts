import { sql } from 'kysely';
import type { DB } from '../../db/database.js';
import { inTransaction, type Queryable, type Trx } from '../../db/transaction.js';

/**
 * One kind of time-driven work (DESIGN.md "Time-driven work"): rows with a due time, done by
 * whichever instance claims them first (FOR UPDATE SKIP LOCKED), so each item happens once across
 * instances, survives restarts and catches up after downtime. Pending points becoming available
 * are the first kind; expiry, warnings, birthdays and tier evaluation follow.
 *
 * Every item fails alone (DESIGN.md "every row fails alone"): a kind does its claims through
 * `runClaimed`, which records an item's failure in due_work_failures instead of throwing, and
 * skips the items that wait there. A kind that throws anyway is the scheduler's to log and count.
 */
export type DueWork = {
  /** For logs, /metrics and due_work_failures.kind. */
  name: string;
  /** Claims up to `limit` items due at `now`, does them and commits; returns how many it did or set aside. */
  runDue(db: DB, now: Date, limit: number): Promise<number>;
  /** When the oldest item still waiting fell due (for the lag), or null when nothing is due at `now`; items whose try failed do not count (the failure gauges do). */
  oldestDue(db: DB, now: Date): Promise<Date | null>;
};

/** Tries an item gets before it is set aside. */
export const MAX_ATTEMPTS = 5;
/** The wait after the 1st, 2nd, ... failure: about 36 minutes from the first try to the last. */
export const RETRY_DELAYS_MS = [10_000, 60_000, 5 * 60_000, 30 * 60_000] as const;
/** What a failure's reason keeps of its message. */
const REASON_MAX = 1000;

/** An item of a kind: its key (an inbox row, a pending row, a customer, a shop's day run) and its shop. */
export type ItemKey = { item: string; shopId: string };

/**
 * A kind's failures as one pass of it sees them: `skip` are the items its claims leave alone
 * (waiting for their next try, or set aside), `retrying` those whose next try is due, whose row
 * goes when they succeed. Read once per `runDue`; failures the pass records are added to `skip`.
 */
export type FailingItems = { kind: string; skip: Set<string>; retrying: Set<string> };

/**
 * A next try a running worker has not made for this long means its item is no longer due (done
 * by another instance after the transaction that claimed it died) or no worker ran: its row says
 * nothing any more, and goes. An item still due then starts its tries afresh.
 */
const STALE_MS = 86_400_000;

export async function failingItems(db: Queryable, kind: string, now: Date): Promise<FailingItems> {
  const rows = await db.selectFrom('due_work_failures').select(['item', 'next_attempt_at', 'set_aside_at']).where('kind', '=', kind).execute();
  const failing: FailingItems = { kind, skip: new Set(), retrying: new Set() };
  const stale: string[] = [];
  for (const row of rows) {
    if (row.set_aside_at !== null || row.next_attempt_at > now) failing.skip.add(row.item);
    else if (now.getTime() - row.next_attempt_at.getTime() > STALE_MS) stale.push(row.item);
    else failing.retrying.add(row.item);
  }
  if (stale.length) await db.deleteFrom('due_work_failures').where('kind', '=', kind).where('item', 'in', stale).where('set_aside_at', 'is', null).execute();
  return failing;
}

/**
 * The items of `kind` a lag leaves out: every one with a failure (the failure gauges count
 * them), so a retry falling due does not read as an item waiting since it first fell due.
 */
export async function failedItems(db: Queryable, kind: string): Promise<string[]> {
  const rows = await db.selectFrom('due_work_failures').select('item').where('kind', '=', kind).execute();
  return rows.map((r) => r.item);
}

export type Failure = { attempts: number; reason: string; setAside: boolean; nextAttemptAt: Date };

/** A failure's message, as the database can store it and a person can read it. */
function reasonOf(err: unknown): string {
  const message = err instanceof Error ? err.message || err.name : String(err);
  // Cut first: a cut may split a surrogate pair, and a lone half cannot be stored either.
  return message.slice(0, REASON_MAX).replaceAll('\u0000', '').replace(/\p{Cs}/gu, '\uFFFD');
}

/** Records a failed try of an item: its next try after a backoff, or set aside after the last. */
export async function recordFailure(db: Queryable, kind: string, key: ItemKey, err: unknown, now: Date): Promise<Failure> {
  const reason = reasonOf(err);
  const delays = sql`(array[${sql.join(RETRY_DELAYS_MS.map((ms) => sql.lit(ms)))}]::int[])`;
  const { rows } = await sql<{ attempts: number; next_attempt_at: Date; set_aside_at: Date | null }>`
    insert into due_work_failures as f (kind, item, shop_id, attempts, reason, first_failed_at, last_failed_at, next_attempt_at, set_aside_at)
    values (${kind}, ${key.item}, ${key.shopId}, 1, ${reason}, ${now}, ${now}, ${now}::timestamptz + ${delays}[1] * interval '1 ms', null)
    on conflict (kind, item) do update set
      attempts = f.attempts + 1,
      reason = excluded.reason,
      last_failed_at = excluded.last_failed_at,
      next_attempt_at = excluded.last_failed_at + coalesce(${delays}[f.attempts + 1], 0) * interval '1 ms',
      set_aside_at = case when f.attempts + 1 >= ${MAX_ATTEMPTS} then excluded.last_failed_at end
    returning attempts, next_attempt_at, set_aside_at`.execute(db);
  const row = rows[0]!;
  return { attempts: row.attempts, reason, setAside: row.set_aside_at !== null, nextAttemptAt: row.next_attempt_at };
}

export type ClaimSteps<T> = {
  /** Claims due items (locked: FOR UPDATE SKIP LOCKED), none of `skip`. */
  claim(trx: Trx, skip: readonly string[]): Promise<T[]>;
  keyOf(item: T): ItemKey;
  /** Does the items; returns how many units of work that was (the kind's count). */
  work(trx: Trx, items: T[]): Promise<number>;
  /** Also told of each failure, in the transaction that records it (the inbox shows it on its row). */
  onFailure?(trx: Trx, item: T, failure: Failure): Promise<unknown>;
};

/**
 * Claims a batch of `failing.kind` and does it in one transaction, each item failing alone: the
 * batch runs under a savepoint, and if it throws, item after item under a savepoint of its own,
 * so the others still commit and only the failing one's failure is recorded. If the transaction
 * itself dies (its connection, its commit), the failures of what it claimed are recorded in a
 * fresh one. Returns the units done plus one per item that failed; undefined when nothing was due.
 * Throws only when nothing could be recorded (the database is down): the scheduler's to log.
 */
export async function runClaimed<T>(db: DB, now: Date, failing: FailingItems, steps: ClaimSteps<T>): Promise<number | undefined> {
  const fail = async (trx: Trx, item: T, err: unknown) => {
    const key = steps.keyOf(item);
    const failure = await recordFailure(trx, failing.kind, key, err, now);
    await steps.onFailure?.(trx, item, failure);
    return key.item;
  };
  let claimed: T[] = [];
  let failed: string[] = [];
  try {
    const units = await inTransaction(db, async (trx) => {
      claimed = await steps.claim(trx, [...failing.skip]);
      if (!claimed.length) return undefined;
      const done: T[] = [];
      let units = 0;
      await sql`savepoint batch`.execute(trx);
      try {
        units = await steps.work(trx, claimed);
        done.push(...claimed);
      } catch (err) {
        await sql`rollback to savepoint batch`.execute(trx);
        if (claimed.length === 1) {
          failed.push(await fail(trx, claimed[0]!, err));
        } else {
          for (const item of claimed) {
            await sql`savepoint item`.execute(trx);
            try {
              units += await steps.work(trx, [item]);
              await sql`release savepoint item`.execute(trx);
              done.push(item);
            } catch (itemErr) {
              await sql`rollback to savepoint item`.execute(trx);
              failed.push(await fail(trx, item, itemErr));
            }
          }
        }
      }
      await forgetRecovered(trx, failing, done.map((item) => steps.keyOf(item).item));
      return units + failed.length;
    });
    for (const item of failed) failing.skip.add(item);
    return units;
  } catch (err) {
    if (!claimed.length) throw err;
    const items = claimed;
    failed = await inTransaction(db, async (trx) => {
      const recorded: string[] = [];
      for (const item of items) recorded.push(await fail(trx, item, err));
      return recorded;
    });
    for (const item of failed) failing.skip.add(item);
    return items.length;
  }
}

/**
 * A kind's pass in short transactions: claims and does up to `perTransaction` items at a time,
 * each transaction through `runClaimed`, until `limit` units are done or nothing is due. Short, so
 * the commits of live writes beside a large backlog never wait long behind one.
 */
export async function runClaimedInBatches<T>(
  db: DB,
  now: Date,
  kind: string,
  limit: number,
  perTransaction: number,
  steps: Omit<ClaimSteps<T>, 'claim'> & { claim(trx: Trx, limit: number, skip: readonly string[]): Promise<T[]> },
): Promise<number> {
  const failing = await failingItems(db, kind, now);
  let done = 0;
  while (done < limit) {
    const batch = Math.min(limit - done, perTransaction);
    const step = await runClaimed(db, now, failing, { ...steps, claim: (trx, skip) => steps.claim(trx, batch, skip) });
    if (!step) break;
    done += step;
  }
  return done;
}

/** Items that had failed before and are done now leave due_work_failures. */
async function forgetRecovered(trx: Trx, failing: FailingItems, done: string[]): Promise<void> {
  if (!failing.retrying.size) return;
  const recovered = done.filter((item) => failing.retrying.has(item));
  if (!recovered.length) return;
  await trx.deleteFrom('due_work_failures').where('kind', '=', failing.kind).where('item', 'in', recovered).execute();
  for (const item of recovered) failing.retrying.delete(item);
}

// --- what failed, for /metrics, the CLI and the shop ---------------------------------------------

export type FailureCounts = { setAside: number; retrying: number };

/** Per kind: items set aside, and items whose last try failed that will be tried again. */
export async function countFailures(db: Queryable): Promise<Record<string, FailureCounts>> {
  const rows = await db
    .selectFrom('due_work_failures')
    .select((eb) => [
      'kind',
      eb.fn.countAll<number>().filterWhere('set_aside_at', 'is not', null).as('set_aside'),
      eb.fn.countAll<number>().filterWhere('set_aside_at', 'is', null).as('retrying'),
    ])
    .groupBy('kind')
    .execute();
  return Object.fromEntries(rows.map((r) => [r.kind, { setAside: Number(r.set_aside), retrying: Number(r.retrying) }]));
}

export type FailureFilter = { kind?: string; shopId?: string; item?: string };

export type DueWorkFailure = { kind: string; item: string; shopId: string; attempts: number; reason: string; firstFailedAt: Date; lastFailedAt: Date; nextAttemptAt: Date; setAsideAt: Date | null };

/** The failures matching `filter`, set aside ones only unless `all`; oldest first. */
export async function listFailures(db: Queryable, filter: FailureFilter, options: { all?: boolean; limit?: number } = {}): Promise<DueWorkFailure[]> {
  let query = db.selectFrom('due_work_failures').selectAll();
  if (filter.kind) query = query.where('kind', '=', filter.kind);
  if (filter.shopId) query = query.where('shop_id', '=', filter.shopId);
  if (filter.item) query = query.where('item', '=', filter.item);
  if (!options.all) query = query.where('set_aside_at', 'is not', null);
  const rows = await query.orderBy('first_failed_at').orderBy('kind').orderBy('item').limit(options.limit ?? 1000).execute();
  return rows.map((r) => ({
    kind: r.kind,
    item: r.item,
    shopId: r.shop_id,
    attempts: r.attempts,
    reason: r.reason,
    firstFailedAt: r.first_failed_at,
    lastFailedAt: r.last_failed_at,
    nextAttemptAt: r.next_attempt_at,
    setAsideAt: r.set_aside_at,
  }));
}

/**
 * Gives the items set aside that match `filter` their tries again: their failures are forgotten,
 * so the next pass claims them like any due item. Returns how many.
 */
export async function retrySetAside(db: Queryable, filter: FailureFilter): Promise<number> {
  let query = db.deleteFrom('due_work_failures').where('set_aside_at', 'is not', null);
  if (filter.kind) query = query.where('kind', '=', filter.kind);
  if (filter.shopId) query = query.where('shop_id', '=', filter.shopId);
  if (filter.item) query = query.where('item', '=', filter.item);
  const result = await query.executeTakeFirst();
  return Number(result.numDeletedRows);
}

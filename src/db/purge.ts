import { setTimeout as sleep } from 'node:timers/promises';
import { type Kysely, sql } from 'kysely';

/** How a purge runs beside live traffic (docs/operations.md "Retention"). */
export type PurgeOptions = {
  /** Rows read per statement (default 500), so each statement holds few locks, briefly. */
  batchSize?: number;
  /**
   * Pause between statements. Default: twice as long as the last statement took, so a purge holds
   * one connection (or PGlite's only one) at most a third of the time, whatever the table's size:
   * with half, concurrent writes on a two-core server fell to about 0.55-0.85 of their rate.
   */
  pauseMs?: number;
  /** Stops the purge between two statements (the server stopping). */
  signal?: AbortSignal;
};

/** One statement's work: how many rows it deleted, and where the next one starts (null: range done). */
export type PurgeStep<P> = { deleted: number; next: P | null };

/**
 * Walks an index range from its start in statements of at most `batchSize` rows each. `step`
 * reads the rows after `position` (null: from the start), deletes those that qualify, and returns
 * the key of the last row it read, whether deleted or passed over: the next statement starts after
 * it, so no statement reads again what an earlier one read. Resolves to the number deleted.
 */
export async function purgeInBatches<P>(
  options: PurgeOptions,
  step: (position: P | null, limit: number) => Promise<PurgeStep<P>>,
): Promise<number> {
  const limit = options.batchSize ?? 500;
  let position: P | null = null;
  let total = 0;
  for (;;) {
    if (options.signal?.aborted) return total;
    const started = performance.now();
    const { deleted, next } = await step(position, limit);
    total += deleted;
    if (next === null) return total;
    position = next;
    await sleep(options.pauseMs ?? 2 * (performance.now() - started));
  }
}

/** A purge position on a (time, id) index. */
export type TimeKey = { at: Date; id: string };

/** The greatest (time, id) key among a batch's rows: where the next batch starts. */
export function lastTimeKey<R>(rows: readonly R[], key: (row: R) => TimeKey): TimeKey | null {
  return rows.map(key).reduce<TimeKey | null>((max, k) => (!max || k.at > max.at || (k.at.getTime() === max.at.getTime() && k.id > max.id) ? k : max), null);
}

/**
 * Deletes a table's rows whose `expires_at` is before `before`, in batches along its
 * (expires_at, id) index: tokens and sessions past their end (customer access tokens, staff
 * sessions and links).
 */
export async function purgeExpiredRows(db: Kysely<any>, table: string, before: Date, options: PurgeOptions = {}): Promise<number> {
  return purgeInBatches<TimeKey>(options, async (position, limit) => {
    const { rows } = await sql<{ id: string; expires_at: Date }>`
      delete from ${sql.table(table)}
      where id = any(array(
        select id from ${sql.table(table)}
        where expires_at < ${before} ${position ? sql`and (expires_at, id) > (${position.at}, ${position.id})` : sql``}
        order by expires_at, id
        limit ${limit}))
      returning id, expires_at`.execute(db);
    return { deleted: rows.length, next: rows.length < limit ? null : lastTimeKey(rows, (r) => ({ at: r.expires_at, id: r.id })) };
  });
}

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
  return purgeRowsBefore(db, table, 'expires_at', before, options);
}

/**
 * Deletes a table's rows whose `column` is before `before` (and, given `only`, that match it), in
 * batches along a (column, id) index (partial on `only`, when given).
 */
export async function purgeRowsBefore(db: Kysely<any>, table: string, column: string, before: Date, options: PurgeOptions = {}, only = sql<boolean>`true`): Promise<number> {
  const at = sql.ref(column);
  return purgeInBatches<TimeKey>(options, async (position, limit) => {
    const { rows } = await sql<{ id: string; at: Date }>`
      delete from ${sql.table(table)}
      where id = any(array(
        select id from ${sql.table(table)}
        where ${only} and ${at} < ${before} ${position ? sql`and (${at}, id) > (${position.at}, ${position.id})` : sql``}
        order by ${at}, id
        limit ${limit}))
      returning id, ${at} as at`.execute(db);
    return { deleted: rows.length, next: rows.length < limit ? null : lastTimeKey(rows, (r) => ({ at: r.at, id: r.id })) };
  });
}

/**
 * VACUUM (ANALYZE) of the tables a purge run deleted from, so the next run does not step over their
 * dead index entries again and the planner sees their new size, whether or not autovacuum runs
 * (PGlite has none; a shop's server may have it off or slow). Outside any transaction, as VACUUM
 * must be. On PostgreSQL paced as autovacuum is (vacuum_cost_delay 2 ms, on the one connection it
 * runs on), so live traffic keeps its pace; PGlite cannot sleep inside a statement (a delay there
 * kills its backend), and has no traffic but its own process's.
 */
export async function vacuumPurged(database: { db: Kysely<any>; kind: 'postgres' | 'pglite' }, tables: readonly string[]): Promise<void> {
  await database.db.connection().execute(async (conn) => {
    if (database.kind === 'postgres') await sql`set vacuum_cost_delay = 2`.execute(conn);
    // PGlite's one backend reports the deletes' statistics at its next idle moment a second on, after
    // the vacuum's report, which would count every row it removed as dead again: now, before it.
    else await sql`select pg_stat_force_next_flush()`.execute(conn);
    try {
      for (const table of tables) await sql`vacuum (analyze) ${sql.table(table)}`.execute(conn);
    } finally {
      if (database.kind === 'postgres') await sql`reset vacuum_cost_delay`.execute(conn);
    }
  });
}

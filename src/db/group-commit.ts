import { databaseBusy } from './busy.js';

export type GroupCommitOptions<T, R> = {
  /** Writes every item in ONE autocommit statement (or one transaction); the result for `items[i]` at index i. */
  write(items: T[]): Promise<R[]>;
  /** Items with the same key never share a statement (one UPDATE cannot change a row twice). */
  key(item: T): string;
  /** Statements of this kind running at once; past that, callers gather for the next one. */
  maxInFlight: number;
  /** Items in one statement at most. */
  maxBatch: number;
  /**
   * While a statement runs, the next starts only once this many items have gathered (or
   * `maxGatherMs` after the first of them), not with the first: every statement pays a plan's
   * start, its triggers and a commit, and one of a few items pays them for a few.
   */
  minBatch: number;
  maxGatherMs: number;
};

/**
 * The settings every writer uses. Measured on the points bench (32 connections, 2 cores): one
 * statement at a time gathers the most per statement, two keep PostgreSQL busy while one waits for
 * its commit, four and more split the same requests into smaller, costlier groups. Two also means a
 * statement stuck on a row lock held elsewhere does not hold up every other write for more than
 * `maxGatherMs` (and one that cannot join runs alone). Starting the second at once, with whatever
 * had arrived, ran every other statement with one or two items: waiting for 16 raised points/add
 * by 29-32 % and PUT /orders by 7-24 % in runs alternating the two (docs/benchmarks.md, "Orders").
 */
export const GROUP_COMMIT = { maxInFlight: 2, maxBatch: 64, minBatch: 16, maxGatherMs: 10 } as const;

/**
 * Group commit: concurrent writes made outside a transaction share one statement, so under load a
 * round trip, a plan and a commit (WAL flush) serve many requests instead of one. A write runs at
 * once when no statement is running, so a lone request waits for nothing; otherwise callers
 * gather, and the next statement takes them together: when a slot is free and `minBatch` have
 * gathered, when the running statements end, or `maxGatherMs` after the first of them.
 *
 * A write that cannot join the gathering one (its key is there already, or it is full) runs alone
 * at once, queueing for a connection like any query, so the pool's bound still sheds load.
 */
export function groupCommit<T, R>(options: GroupCommitOptions<T, R>): (item: T) => Promise<R> {
  type Caller = { item: T; resolve(result: R): void; reject(err: unknown): void };
  const { write, key, maxInFlight, maxBatch, minBatch, maxGatherMs } = options;
  let inFlight = 0;
  let gathering: Caller[] = [];
  const gatheredKeys = new Set<string>();
  let gatherTimer: NodeJS.Timeout | undefined;

  /** Starts the gathered callers' statement if a slot is free and it is time (see groupCommit). */
  const dispatch = (timedOut = false) => {
    if (gathering.length === 0 || inFlight >= maxInFlight) return;
    if (inFlight === 0 || gathering.length >= minBatch || timedOut) {
      clearTimeout(gatherTimer);
      gatherTimer = undefined;
      const next = gathering;
      gathering = [];
      gatheredKeys.clear();
      void run(next);
    } else {
      gatherTimer ??= setTimeout(() => {
        gatherTimer = undefined;
        dispatch(true);
      }, maxGatherMs);
    }
  };

  /** Writes one item by itself; `tried` times it was already a deadlock's victim. */
  const alone = async (caller: Caller, tried = 0) => {
    for (let attempt = tried + 1; ; attempt++) {
      try {
        const [result] = await write([caller.item]);
        return caller.resolve(result!);
      } catch (err) {
        // A deadlock's victim was rolled back whole and did nothing: the next try usually goes through.
        if (attempt < DEADLOCK_ATTEMPTS && isDeadlock(err)) continue;
        return caller.reject(err);
      }
    }
  };

  const run = async (batch: Caller[]) => {
    inFlight++;
    try {
      const results = await write(batch.map((c) => c.item));
      batch.forEach((caller, i) => caller.resolve(results[i]!));
    } catch (err) {
      // PostgreSQL refused the statement and rolled it back whole (a deadlock with another
      // transaction, say): each write is tried alone, so one failure does not fail its neighbours.
      // Anything else (shed, connection lost: the commit may have happened) fails them all.
      if (batch.length > 1 && isStatementError(err) && !databaseBusy(err)) await Promise.all(batch.map((caller) => alone(caller)));
      else if (batch.length === 1 && isDeadlock(err)) await alone(batch[0]!, 1);
      else for (const caller of batch) caller.reject(err);
    } finally {
      inFlight--;
      dispatch();
    }
  };

  return (item) =>
    new Promise<R>((resolve, reject) => {
      const caller = { item, resolve, reject };
      if (inFlight === 0) return void run([caller]);
      const k = key(item);
      if (gathering.length >= maxBatch || gatheredKeys.has(k)) return void alone(caller);
      gathering.push(caller);
      gatheredKeys.add(k);
      dispatch();
    });
}

/** Tries of a write that PostgreSQL keeps choosing as a deadlock's victim, before its error is given. */
const DEADLOCK_ATTEMPTS = 3;

const isDeadlock = (err: unknown) => (err as { code?: unknown } | null)?.code === '40P01';

/** An error PostgreSQL answered a statement with (it carries a SQLSTATE), so the statement did not commit. */
function isStatementError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
}

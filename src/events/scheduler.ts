import type { DB } from '../db/database.js';
import { countFailures, type DueWork, type FailureCounts } from '../domain/kernel/index.js';
import type { Logger } from '../logger.js';
import { wakeableSleep } from './wakeable-sleep.js';

export type Scheduler = {
  start(): void;
  /** Ends the loop after the batch in progress. */
  stop(): Promise<void>;
  /** Runs every kind until nothing is due; returns how many items were done (tests, and the loop itself). */
  runDue(): Promise<number>;
  /** Seconds since the oldest item still waiting fell due, per kind (0 when none is due). */
  lag(): Promise<Record<string, number>>;
  /** Items set aside and items waiting for a retry, per kind (every kind, 0 when none). */
  failures(): Promise<Record<string, FailureCounts>>;
};

export type SchedulerOptions = {
  db: DB;
  kinds: readonly DueWork[];
  logger: Logger;
  /** The clock due times are compared with; tests move it. */
  now: () => Date;
  /** Items per transaction: short transactions, so a sweep never holds locks live writes wait on. */
  batchSize?: number;
  /** The wait between passes that found nothing due. */
  idleMs?: number;
  /** Told when a kind's batch threw (the /metrics counter); the other kinds went on. */
  onKindFailure?: (kind: string) => void;
};

/**
 * The one loop for time-driven work (DESIGN.md "Time-driven work"): where the worker runs, it
 * does every kind's due items in batches until none is due, then waits. Exactly-once comes from
 * the kinds (each claims with FOR UPDATE SKIP LOCKED), so any number of instances may run it, and
 * a backlog left by downtime is caught up at the next start. An item's failure is its kind's to
 * record (scheduling.ts `runClaimed`); a kind that throws all the same (its database gone, a bug)
 * is logged and counted, sits out the rest of the pass, and never stops the others.
 */
export function createScheduler(options: SchedulerOptions): Scheduler {
  const { db, kinds, logger, now } = options;
  const batchSize = options.batchSize ?? 200;
  const idleMs = options.idleMs ?? 1000;
  const idle = wakeableSleep();
  let running = false;
  let stopping = false;
  let loop: Promise<void> | undefined;

  const runDue = async () => {
    let done = 0;
    // A batch of each kind in turn, so a long sweep (a million lots, a tier evaluation) never
    // holds up the others: a Shopify webhook or a pending release waits one batch, not the sweep.
    let busy = kinds;
    while (busy.length) {
      const full: DueWork[] = [];
      for (const kind of busy) {
        let n: number;
        try {
          n = await kind.runDue(db, now(), batchSize);
        } catch (err) {
          logger.error({ err, kind: kind.name }, 'due work failed; the other kinds go on, this one is tried again at the next pass');
          options.onKindFailure?.(kind.name);
          continue;
        }
        done += n;
        if (n >= batchSize) full.push(kind);
      }
      // A stop ends the pass after this round; the rest is caught up at the next start.
      busy = stopping ? [] : full;
    }
    return done;
  };

  const run = async () => {
    while (running) {
      try {
        await runDue();
      } catch (err) {
        logger.warn({ err }, 'due work failed; retrying at the next pass');
      }
      if (running) await idle.sleep(idleMs);
    }
  };

  return {
    start() {
      if (running) return;
      running = true;
      loop = run();
    },
    async stop() {
      running = false;
      stopping = true;
      idle.wake();
      await loop;
    },
    async runDue() {
      return runDue();
    },
    async lag() {
      const at = now();
      // One kind after the other: a metrics scrape holds one pooled connection at a time.
      const lag: Record<string, number> = {};
      for (const kind of kinds) {
        const due = await kind.oldestDue(db, at);
        lag[kind.name] = due ? Math.max(0, (at.getTime() - due.getTime()) / 1000) : 0;
      }
      return lag;
    },
    async failures() {
      const counts = await countFailures(db);
      return Object.fromEntries(kinds.map((kind) => [kind.name, counts[kind.name] ?? { setAside: 0, retrying: 0 }]));
    },
  };
}

import type { DB } from '../db/database.js';

/**
 * One kind of time-driven work (DESIGN.md "Time-driven work"): rows with a due time, done by
 * whichever instance claims them first (FOR UPDATE SKIP LOCKED), so each item happens once across
 * instances, survives restarts and catches up after downtime. Pending points becoming available
 * are the first kind; expiry, warnings, birthdays and tier evaluation follow.
 */
export type DueWork = {
  /** For logs and the /metrics lag gauge. */
  name: string;
  /** Claims up to `limit` items due at `now`, does them and commits; returns how many it did. */
  runDue(db: DB, now: Date, limit: number): Promise<number>;
  /** When the oldest item still waiting fell due (for the lag), or null when nothing is due at `now`. */
  oldestDue(db: DB, now: Date): Promise<Date | null>;
};

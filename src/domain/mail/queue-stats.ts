import { sql } from 'kysely';
import type { Queryable } from '../../db/transaction.js';

/**
 * What the metrics tell of the mail queue: e-mails with a send still due (waiting, leased or between
 * tries), and how long the oldest of those already due has waited. One pass over the due index.
 */
export async function mailQueueStats(db: Queryable, now: Date): Promise<{ waiting: number; lagSeconds: number }> {
  const row = await db
    .selectFrom('mail_messages')
    .select([
      sql<string>`count(*)`.as('waiting'),
      sql<string | null>`extract(epoch from ${now}::timestamptz - min(due_at) filter (where due_at <= ${now}::timestamptz))`.as('lag'),
    ])
    .where('due_at', 'is not', null)
    .executeTakeFirstOrThrow();
  return { waiting: Number(row.waiting), lagSeconds: Math.max(0, Number(row.lag ?? 0)) };
}

import type { Transaction } from 'kysely';
import type { DB } from './database.js';
import type { Database } from './schema.js';

export type Trx = Transaction<Database>;

/** Either the database or an open transaction: domain reads accept both. */
export type Queryable = DB | Trx;

/**
 * Runs `fn` in one transaction. Hooks registered with `afterCommit` run once the commit has
 * succeeded, so side effects (waking the event relay, say) never announce a rolled-back change.
 */
export async function inTransaction<T>(
  db: DB,
  fn: (trx: Trx, afterCommit: (hook: () => void) => void) => Promise<T>,
): Promise<T> {
  const hooks: Array<() => void> = [];
  const result = await db.transaction().execute((trx) => fn(trx, (hook) => hooks.push(hook)));
  for (const hook of hooks) hook();
  return result;
}

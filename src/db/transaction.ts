import type { Transaction } from 'kysely';
import type { DB } from './database.js';
import type { Database } from './schema.js';

export type Trx = Transaction<Database>;

/** Either the database or an open transaction: domain reads accept both. */
export type Queryable = DB | Trx;

const commitHooks = new WeakMap<Trx, Array<() => void>>();

/**
 * Runs `fn` in one transaction. Hooks registered on it with `afterCommit` run once the commit has
 * succeeded, so side effects (waking the outbox relay, say) never announce a rolled-back change.
 */
export async function inTransaction<T>(db: DB, fn: (trx: Trx) => Promise<T>): Promise<T> {
  const hooks: Array<() => void> = [];
  const result = await db.transaction().execute((trx) => {
    commitHooks.set(trx, hooks);
    return fn(trx);
  });
  for (const hook of hooks) hook();
  return result;
}

/**
 * Runs `hook` once the changes made through `db` are committed: after the transaction commits (never
 * if it rolls back), or at once when `db` is not a transaction, whose statement has committed already.
 * A transaction must come from inTransaction.
 */
export function afterCommit(db: Queryable, hook: () => void): void {
  if (!db.isTransaction) return hook();
  const hooks = commitHooks.get(db as Trx);
  if (!hooks) throw new Error('afterCommit needs a transaction opened with inTransaction');
  hooks.push(hook);
}

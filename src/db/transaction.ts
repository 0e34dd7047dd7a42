import type { Transaction } from 'kysely';
import type { DB } from './database.js';
import type { Database } from './schema.js';

export type Trx = Transaction<Database>;

/** Either the database or an open transaction: domain reads accept both. */
export type Queryable = DB | Trx;

// Each transaction opened by inTransaction: its database handle and its after-commit hooks.
const opened = new WeakMap<Trx, { db: DB; hooks: Array<() => void> }>();

/**
 * Runs `fn` in one transaction. Hooks registered on it with `afterCommit` run once the commit has
 * succeeded, so side effects (waking the outbox relay, say) never announce a rolled-back change.
 */
export async function inTransaction<T>(db: DB, fn: (trx: Trx) => Promise<T>): Promise<T> {
  const hooks: Array<() => void> = [];
  const result = await db.transaction().execute((trx) => {
    opened.set(trx, { db, hooks });
    return fn(trx);
  });
  for (const hook of hooks) hook();
  return result;
}

function openedBy(trx: Trx, what: string) {
  const found = opened.get(trx);
  if (!found) throw new Error(`${what} needs a transaction opened with inTransaction`);
  return found;
}

/**
 * Runs `hook` once the changes made through `db` are committed: after the transaction commits (never
 * if it rolls back), or at once when `db` is not a transaction, whose statement has committed already.
 * A transaction must come from inTransaction.
 */
export function afterCommit(db: Queryable, hook: () => void): void {
  if (!db.isTransaction) return hook();
  openedBy(db as Trx, 'afterCommit').hooks.push(hook);
}

/** The database handle `db` is, or its transaction was opened on (by inTransaction): what per-process caches are kept by. */
export function handleOf(db: Queryable): DB {
  return db.isTransaction ? openedBy(db as Trx, 'handleOf').db : (db as DB);
}

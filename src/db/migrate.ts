import { type MigrationResultSet, Migrator, sql } from 'kysely';
import { migrations } from '../../migrations/index.js';
import type { DB } from './database.js';

// Any fixed number; only our migrations take this advisory lock.
const MIGRATION_LOCK_ID = 7_301_2026;

/**
 * Runs `work` under a session advisory lock, which every migrator here runs under. Kysely's own lock is taken only after it
 * creates its bookkeeping tables, and instances racing on that creation fail; the advisory lock
 * makes several instances starting at once apply each migration exactly once. It also keeps one
 * schema's down migration (dropping tables) from running while another schema's migrator lists
 * the database's tables, which fails on a table dropped during the listing.
 */
export function underMigrationLock<T>(db: DB, work: (conn: DB) => Promise<T>): Promise<T> {
  return db.connection().execute(async (conn) => {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK_ID})`.execute(conn);
    try {
      return await work(conn);
    } finally {
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK_ID})`.execute(conn);
    }
  });
}

async function migrate(db: DB, run: (migrator: Migrator) => Promise<MigrationResultSet>): Promise<string[]> {
  return underMigrationLock(db, async (conn) => {
    // Name the schema: Kysely otherwise looks for its tables in every schema of the database.
    const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(conn);
    const migrator = new Migrator({
      db: conn,
      provider: { getMigrations: async () => migrations },
      migrationTableSchema: rows[0]!.schema,
    });
    const { error, results } = await run(migrator);
    if (error) throw error instanceof Error ? error : new Error(String(error));
    return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
  });
}

/** Brings the schema up to date. */
export function migrateToLatest(db: DB): Promise<string[]> {
  return migrate(db, (migrator) => migrator.migrateToLatest());
}

/** Takes the schema up or down to the migration `name` (a migration's test starts from the day before it). */
export function migrateTo(db: DB, name: string): Promise<string[]> {
  return migrate(db, (migrator) => migrator.migrateTo(name));
}

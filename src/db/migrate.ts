import { Migrator, sql } from 'kysely';
import { migrations } from '../../migrations/index.js';
import type { DB } from './database.js';

// Any fixed number; only our migrations take this advisory lock.
const MIGRATION_LOCK_ID = 7_301_2026;

/**
 * Brings the schema up to date. Kysely's own lock is taken only after it creates its bookkeeping
 * tables, and instances racing on that creation fail; a session advisory lock around the whole run
 * makes several instances starting at once apply each migration exactly once.
 */
export async function migrateToLatest(db: DB): Promise<string[]> {
  return db.connection().execute(async (conn) => {
    await sql`select pg_advisory_lock(${MIGRATION_LOCK_ID})`.execute(conn);
    try {
      // Name the schema: Kysely otherwise looks for its tables in every schema of the database.
      const { rows } = await sql<{ schema: string }>`select current_schema() as schema`.execute(conn);
      const migrator = new Migrator({
        db: conn,
        provider: { getMigrations: async () => migrations },
        migrationTableSchema: rows[0]!.schema,
      });
      const { error, results } = await migrator.migrateToLatest();
      if (error) throw error instanceof Error ? error : new Error(String(error));
      return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
    } finally {
      await sql`select pg_advisory_unlock(${MIGRATION_LOCK_ID})`.execute(conn);
    }
  });
}

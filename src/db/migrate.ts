import { Migrator } from 'kysely';
import { migrations } from '../../migrations/index.js';
import type { DB } from './database.js';

/**
 * Brings the schema up to date. Kysely's Postgres adapter holds an advisory lock while it
 * migrates, so several instances starting at once apply each migration exactly once.
 */
export async function migrateToLatest(db: DB): Promise<string[]> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}

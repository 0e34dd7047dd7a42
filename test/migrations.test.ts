import { describe, expect, it } from 'vitest';
import { openDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import { migrations } from '../migrations/index.js';
import { isolatedPostgresUrl, onPostgres } from './helpers.js';

describe('migrations', () => {
  it.skipIf(!onPostgres)('apply exactly once when several instances start at once (PostgreSQL)', async () => {
    const schema = await isolatedPostgresUrl();
    const handles = await Promise.all([1, 2, 3, 4].map(() => openDatabase({ url: schema.url, poolSize: 2 })));
    try {
      const applied = await Promise.all(handles.map((h) => migrateToLatest(h.db)));
      // Every migration was applied by exactly one of the four.
      expect(applied.flat().sort()).toEqual(Object.keys(migrations).sort());
      const rows = await handles[0]!.db.selectFrom('kysely_migration' as any).select('name' as any).execute();
      expect(rows).toHaveLength(Object.keys(migrations).length);
    } finally {
      await Promise.all(handles.map((h) => h.close()));
      await schema.drop();
    }
  });

  it('bring an empty embedded database up to date, and are a no-op the second time', async () => {
    const handle = await openDatabase({ dataDir: 'memory://' });
    try {
      expect(await migrateToLatest(handle.db)).toEqual(Object.keys(migrations));
      expect(await migrateToLatest(handle.db)).toEqual([]);
    } finally {
      await handle.close();
    }
  });
});

import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type DB, openDatabase } from '../src/db/database.js';

// The embedded database's memory settings (docs/operations.md#memory): nothing fails when they are
// lost (a PGlite upgrade renaming an option, startParams replaced), the server only holds ~110 MiB more.

let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'loyalty-pglite-settings-'));
});
afterAll(async () => {
  await rm(dataDir, { recursive: true, force: true });
});

const setting = async (db: DB, name: 'shared_buffers') =>
  (await sql<Record<string, string>>`select current_setting(${name}) as value`.execute(db)).rows[0]!.value;

it('a new data folder is created (in a child process) and served with shared_buffers at 16MB, and so is it when reopened', async () => {
  const first = await openDatabase({ dataDir });
  try {
    expect(existsSync(path.join(dataDir, 'pgdata', 'PG_VERSION'))).toBe(true);
    expect(await setting(first.db, 'shared_buffers')).toBe('16MB');
    await sql`create table kept (n int)`.execute(first.db);
    await sql`insert into kept values (42)`.execute(first.db);
  } finally {
    await first.close();
  }
  const again = await openDatabase({ dataDir });
  try {
    expect(await setting(again.db, 'shared_buffers')).toBe('16MB');
    expect((await sql<{ n: number }>`select n from kept`.execute(again.db)).rows).toEqual([{ n: 42 }]);
  } finally {
    await again.close();
  }
});

it('an in-memory database has the same settings (PGlite ignores the options of create(undefined, options))', async () => {
  const handle = await openDatabase({ dataDir: 'memory://' });
  try {
    expect(await setting(handle.db, 'shared_buffers')).toBe('16MB');
  } finally {
    await handle.close();
  }
});

it('a data folder that cannot be created fails with the reason, and leaves the folder unlocked', async () => {
  // pgdata is a file: initdb cannot make a folder there.
  const blocked = await mkdtemp(path.join(tmpdir(), 'loyalty-pglite-blocked-'));
  try {
    await writeFile(path.join(blocked, 'pgdata'), 'not a folder');
    await expect(openDatabase({ dataDir: blocked })).rejects.toThrow(/creating the database in .*pgdata failed: .+/);
    expect(existsSync(path.join(blocked, 'loyalty.lock'))).toBe(false);
  } finally {
    await rm(blocked, { recursive: true, force: true });
  }
});

import { createReadStream } from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { createGunzip } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type DB, openDatabase } from '../src/db/database.js';
import { shopDeletion } from '../src/domain/shop-exit/index.js';
import { createApiKey } from '../src/domain/shops/index.js';
import { cliDatabase, onPostgres, runCli, startTestApp } from './helpers.js';
import { fillShop, shopRowCounts } from './support/shop-data.js';

// A shop leaves (issue 37, item 5): `shop export` writes its archive, `shop delete` schedules its
// deletion, which `--cancel` stops during the grace. The CLI runs as a child process on the same
// database as the checks (a private PostgreSQL schema, or a PGlite folder opened by one at a time).

const DAY = 24 * 60 * 60 * 1000;
let cliDb: Awaited<ReturnType<typeof cliDatabase>>;
let leaving: { shopId: string; apiKey: string };
let staying: { shopId: string; apiKey: string };

async function withDb<T>(fn: (db: DB) => Promise<T>): Promise<T> {
  const handle = await openDatabase(onPostgres ? { url: cliDb.env.DATABASE_URL } : { dataDir: cliDb.dataDir });
  try {
    return await fn(handle.db);
  } finally {
    await handle.close();
  }
}

async function cli(args: string[], code = 0): Promise<any> {
  const res = await runCli([...args, '--json'], cliDb.env);
  expect(res.code, res.stderr || res.stdout).toBe(code);
  return JSON.parse(res.stdout);
}

async function readArchive(file: string): Promise<Array<Record<string, any>>> {
  const lines: Array<Record<string, any>> = [];
  for await (const line of createInterface({ input: createReadStream(file).pipe(createGunzip()), crlfDelay: Infinity })) lines.push(JSON.parse(line));
  return lines;
}

beforeAll(async () => {
  cliDb = await cliDatabase('loyalty-shop-exit-');
  const t = await startTestApp({ WORKER: 'off', ...cliDb.env });
  try {
    leaving = await t.shop('Leaving shop');
    staying = await t.shop('Staying shop');
    await fillShop(t, leaving, 'l');
    await fillShop(t, staying, 's');
  } finally {
    await t.stop();
  }
}, 60_000);
afterAll(() => cliDb?.drop());

describe('shop export', () => {
  it('writes every row of the shop, and only of the shop, to one gzip\'d NDJSON archive, without secrets', async () => {
    const file = path.join(cliDb.dataDir, 'leaving.ndjson.gz');
    const out = await cli(['shop', 'export', '--shop', leaving.shopId, '--out', file]);
    const [header, ...rows] = await readArchive(file);
    expect(header).toMatchObject({ format: 'loyalty-shop-archive', version: 1, shopId: leaving.shopId, omittedColumns: expect.objectContaining({ api_keys: expect.arrayContaining(['key_hash']) }) });
    expect(out.rows).toBe(rows.length);

    // Per table, exactly the shop's rows in the database.
    const counts = await withDb((db) => shopRowCounts(db, leaving.shopId));
    const archived: Record<string, number> = {};
    for (const r of rows) archived[r.table] = (archived[r.table] ?? 0) + 1;
    for (const [table, n] of Object.entries(counts)) expect(archived[table] ?? 0, table).toBe(n);
    expect(rows[0]).toMatchObject({ table: 'shops', row: { id: leaving.shopId, name: 'Leaving shop' } });
    expect(rows.filter((r) => 'shop_id' in r.row).every((r) => r.row.shop_id === leaving.shopId)).toBe(true);
    expect(rows.find((r) => r.table === 'customers' && r.row.shopify_customer_id === 'l-2')?.row).toMatchObject({ email: 'l-2@example.com', points: 30 });
    expect(rows.some((r) => r.table === 'orders')).toBe(true);
    // Parents before their children, as a restore inserts them.
    const first = (table: string) => rows.findIndex((r) => r.table === table);
    expect(first('customers')).toBeLessThan(first('activities'));
    expect(first('customers')).toBeLessThan(first('orders'));
    for (const r of rows) expect(Object.keys(r.row).filter((k) => /secret|hash|password/.test(k))).toEqual([]);
  });

  it('an unknown shop is an error naming it, and writes nothing', async () => {
    const out = await cli(['shop', 'export', '--shop', 'no-such-shop', '--out', path.join(cliDb.dataDir, 'none.gz')], 1);
    expect(out).toMatchObject({ error: 'shop_not_found' });
  });
});

describe('shop delete', () => {
  it('a deletion cancelled during its grace keeps everything; one past its grace deletes the shop alone, once', async () => {
    const before = await withDb((db) => shopRowCounts(db, leaving.shopId));
    const otherBefore = await withDb((db) => shopRowCounts(db, staying.shopId));
    const requested = await cli(['shop', 'delete', '--shop', leaving.shopId]);
    expect(new Date(requested.dueAt).getTime() - new Date(requested.requestedAt).getTime()).toBe(7 * DAY);
    expect(await cli(['shop', 'delete', '--shop', leaving.shopId, '--cancel'])).toMatchObject({ shopId: leaving.shopId, cancelledAt: expect.any(String) });
    // Past the grace, a cancelled deletion is nothing to do.
    await withDb(async (db) => expect(await shopDeletion.runDue(db, new Date(Date.now() + 30 * DAY), 50)).toBe(0));
    expect(await withDb((db) => shopRowCounts(db, leaving.shopId))).toEqual(before);
    expect(await cli(['shop', 'delete', '--shop', leaving.shopId, '--cancel'], 1)).toMatchObject({ error: 'shop_deletion_not_found' });

    const again = await cli(['shop', 'delete', '--shop', leaving.shopId]);
    const past = new Date(new Date(again.dueAt).getTime() + 1000);
    await withDb(async (db) => {
      // In batches of 10 rows, as the scheduler calls it with its batch size: full batches until the shop is gone.
      const batches: number[] = [];
      for (let n = await shopDeletion.runDue(db, past, 10); n > 0; n = await shopDeletion.runDue(db, past, 10)) {
        batches.push(n);
        // A row written, mid-way, to a table already emptied (its keys, the first): swept up at the end.
        if (batches.length === 1) await createApiKey(db, leaving.shopId);
      }
      expect(batches.length).toBeGreaterThan(2);
      expect(batches.every((n) => n <= 10)).toBe(true);
      expect(Object.entries(await shopRowCounts(db, leaving.shopId)).filter(([, n]) => n > 0)).toEqual([]);
      expect(await shopRowCounts(db, staying.shopId)).toEqual(otherBefore);
      expect(await shopDeletion.oldestDue(db, past)).toBeNull();
    });
    // Started (here: done), it cannot be cancelled.
    expect(await cli(['shop', 'delete', '--shop', staying.shopId, '--cancel'], 1)).toMatchObject({ error: 'shop_deletion_not_found' });
  }, 60_000);
});

import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { sql } from 'kysely';
import { parse as parseLossless, stringify as stringifyLossless } from 'lossless-json';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countRecords } from '../src/cli/import-file.js';
import { type DB, openDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import type { Trx } from '../src/db/transaction.js';
import { importCustomers, type ImportRecord } from '../src/domain/imports/customers-import.js';
import { createEarningRule } from '../src/domain/program/earning-rules.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { authenticateApiKey, createShop } from '../src/domain/shops/shops.js';
import { type CliResult, cliDatabase, isolatedPostgresUrl, onPostgres, openTestDatabase, runCli, startTestApp } from './helpers.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const fixture = (name: string) => path.join(ROOT, 'test/fixtures', name);

// The CLI under test runs as a child process on the same database as the checks below: a private
// PostgreSQL schema when TEST_DATABASE_URL is set, else a fresh PGlite data folder.
let dbEnv: Record<string, string>;
let dataDir: string;
let cliDb: Awaited<ReturnType<typeof cliDatabase>> | undefined;

beforeAll(async () => {
  cliDb = await cliDatabase('loyalty-cli-');
  ({ env: dbEnv, dataDir } = cliDb);
});
afterAll(() => cliDb?.drop());

function cli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  return runCli(args, { ...dbEnv, ...env });
}

/** Runs the CLI with --json and returns its parsed output, failing on another exit code than `code`. */
async function cliJson(args: string[], code = 0): Promise<any> {
  const res = await cli([...args, '--json']);
  expect(res.code, res.stderr || res.stdout).toBe(code);
  return JSON.parse(res.stdout);
}

/** The CLI's database, opened here for checks (on PGlite only while no CLI runs: the folder is locked). */
async function withDb<T>(fn: (db: DB) => Promise<T>): Promise<T> {
  const handle = await openDatabase(onPostgres ? { url: dbEnv.DATABASE_URL } : { dataDir });
  try {
    return await fn(handle.db);
  } finally {
    await handle.close();
  }
}

/**
 * The ledger invariants of a shop, in SQL so they scale to the large import: every entry's
 * oldPoints is the previous entry's newPoints (0 for the first), and every balance equals its
 * customer's last newPoints (0 without entries).
 */
async function ledgerViolations(db: DB, shopId: string): Promise<{ brokenChains: number; wrongBalances: number }> {
  const chains = await sql<{ n: number }>`
    select count(*)::int as n from (
      select old_points, lag(new_points, 1, 0::bigint) over (partition by customer_id order by seq) as previous
      from activities where shop_id = ${shopId}
    ) entries where old_points <> previous`.execute(db);
  const balances = await sql<{ n: number }>`
    select count(*)::int as n from customers c
    left join lateral (select new_points from activities a where a.customer_id = c.id order by seq desc limit 1) last on true
    where c.shop_id = ${shopId} and c.points <> coalesce(last.new_points, 0)`.execute(db);
  return { brokenChains: chains.rows[0]!.n, wrongBalances: balances.rows[0]!.n };
}

/** How many outbox events (or ledger entries) of each type a shop has. */
async function countByType(db: DB, shopId: string, table: 'outbox_events' | 'activities' = 'outbox_events'): Promise<Record<string, number>> {
  const rows = await db
    .selectFrom(table)
    .select(['type', (eb) => eb.fn.countAll<number>().as('n')])
    .where('shop_id', '=', shopId)
    .groupBy('type')
    .execute();
  return Object.fromEntries(rows.map((r) => [r.type, Number(r.n)]));
}

const rejectedLines = (result: { rejected: Array<{ line: number }> }) => result.rejected.map((r) => r.line);

describe('CLI: migrations, shops and API keys', () => {
  it('db migrate applies the migrations once', { timeout: 120_000 }, async () => {
    const first = await cliJson(['db', 'migrate']);
    expect(first.applied).toContain('2026_11_22_001_initial');
    expect(await cliJson(['db', 'migrate'])).toEqual({ applied: [] });
  });

  it('shop create gives a working key; key create/list/revoke; a revoked key gets 401', { timeout: 180_000 }, async () => {
    const created = await cliJson(['shop', 'create', '--name', 'CLI shop']);
    expect(Object.keys(created).sort()).toEqual(['apiKey', 'shopId']);
    expect(created.shopId).toMatch(/^[0-9a-f]{24}$/);
    expect(created.apiKey).toMatch(/^lk_[a-z0-9]{10}_[A-Za-z0-9]{40}$/);

    const second = await cliJson(['key', 'create', '--shop', created.shopId]);
    expect(second.apiKey).toMatch(/^lk_[a-z0-9]{10}_[A-Za-z0-9]{40}$/);
    expect(second.apiKey.startsWith(`${second.prefix}_`)).toBe(true);

    const listing = await cli(['key', 'list', '--shop', created.shopId, '--json']);
    expect(listing.code).toBe(0);
    // Prefixes and dates only: neither secret appears anywhere in the output.
    expect(listing.stdout).not.toContain(created.apiKey.slice(14));
    expect(listing.stdout).not.toContain(second.apiKey.slice(14));
    const { keys } = JSON.parse(listing.stdout);
    expect(keys.map((k: any) => k.prefix).sort()).toEqual([created.apiKey.slice(0, 13), second.prefix].sort());
    expect(keys.every((k: any) => k.revokedAt === null && !Number.isNaN(Date.parse(k.createdAt)))).toBe(true);

    // A real server on the same database accepts both keys: an unknown customer is a 404, not a 401.
    const probe = (t: Awaited<ReturnType<typeof startTestApp>>, key: string) =>
      t.post('/rest-api/v1/points/add', { customerIdentifier: 'nobody', amount: 1 }, key).then((r) => r.status);
    let server = await startTestApp(dbEnv);
    try {
      expect(await probe(server, created.apiKey)).toBe(404);
      expect(await probe(server, second.apiKey)).toBe(404);
      // The key with its last character changed (to another one: a key ending in x stays itself with x).
      expect(await probe(server, `${created.apiKey.slice(0, -1)}${created.apiKey.endsWith('x') ? 'y' : 'x'}`)).toBe(401);
      if (!onPostgres) {
        // PGlite's folder belongs to the running server: the CLI says so instead of touching it.
        const locked = await cli(['key', 'list', '--shop', created.shopId]);
        expect(locked.code).toBe(1);
        expect(locked.stderr.trim().split('\n')).toHaveLength(1);
        expect(locked.stderr).toMatch(/data folder .* is in use by process \d+/);
        const lockedJson = await cli(['key', 'list', '--shop', created.shopId, '--json']);
        expect(JSON.parse(lockedJson.stdout)).toMatchObject({ error: 'data_dir_locked' });
      }
    } finally {
      await server.stop();
    }

    // Revoke the first key by its prefix; the second (revoked by full key below) keeps working until then.
    const revoked = await cliJson(['key', 'revoke', '--shop', created.shopId, '--key', created.apiKey.slice(0, 13)]);
    expect(revoked.prefix).toBe(created.apiKey.slice(0, 13));
    expect(Date.parse(revoked.revokedAt)).not.toBeNaN();

    server = await startTestApp(dbEnv);
    try {
      const res = await server.post('/rest-api/v1/points/add', { customerIdentifier: 'nobody', amount: 1 }, created.apiKey);
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
      expect(await probe(server, second.apiKey)).toBe(404);
    } finally {
      await server.stop();
    }

    await cliJson(['key', 'revoke', '--shop', created.shopId, '--key', second.apiKey]);
    await withDb(async (db) => {
      expect(await authenticateApiKey(db, second.apiKey)).toBeNull();
      expect(await authenticateApiKey(db, created.apiKey)).toBeNull();
    });
    const after = await cliJson(['key', 'list', '--shop', created.shopId]);
    expect(after.keys.every((k: any) => k.revokedAt !== null)).toBe(true);
  });

  it('shop list shows every shop without keys; --shop takes a name; revoking twice says when it was revoked', { timeout: 180_000 }, async () => {
    const a = await cliJson(['shop', 'create', '--name', 'Listed shop']);
    const twin1 = await cliJson(['shop', 'create', '--name', 'Twin shop']);
    const twin2 = await cliJson(['shop', 'create', '--name', 'Twin shop']);

    const { shops } = await cliJson(['shop', 'list']);
    const listed = shops.find((s: any) => s.shopId === a.shopId);
    expect(listed).toEqual({ shopId: a.shopId, name: 'Listed shop', createdAt: expect.any(String), activeKeys: 1 });
    expect(shops.filter((s: any) => s.name === 'Twin shop').map((s: any) => s.shopId).sort()).toEqual([twin1.shopId, twin2.shopId].sort());
    const human = await cli(['shop', 'list']);
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`${a.shopId}  "Listed shop"  created `);
    expect(human.stdout).not.toMatch(/lk_/);

    // A name finds its shop; a name two shops share is refused with both ids.
    const byName = await cliJson(['key', 'create', '--shop', 'Listed shop']);
    expect(byName.shopId).toBe(a.shopId);
    const keys = (await cliJson(['key', 'list', '--shop', 'Listed shop'])).keys.map((k: any) => k.prefix);
    expect(keys.sort()).toEqual([a.apiKey.slice(0, 13), byName.prefix].sort());
    const ambiguous = await cli(['key', 'create', '--shop', 'Twin shop', '--json']);
    expect(ambiguous.code).toBe(1);
    const refusal = JSON.parse(ambiguous.stdout);
    expect(refusal.error).toBe('shop_name_ambiguous');
    expect(refusal.message).toContain(twin1.shopId);
    expect(refusal.message).toContain(twin2.shopId);
    expect((await cliJson(['shop', 'list'])).shops.find((s: any) => s.shopId === twin1.shopId).activeKeys).toBe(1);

    const first = await cliJson(['key', 'revoke', '--shop', 'Listed shop', '--key', byName.prefix]);
    expect(first).toMatchObject({ prefix: byName.prefix, alreadyRevoked: false });
    const again = await cliJson(['key', 'revoke', '--shop', a.shopId, '--key', byName.apiKey]);
    expect(again).toEqual({ prefix: byName.prefix, revokedAt: first.revokedAt, alreadyRevoked: true });
    const againHuman = await cli(['key', 'revoke', '--shop', a.shopId, '--key', byName.prefix]);
    expect(againHuman.stdout).toBe(`API key ${byName.prefix} of shop ${a.shopId} was already revoked, at ${first.revokedAt}.\n`);
    expect((await cliJson(['shop', 'list'])).shops.find((s: any) => s.shopId === a.shopId).activeKeys).toBe(1);
  });

  it('reports domain and configuration errors in one line, exit code 1', { timeout: 120_000 }, async () => {
    const unknownShop = await cli(['key', 'create', '--shop', 'no-such-shop', '--json']);
    expect(unknownShop.code).toBe(1);
    expect(JSON.parse(unknownShop.stdout)).toEqual({ error: 'shop_not_found', message: 'no shop with id or name "no-such-shop"' });

    const human = await cli(['key', 'revoke', '--shop', 'no-such-shop', '--key', 'lk_abcdefghij']);
    expect(human.code).toBe(1);
    expect(human.stdout).toBe('');
    expect(human.stderr).toBe('error: no shop with id or name "no-such-shop"\n');

    const badConfig = await cli(['db', 'migrate'], { DATABASE_URL: 'mysql://localhost/x' });
    expect(badConfig.code).toBe(1);
    expect(badConfig.stderr).toBe('error: invalid configuration: DATABASE_URL: must be a postgres:// URL\n');

    const missingFile = await cli(['customers', 'import', 'no/such/file.csv', '--shop', 'x', '--json']);
    expect(missingFile.code).toBe(1);
    expect(JSON.parse(missingFile.stdout).error).toBe('invalid_file');
  });
});

describe('CLI: customers import', () => {
  let shopId: string;
  beforeAll(async () => {
    ({ shopId } = await cliJson(['shop', 'create', '--name', 'Import shop']));
  }, 120_000);

  it('imports the good lines of NDJSON and CSV files and rejects each bad line by number', { timeout: 180_000 }, async () => {
    // Batches of 2, so repeats are caught across batch boundaries too.
    const ndjson = await cliJson(['customers', 'import', fixture('customers-mixed.ndjson'), '--shop', shopId, '--batch-size', '2'], 2);
    expect(ndjson.imported).toBe(4);
    expect(rejectedLines(ndjson)).toEqual([3, 4, 5, 6, 7, 9, 11, 12, 13, 14, 15, 16]);
    const byLine = Object.fromEntries(ndjson.rejected.map((r: any) => [r.line, r.error]));
    expect(byLine[3]).toMatch(/^email:/);
    expect(byLine[4]).toMatch(/^points:.*>=0/);
    expect(byLine[5]).toMatch(/^points:.*int/);
    expect(byLine[6]).toMatch(/^shopifyCustomerId:/);
    expect(byLine[7]).toMatch(/^malformed JSON/);
    expect(byLine[9]).toBe('e-mail N1@Example.com is also on line 1');
    expect(byLine[11]).toBe('shopifyCustomerId "n2" repeats line 2');
    expect(byLine[12]).toMatch(/nickname/);
    // n10 names n1, imported earlier in the same file, as its referrer.
    expect(ndjson).toMatchObject({ referralsLinked: 1, referralErrors: [] });

    // CSV, one batch; lines 14-15 are one quoted record.
    const csv = await cli(['customers', 'import', fixture('customers-mixed.csv'), '--shop', shopId, '--json']);
    expect(csv.code).toBe(2);
    const csvResult = JSON.parse(csv.stdout);
    expect(csvResult.imported).toBe(5);
    expect(rejectedLines(csvResult)).toEqual([4, 5, 6, 7, 8, 9, 11, 12, 14]);
    const csvByLine = Object.fromEntries(csvResult.rejected.map((r: any) => [r.line, r.error]));
    expect(csvByLine[8]).toBe('expected 5 columns as in the header, got 3');
    expect(csvByLine[9]).toBe('e-mail C1@EXAMPLE.COM is also on line 2');
    expect(csvByLine[12]).toMatch(/^malformed CSV/);
    // c9 names n1 (from the NDJSON import) as its referrer.
    expect(csvResult).toMatchObject({ referralsLinked: 1, referralErrors: [] });

    await withDb(async (db) => {
      const customers = await db
        .selectFrom('customers')
        .select(['shopify_customer_id', 'email', 'points', 'birthday'])
        .where('shop_id', '=', shopId)
        .orderBy('shopify_customer_id')
        .execute();
      expect(customers).toEqual([
        { shopify_customer_id: 'c1', email: 'c1@example.com', points: 100, birthday: '1985-02-03' },
        { shopify_customer_id: 'c12', email: 'c12@example.com', points: 12, birthday: null },
        { shopify_customer_id: 'c14', email: 'c14@example.com', points: 14, birthday: null },
        { shopify_customer_id: 'c2', email: 'c2@example.com', points: 0, birthday: null },
        { shopify_customer_id: 'c9', email: 'c9@example.com', points: 9, birthday: null },
        { shopify_customer_id: 'n1', email: 'n1@example.com', points: 100, birthday: '1990-05-01' },
        { shopify_customer_id: 'n10', email: 'n10@example.com', points: 0, birthday: null },
        { shopify_customer_id: 'n17', email: 'n17@example.com', points: 17, birthday: null },
        { shopify_customer_id: 'n2', email: 'n2@example.com', points: 0, birthday: null },
      ]);
      const activities = await db
        .selectFrom('activities')
        .select(['type', 'setting_type', 'old_points', 'new_points'])
        .where('shop_id', '=', shopId)
        .execute();
      // One ledger entry per non-zero opening balance, through the ledger's own record type.
      expect(activities).toHaveLength(6);
      expect(activities.every((a) => a.type === 'update_points' && a.setting_type === 'import' && a.old_points === 0)).toBe(true);
      expect(activities.map((a) => a.new_points).sort((a, b) => a - b)).toEqual([9, 12, 14, 17, 100, 100]);
      expect(await countByType(db, shopId)).toEqual({
        'customers/created': 9,
        'points/updated': 6,
        'referrals/code_created': 1,
        'referrals/referee_created': 2,
      });
      const referees = await db
        .selectFrom('referrals')
        .innerJoin('customers as referee', 'referee.id', 'referrals.referee_id')
        .innerJoin('customers as referrer', 'referrer.id', 'referrals.referrer_id')
        .select(['referee.shopify_customer_id as referee', 'referrer.shopify_customer_id as referrer'])
        .where('referrals.shop_id', '=', shopId)
        .orderBy('referrals.seq')
        .execute();
      expect(referees).toEqual([{ referee: 'n10', referrer: 'n1' }, { referee: 'c9', referrer: 'n1' }]);
      expect(await ledgerViolations(db, shopId)).toEqual({ brokenChains: 0, wrongBalances: 0 });
    });
  });

  it('re-importing updates in place and writes ledger entries only for changed balances', { timeout: 180_000 }, async () => {
    const first = await cliJson(['customers', 'import', fixture('customers-update.ndjson'), '--shop', shopId], 2);
    expect(first.imported).toBe(6);
    expect(first.rejected).toEqual([{ line: 5, error: 'e-mail N10@example.com belongs to customer "n10"' }]);

    const checkAfterUpdate = () =>
      withDb(async (db) => {
        const customers = await db
          .selectFrom('customers')
          .select(['shopify_customer_id', 'email', 'points'])
          .where('shop_id', '=', shopId)
          .execute();
        expect(customers).toHaveLength(10);
        const byId = Object.fromEntries(customers.map((c) => [c.shopify_customer_id, c]));
        expect(byId.n2!.points).toBe(50);
        expect(byId.c1!.points).toBe(40);
        expect(byId.c12!.points).toBe(12); // no points column: balance kept
        expect(byId.c2!.email).toBe('c2@example.com'); // its new e-mail was refused
        expect(byId.n17).toMatchObject({ email: 'n17-new@example.com', points: 17 });
        expect(byId.new1!.points).toBe(0);
        const entries = await db
          .selectFrom('activities')
          .innerJoin('customers', 'customers.id', 'activities.customer_id')
          .select(['customers.shopify_customer_id as who', 'old_points', 'new_points', 'type', 'setting_type'])
          .where('activities.shop_id', '=', shopId)
          .orderBy('seq')
          .execute();
        expect(entries).toHaveLength(8);
        expect(entries.slice(6)).toEqual([
          { who: 'n2', old_points: 0, new_points: 50, type: 'update_points', setting_type: 'import' },
          { who: 'c1', old_points: 100, new_points: 40, type: 'update_points', setting_type: 'import' },
        ]);
        expect(await countByType(db, shopId)).toEqual({
          'customers/created': 10,
          'customers/updated': 1,
          'points/updated': 8,
          'referrals/code_created': 1,
          'referrals/referee_created': 2,
        });
        const pointsEvent = await db
          .selectFrom('outbox_events')
          .select('data')
          .where('shop_id', '=', shopId)
          .where('type', '=', 'points/updated')
          .orderBy('seq', 'desc')
          .executeTakeFirstOrThrow();
        expect(pointsEvent.data).toMatchObject({ type: 'update_points', settingType: 'import', oldPoints: 100, newPoints: 40 });
        expect(await ledgerViolations(db, shopId)).toEqual({ brokenChains: 0, wrongBalances: 0 });
      });
    await checkAfterUpdate();

    // The same file again changes nothing: no rows, no ledger entries, no events.
    const again = await cliJson(['customers', 'import', fixture('customers-update.ndjson'), '--shop', shopId], 2);
    expect(again).toEqual({ ...first, created: 0, updated: 0, unchanged: first.imported, balancesSet: 0 });
    await checkAfterUpdate();
  });

  it('reports every problem of a line, the counts in --json, and exit code 2 when lines were refused', { timeout: 180_000 }, async () => {
    const file = path.join(dataDir, 'problems.ndjson');
    const write = (lines: unknown[]) => writeFile(file, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
    await write([
      { shopifyCustomerId: 'p1', email: 'p1@example.com', points: 10 },
      { email: 'not-an-email', points: -1 },
      { shopifyCustomerId: 'p3', email: 'p3@example.com' },
    ]);
    const first = await cliJson(['customers', 'import', file, '--shop', 'Import shop'], 2);
    expect(first).toEqual({
      imported: 2,
      created: 2,
      updated: 0,
      unchanged: 0,
      balancesSet: 1,
      rejected: [{ line: 2, error: expect.any(String) }],
      rejectedCount: 1,
      referralsLinked: 0,
      referralErrors: [],
      referralErrorCount: 0,
    });
    const problems = first.rejected[0].error.split('; ');
    expect(problems).toHaveLength(3);
    expect(problems[0]).toBe('shopifyCustomerId: required');
    expect(problems[1]).toMatch(/^email: /);
    expect(problems[2]).toMatch(/^points: .*>=0/);

    await write([
      { shopifyCustomerId: 'p1', email: 'p1@example.com', points: 20 },
      { shopifyCustomerId: 'p3', email: 'p3@example.com' },
    ]);
    expect(await cliJson(['customers', 'import', file, '--shop', shopId])).toEqual({
      imported: 2,
      created: 0,
      updated: 1,
      unchanged: 1,
      balancesSet: 1,
      rejected: [],
      rejectedCount: 0,
      referralsLinked: 0,
      referralErrors: [],
      referralErrorCount: 0,
    });

    const help = await cli(['customers', 'import', '--help']);
    expect(help.stdout).toMatch(/Exit code: 0 when every line was imported, 2 when the import finished but refused some lines/);
  });

  it("counts a file's records for the progress bar without the CSV header", async () => {
    expect(await countRecords(fixture('customers-mixed.csv'), 'csv')).toBe(15);
    expect(await countRecords(fixture('customers-update.ndjson'), 'ndjson')).toBe(
      (await readFile(fixture('customers-update.ndjson'), 'utf8')).trimEnd().split('\n').length,
    );
  });

  it('says how many rejected lines it did not list', { timeout: 120_000 }, async () => {
    const file = path.join(dataDir, 'many-bad.ndjson');
    await writeFile(file, Array.from({ length: 1_200 }, (_, i) => `{"shopifyCustomerId":"bad${i}","email":"nope"}\n`).join(''));
    const res = await cli(['customers', 'import', file, '--shop', shopId]);
    expect(res.code).toBe(2);
    const lines = res.stdout.trimEnd().split('\n');
    expect(lines[1]).toBe('Rejected 1200 line(s); the first 1000:');
    expect(lines[2]).toMatch(/^  line 1: email: /);
    expect(lines).toHaveLength(1 + 1 + 1000 + 1);
    expect(lines.at(-1)).toBe('  … and 200 more');
  });

  it('prints a human summary without --json', { timeout: 120_000 }, async () => {
    const res = await cli(['customers', 'import', fixture('customers-update.ndjson'), '--shop', shopId]);
    expect(res.code).toBe(2);
    expect(res.stdout).toBe(
      `Imported 6 customer(s) from ${fixture('customers-update.ndjson')}: 0 created, 0 updated, 6 unchanged; 0 balance(s) set.\n` +
        'Rejected 1 line(s):\n  line 5: e-mail N10@example.com belongs to customer "n10"\n',
    );
  });
});

describe('customers import next to live points traffic', () => {
  it('keeps every ledger chain intact while REST adds race the import', { timeout: 120_000 }, async () => {
    const t = await startTestApp();
    try {
      const { shopId, apiKey } = await t.shop();
      const ids = Array.from({ length: 100 }, (_, i) => `k${i}`);
      async function* records(points?: number): AsyncGenerator<ImportRecord> {
        for (const [i, id] of ids.entries()) {
          yield { line: i + 1, value: { shopifyCustomerId: id, email: `${id}@example.com`, ...(points === undefined ? {} : { points }) } };
        }
      }
      expect((await importCustomers(t.app.database, shopId, records())).created).toBe(100);

      // Two adds of 5 per customer (balances stay below 500) while the import sets every balance to 500.
      const adds = Array.from({ length: 200 }, (_, i) =>
        t.post('/rest-api/v1/points/add', { customerIdentifier: ids[i % 100], amount: 5 }, apiKey).then((r) => r.status),
      );
      const [result, statuses] = await Promise.all([
        importCustomers(t.app.database, shopId, records(500), { batchSize: 10 }),
        Promise.all(adds),
      ]);
      expect(statuses.every((s) => s === 200)).toBe(true);
      expect(result).toMatchObject({ imported: 100, updated: 100, balancesSet: 100, rejected: [] });

      const db = t.app.database.db;
      expect(await ledgerViolations(db, shopId)).toEqual({ brokenChains: 0, wrongBalances: 0 });
      expect(await countByType(db, shopId, 'activities')).toEqual({ add_points: 200, update_points: 100 });
      // Each balance is 500 plus the adds that landed after the import's set.
      const balances = await db.selectFrom('customers').select('points').where('shop_id', '=', shopId).execute();
      expect(balances.every((b) => [500, 505, 510].includes(b.points))).toBe(true);
    } finally {
      await t.stop();
    }
  });
});

/** `count` import records from line 1, each a customer `${prefix}${i}`, made as they are read (not held). */
async function* generatedRecords(
  count: number,
  prefix: string,
  points: (i: number) => number = (i) => i % 7,
  emailPadding = '',
): AsyncGenerator<ImportRecord> {
  for (let i = 0; i < count; i++) {
    yield { line: i + 1, value: { shopifyCustomerId: `${prefix}${i}`, email: `${prefix}${i}${emailPadding}@example.com`, points: points(i) } };
  }
}

describe('customers import: bounded memory and report, overlapping imports', () => {
  let database: Awaited<ReturnType<typeof openTestDatabase>>;
  beforeAll(async () => {
    database = await openTestDatabase();
  }, 120_000);
  afterAll(() => database.close());

  it("keeps the JS heap flat whatever the file's length", { timeout: 120_000 }, async () => {
    // A forced collection before each sample, so the heap measured is what the import still holds.
    setFlagsFromString('--expose-gc');
    const gc = runInNewContext('gc') as () => void;
    const { shop } = await createShop(database.db, 'Heap shop');
    /** The largest live heap seen after a batch, less the live heap before the import. */
    const heldBy = async (count: number, prefix: string) => {
      gc();
      const before = process.memoryUsage().heapUsed;
      let peak = 0;
      const result = await importCustomers(database, shop.id, generatedRecords(count, prefix, () => 0, 'x'.repeat(300)), {
        batchSize: 250,
        onProgress: () => {
          gc();
          peak = Math.max(peak, process.memoryUsage().heapUsed - before);
        },
      });
      expect(result).toMatchObject({ imported: count, created: count, rejectedCount: 0 });
      return peak;
    };
    const small = await heldBy(2_000, 'h');
    const large = await heldBy(8_000, 'g');
    // The old import kept every id and e-mail of the file: with these long e-mails, 6,000 more rows held 2.1 MiB more.
    console.log(`customers import: live heap ${(small / 2 ** 20).toFixed(1)} MiB at 2,000 rows, ${(large / 2 ** 20).toFixed(1)} MiB at 8,000`);
    expect(large - small).toBeLessThan(2 ** 20);
  });

  it('lists the first rejected lines in line order and counts them all', { timeout: 60_000 }, async () => {
    const { shop } = await createShop(database.db, 'Report shop');
    async function* records(): AsyncGenerator<ImportRecord> {
      for (let line = 1; line <= 40; line++) {
        const id = `r${line % 20}`; // lines 21-40 repeat lines 1-20
        yield line % 5 === 0 ? { line, error: 'malformed JSON: here' } : { line, value: { shopifyCustomerId: id, email: `${id}@example.com` } };
      }
    }
    const result = await importCustomers(database, shop.id, records(), { batchSize: 3, reportLimit: 5 });
    expect(result).toMatchObject({ imported: 16, created: 16, rejectedCount: 24, referralErrorCount: 0 });
    expect(result.rejected).toEqual([
      { line: 5, error: 'malformed JSON: here' },
      { line: 10, error: 'malformed JSON: here' },
      { line: 15, error: 'malformed JSON: here' },
      { line: 20, error: 'malformed JSON: here' },
      { line: 21, error: 'shopifyCustomerId "r1" repeats line 1' },
    ]);
  });

  it('two imports of overlapping files at once create each customer once and keep every ledger chain', { timeout: 120_000 }, async () => {
    const { shop } = await createShop(database.db, 'Overlap shop');
    // B holds A's second half and more, in reverse order, so the two lock shared customers in crossing orders.
    async function* reversed(): AsyncGenerator<ImportRecord> {
      for (let i = 899, line = 1; i >= 300; i--, line++) {
        yield { line, value: { shopifyCustomerId: `o${i}`, email: `o${i}@example.com`, points: 1000 + i } };
      }
    }
    const [a, b] = await Promise.all([
      importCustomers(database, shop.id, generatedRecords(600, 'o', (i) => i), { batchSize: 50 }),
      importCustomers(database, shop.id, reversed(), { batchSize: 50 }),
    ]);
    expect(a).toMatchObject({ imported: 600, rejectedCount: 0 });
    expect(b).toMatchObject({ imported: 600, rejectedCount: 0 });
    expect(a.created + b.created).toBe(900);
    expect(a.updated + a.unchanged + b.updated + b.unchanged).toBe(300);

    const db = database.db;
    const customers = await db.selectFrom('customers').select(['shopify_customer_id', 'points']).where('shop_id', '=', shop.id).execute();
    expect(customers).toHaveLength(900);
    for (const { shopify_customer_id: id, points } of customers) {
      const i = Number(id.slice(1));
      expect(i < 300 ? [i] : i >= 600 ? [1000 + i] : [i, 1000 + i]).toContain(points);
    }
    expect(await ledgerViolations(db, shop.id)).toEqual({ brokenChains: 0, wrongBalances: 0 });
  });
});

describe.skipIf(!onPostgres)('customers import against a writer that commits mid-batch (PostgreSQL)', () => {
  it('rejects only the line whose e-mail was taken, and retries a batch whose new customer appeared', { timeout: 60_000 }, async () => {
    const schema = await isolatedPostgresUrl();
    // The import's connections carry a name, so the test can see when they wait on a lock.
    const appName = `import-race-${Date.now()}`;
    const url = new URL(schema.url);
    url.searchParams.set('application_name', appName);
    const importer = await openDatabase({ url: url.toString(), poolSize: 2 });
    const writer = await openDatabase({ url: schema.url, poolSize: 2 });
    try {
      await migrateToLatest(writer.db);
      const { shop } = await createShop(writer.db, 'Race shop');
      const records = async function* (prefix: string): AsyncGenerator<ImportRecord> {
        for (let i = 0; i < 4; i++) yield { line: i + 1, value: { shopifyCustomerId: `${prefix}${i}`, email: `${prefix}${i}@example.com`, points: 70 } };
      };
      const waitingOnLock = async () => {
        for (;;) {
          const { rows } = await sql<{ n: number }>`
            select count(*)::int as n from pg_stat_activity where application_name = ${appName} and wait_event_type = 'Lock'`.execute(writer.db);
          if (rows[0]!.n > 0) return;
          await new Promise((r) => setTimeout(r, 20));
        }
      };
      /** Runs the import while `write` is uncommitted, committing once the import's insert waits on it. */
      const importDuring = async (prefix: string, write: (trx: Trx) => Promise<unknown>) => {
        let running!: ReturnType<typeof importCustomers>;
        await writer.db.transaction().execute(async (trx) => {
          await write(trx);
          running = importCustomers(importer, shop.id, records(prefix));
          await waitingOnLock();
        });
        return running;
      };
      const customer = (id: string, shopifyCustomerId: string, email: string) =>
        ({ id, shop_id: shop.id, shopify_customer_id: shopifyCustomerId, email, birthday: null });

      // a2 appears after the import looked for it: the batch is retried and updates it instead.
      const a2 = '0'.repeat(23) + 'a';
      const retried = await importDuring('a', (trx) => trx.insertInto('customers').values(customer(a2, 'a2', 'a2-first@example.com')).execute());
      expect(retried).toMatchObject({ imported: 4, created: 3, updated: 1, balancesSet: 4, rejected: [] });
      expect(await writer.db.selectFrom('customers').selectAll().where('id', '=', a2).executeTakeFirstOrThrow()).toMatchObject({
        shopify_customer_id: 'a2',
        email: 'a2@example.com',
        points: 70,
      });

      // Another customer takes b2's e-mail meanwhile: the batch falls back to row by row and only line 3 is rejected.
      const fallback = await importDuring('b', (trx) => trx.insertInto('customers').values(customer('0'.repeat(23) + 'b', 'other', 'b2@example.com')).execute());
      expect(fallback).toMatchObject({ imported: 3, created: 3, updated: 0, balancesSet: 3 });
      expect(fallback.rejected).toEqual([{ line: 3, error: 'e-mail b2@example.com belongs to customer "other"' }]);

      expect(await ledgerViolations(writer.db, shop.id)).toEqual({ brokenChains: 0, wrongBalances: 0 });
      expect(await countByType(writer.db, shop.id)).toEqual({ 'customers/created': 6, 'customers/updated': 1, 'points/updated': 7 });
    } finally {
      await importer.close();
      await writer.close();
      await schema.drop();
    }
  });
});

describe.skipIf(!onPostgres)('customers import at scale (PostgreSQL)', () => {
  it('imports 100,000 rows in under a minute', { timeout: 180_000 }, async () => {
    const { shopId } = await cliJson(['shop', 'create', '--name', 'Big import']);
    const file = path.join(dataDir, 'big.ndjson');
    const out = createWriteStream(file);
    for (let i = 0; i < 100_000; i++) {
      const row = {
        shopifyCustomerId: `big-${i}`,
        email: `big-${i}@example.com`,
        points: i % 4 === 0 ? 0 : (i * 7) % 5000,
        ...(i % 3 === 0 ? { birthday: '1990-01-15' } : {}),
      };
      if (!out.write(`${JSON.stringify(row)}\n`)) await once(out, 'drain');
    }
    out.end();
    await once(out, 'finish');

    const started = performance.now();
    const res = await cli(['customers', 'import', file, '--shop', shopId, '--json']);
    const seconds = (performance.now() - started) / 1000;
    console.log(`customers import: 100,000 rows in ${seconds.toFixed(1)} s (whole CLI process, PostgreSQL)`);
    expect(res.code, res.stderr).toBe(0);
    expect(JSON.parse(res.stdout)).toEqual({
      imported: 100_000,
      created: 100_000,
      updated: 0,
      unchanged: 0,
      balancesSet: 75_000,
      rejected: [],
      rejectedCount: 0,
      referralsLinked: 0,
      referralErrors: [],
      referralErrorCount: 0,
    });
    expect(seconds).toBeLessThan(60);

    await withDb(async (db) => {
      const { n } = await db
        .selectFrom('customers')
        .select((eb) => eb.fn.countAll<number>().as('n'))
        .where('shop_id', '=', shopId)
        .executeTakeFirstOrThrow();
      expect(Number(n)).toBe(100_000);
      expect(await countByType(db, shopId)).toEqual({ 'customers/created': 100_000, 'points/updated': 75_000 });
      expect(await ledgerViolations(db, shopId)).toEqual({ brokenChains: 0, wrongBalances: 0 });
    });
  });
});

describe('CLI: orders import', () => {
  let shopId: string;
  beforeAll(async () => {
    ({ shopId } = await cliJson(['shop', 'create', '--name', 'Orders import shop']));
    await withDb(async (db) => {
      await createEarningRule(db, shopId, { type: 'place_order', name: '1 pt per $1', earnPoint: 1, spent: '1.00' });
      for (const id of ['h-1', 'h-2']) await upsertCustomer(db, shopId, { shopifyCustomerId: id, email: `${id}@example.com` });
    });
  }, 120_000);

  const balances = () =>
    withDb((db) => db.selectFrom('customers').select(['shopify_customer_id', 'points']).where('shop_id', '=', shopId).orderBy('shopify_customer_id').execute());

  it('records orders line by line, in file order per order, earning by the rules; bad lines reported; a re-run changes nothing', { timeout: 180_000 }, async () => {
    const first = await cliJson(['orders', 'import', fixture('orders.ndjson'), '--shop', shopId], 2);
    expect(first).toMatchObject({ imported: 3, created: 2, updated: 1, unchanged: 0, rejectedCount: 5 });
    const byLine = Object.fromEntries(first.rejected.map((r: { line: number; error: string }) => [r.line, r.error]));
    expect(Object.keys(byLine).map(Number)).toEqual([4, 5, 6, 7, 8]);
    expect(byLine[4]).toMatch(/no customer matches "nobody"/);
    expect(byLine[5]).toMatch(/^total: money is a decimal string/);
    expect(byLine[6]).toMatch(/^malformed JSON/);
    expect(byLine[7]).toMatch(/^orderId: required/);
    expect(byLine[8]).toMatch(/cannot become pending/);
    // H-1: 30 points, then a third refunded: 20. H-2: 12.
    expect(await balances()).toEqual([
      { shopify_customer_id: 'h-1', points: 20 },
      { shopify_customer_id: 'h-2', points: 12 },
    ]);
    // H-1's lines carry Shopify's updated_at (sourceUpdatedAt): its first, older state is recognised as stale, not as going back.
    const again = await cliJson(['orders', 'import', fixture('orders.ndjson'), '--shop', shopId], 2);
    expect(again).toMatchObject({ imported: 3, created: 0, updated: 0, unchanged: 3, rejectedCount: 5 });
    expect(await balances()).toEqual([
      { shopify_customer_id: 'h-1', points: 20 },
      { shopify_customer_id: 'h-2', points: 12 },
    ]);

    const csv = await cli(['orders', 'import', fixture('orders.csv'), '--shop', shopId]);
    expect(csv.code).toBe(2);
    expect(csv.stdout).toContain(`Imported 1 order line(s) from ${fixture('orders.csv')}: 1 order(s) created, 0 updated, 0 unchanged.`);
    expect(csv.stdout).toMatch(/line 3: lineItems: /);
    expect((await balances())[1]).toEqual({ shopify_customer_id: 'h-2', points: 17 });
  });
});

describe('CLI: orders import of Shopify orders', () => {
  let shopId: string;
  let dir: string;
  beforeAll(async () => {
    ({ shopId } = await cliJson(['shop', 'create', '--name', 'Shopify history shop']));
    await withDb(async (db) => {
      await createEarningRule(db, shopId, { type: 'place_order', name: '1 pt per $1', earnPoint: 1, spent: '1.00' });
      await upsertCustomer(db, shopId, { shopifyCustomerId: 'ours-1', email: 'ours-1@example.com' });
      // History is not a sign-up: customers Shopify dates before the program get no welcome bonus.
      await createEarningRule(db, shopId, { type: 'sign_up', name: 'Welcome', earnPoint: 50 });
    });
    dir = await mkdtemp(path.join(tmpdir(), 'loyalty-shopify-import-'));
  }, 120_000);
  afterAll(() => rm(dir, { recursive: true, force: true }));

  /** A paid Shopify order as the Admin API gives it, ids past 2^53 written as JSON numbers. */
  const paid = (id: string, customer: string, refunds: string = '[]') =>
    `{"id":${id},"email":"c${customer}@example.com","currency":"USD","financial_status":"paid","test":false,` +
    `"processed_at":"2025-03-01T10:00:00Z","updated_at":"2025-03-02T10:00:00Z","total_price":"70.00","total_tax":"0.00",` +
    `"customer":{"id":${customer},"email":"c${customer}@example.com","created_at":"2024-01-01T00:00:00Z","updated_at":"2025-01-01T00:00:00Z"},` +
    `"line_items":[{"id":${id}1,"product_id":788032119674292922,"variant_id":null,"quantity":2,"price":"10.00","gift_card":false,"discount_allocations":[]},` +
    `{"id":${id}2,"product_id":788032119674292923,"variant_id":null,"quantity":1,"price":"50.00","gift_card":true,"discount_allocations":[]}],"refunds":${refunds}}`;

  it("takes Shopify's Order, one per line (bare or as the Admin API wraps it), beside our own format; creates missing customers as the connector does; a re-run changes nothing", { timeout: 180_000 }, async () => {
    const documented = stringifyLossless(parseLossless(await readFile(fixture('shopify/orders-create.json'), 'utf8')));
    const refund = '[{"id":8800000000000000001,"order_id":7700000000000000003,"created_at":"2025-03-02T09:00:00Z","refund_line_items":[{"line_item_id":77000000000000000031,"quantity":1}],"transactions":[{"kind":"refund","status":"success","amount":"10.00"}]}]';
    const file = path.join(dir, 'shopify-orders.ndjson');
    await writeFile(
      file,
      [
        documented,
        paid('7700000000000000001', '6600000000000000001'),
        `{"order":${paid('7700000000000000002', '6600000000000000001')}}`,
        paid('7700000000000000003', '6600000000000000002', refund),
        JSON.stringify({ orderId: 'ours-1001', customerIdentifier: 'ours-1', currency: 'USD', subtotal: '12.00', total: '12.00', status: 'paid', lineItems: [{ productId: 'p', quantity: 1, price: '12.00' }] }),
        paid('7700000000000000004', '6600000000000000003').replace(/"customer":\{[^}]*\}/, '"customer":null'),
        '',
      ].join('\n'),
    );
    const first = await cliJson(['orders', 'import', file, '--shop', shopId], 2);
    expect(first).toMatchObject({ imported: 5, created: 5, updated: 0, unchanged: 0, rejectedCount: 1, rejected: [{ line: 6, error: expect.stringContaining('no customer') }] });

    await withDb(async (db) => {
      const orders = await db.selectFrom('orders').innerJoin('customers', 'customers.id', 'orders.customer_id').select(['orders.order_id', 'orders.status', 'orders.test', 'customers.shopify_customer_id', 'orders.points_earned', 'orders.points_clawed_back']).where('orders.shop_id', '=', shopId).orderBy('orders.order_id').execute();
      expect(orders).toEqual([
        { order_id: '7700000000000000001', status: 'paid', test: false, shopify_customer_id: '6600000000000000001', points_earned: 20, points_clawed_back: 0 },
        { order_id: '7700000000000000002', status: 'paid', test: false, shopify_customer_id: '6600000000000000001', points_earned: 20, points_clawed_back: 0 },
        // Its refund (one unit, $10) came inside the order, as the Admin API gives it.
        { order_id: '7700000000000000003', status: 'partially_refunded', test: false, shopify_customer_id: '6600000000000000002', points_earned: 10, points_clawed_back: 0 },
        { order_id: '820982911946154508', status: 'cancelled', test: true, shopify_customer_id: '115310627314723954', points_earned: 0, points_clawed_back: 0 },
        { order_id: 'ours-1001', status: 'paid', test: false, shopify_customer_id: 'ours-1', points_earned: 12, points_clawed_back: 0 },
      ]);
      const customers = await db.selectFrom('customers').select(['shopify_customer_id', 'email', 'points']).where('shop_id', '=', shopId).orderBy('shopify_customer_id').execute();
      // Created from their orders' customer (no sign-up bonus: Shopify dates them before the program); the gift cards earned nothing.
      expect(customers).toEqual([
        { shopify_customer_id: '115310627314723954', email: 'john@example.com', points: 0 },
        { shopify_customer_id: '6600000000000000001', email: 'c6600000000000000001@example.com', points: 40 },
        { shopify_customer_id: '6600000000000000002', email: 'c6600000000000000002@example.com', points: 10 },
        { shopify_customer_id: 'ours-1', email: 'ours-1@example.com', points: 12 },
      ]);
      expect(await countByType(db, shopId)).toMatchObject({ 'customers/created': 4 });
      expect(await ledgerViolations(db, shopId)).toEqual({ brokenChains: 0, wrongBalances: 0 });
    });

    const again = await cliJson(['orders', 'import', file, '--shop', shopId], 2);
    expect(again).toMatchObject({ imported: 5, created: 0, updated: 0, unchanged: 5, rejectedCount: 1 });
    await withDb(async (db) => expect(await countByType(db, shopId)).toMatchObject({ 'customers/created': 4 }));
  });
});

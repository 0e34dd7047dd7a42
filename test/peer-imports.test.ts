import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PEER_COLUMNS, readImportFile } from '../src/cli/import-file.js';
import { type DatabaseHandle, type DB, openDatabase } from '../src/db/database.js';
import { importPeerCustomers, type PeerSource } from '../src/domain/imports/index.js';
import { createTier, upsertCustomer } from '../src/domain/program/index.js';
import { createShop } from '../src/domain/shops/index.js';
import { type CliResult, cliDatabase, onPostgres, openTestDatabase, runCli } from './helpers.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const fixture = (name: string) => path.join(ROOT, 'test/fixtures', name);
const YEAR_AHEAD = new Date(Date.now() + 365 * 86_400_000);

/** Customers whose balance is not the sum of their ledger's changes (0 when the ledger accounts for every point). */
async function unaccountedBalances(db: DB, shopId: string): Promise<number> {
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from customers c
    where c.shop_id = ${shopId}
      and c.points <> coalesce((select sum(a.new_points - a.old_points) from activities a where a.customer_id = c.id), 0)`.execute(db);
  return rows[0]!.n;
}

/** What a shop holds that an import may change: customers, their ledger entries, tiers and events. */
async function snapshot(db: DB, shopId: string) {
  const customers = await db
    .selectFrom('customers')
    .leftJoin('tier_members', 'tier_members.customer_id', 'customers.id')
    .leftJoin('tiers', 'tiers.id', 'tier_members.tier_id')
    .select(['customers.shopify_customer_id', 'customers.email', 'customers.points', 'customers.birthday', 'tiers.name as tier', 'tier_members.override_reason'])
    .where('customers.shop_id', '=', shopId)
    .orderBy(sql`lower(customers.email)`)
    .execute();
  const entries = await db
    .selectFrom('activities')
    .innerJoin('customers', 'customers.id', 'activities.customer_id')
    .select(['customers.email', 'activities.type', 'activities.description', 'activities.note', 'activities.old_points', 'activities.new_points'])
    .where('activities.shop_id', '=', shopId)
    // Batches commit in any order on PostgreSQL (two in flight): each customer's entries in order.
    .orderBy(sql`lower(customers.email)`)
    .orderBy('activities.seq')
    .execute();
  const events = await db.selectFrom('outbox_events').select(['type']).where('shop_id', '=', shopId).orderBy('id').execute();
  return { customers, entries, events: events.map((e) => e.type) };
}

describe('imports from Smile.io and LoyaltyLion exports', () => {
  let handle: DatabaseHandle;
  let db: DB;
  beforeAll(async () => {
    handle = await openTestDatabase();
    db = handle.db;
  });
  afterAll(() => handle?.close());

  async function shopWithTiers(name: string) {
    const { shop } = await createShop(db, name);
    await createTier(db, shop.id, { name: 'Silver', threshold: '500' });
    await createTier(db, shop.id, { name: 'Gold', threshold: '1500', multiplier: '1.5' });
    return shop.id;
  }
  const run = (shopId: string, source: PeerSource, file: string, options: { dryRun?: boolean; batchSize?: number } = {}) =>
    importPeerCustomers(handle, shopId, source, readImportFile(file, 'csv', PEER_COLUMNS[source]), { tierUntil: YEAR_AHEAD, ...options });

  it('reads a Smile.io export (BOM, CRLF, quotes, blank cells): balances with one entry each, birthdays, tiers placed by name', async () => {
    const shopId = await shopWithTiers('Smile shop');
    // Batches of 2: the repeated e-mail on line 9 is caught across batches.
    const result = await run(shopId, 'smile', fixture('smile-customers.csv'), { batchSize: 2 });
    expect(result).toMatchObject({ imported: 4, created: 4, updated: 0, unchanged: 0, balancesSet: 4, tiersPlaced: 2, rejectedCount: 4, tierProblemCount: 1 });
    const byLine = Object.fromEntries(result.rejected.map((r) => [r.line, r.error]));
    expect(Object.keys(byLine).map(Number)).toEqual([5, 6, 7, 9]);
    expect(byLine[5]).toMatch(/^points:/);
    expect(byLine[6]).toMatch(/^email:/);
    expect(byLine[7]).toMatch(/^birthday: "2024-02-30" is not a date/);
    expect(byLine[9]).toBe('e-mail Ada@Example.com is also on line 2');
    expect(result.tierProblems).toEqual([{ line: 4, error: 'tier "Platinum": the shop has no tier of that name (not placed)' }]);

    const { customers, entries } = await snapshot(db, shopId);
    expect(customers).toEqual([
      { shopify_customer_id: 'ada@example.com', email: 'ada@example.com', points: 1200, birthday: '1815-12-10', tier: 'Gold', override_reason: 'Imported from Smile.io' },
      { shopify_customer_id: 'alan@example.com', email: 'alan@example.com', points: 0, birthday: null, tier: null, override_reason: null },
      { shopify_customer_id: 'edsger@example.com', email: 'edsger@example.com', points: 75, birthday: '1930-05-11', tier: 'Silver', override_reason: 'Imported from Smile.io' },
      // Smile's year 1004: only the day is known.
      { shopify_customer_id: 'grace@example.com', email: 'GRACE@Example.com', points: 50, birthday: '1004-12-09', tier: null, override_reason: null },
    ]);
    expect(entries).toEqual([
      { email: 'ada@example.com', type: 'update_points', description: 'Imported from Smile.io', note: 'Smile.io: 300 spent points there', old_points: 0, new_points: 1200 },
      { email: 'alan@example.com', type: 'update_points', description: 'Imported from Smile.io', note: 'Smile.io: 0 spent points there', old_points: 0, new_points: 0 },
      { email: 'edsger@example.com', type: 'update_points', description: 'Imported from Smile.io', note: 'Smile.io: 5 spent points there', old_points: 0, new_points: 75 },
      { email: 'GRACE@Example.com', type: 'update_points', description: 'Imported from Smile.io', note: null, old_points: 0, new_points: 50 },
    ]);
    // Placed, not earned: the tier metric counts nothing of an imported balance.
    const metric = await sql<{ n: number }>`select count(*)::int as n from tier_metric_days d join customers c on c.id = d.customer_id where c.shop_id = ${shopId}`.execute(db);
    expect(metric.rows[0]!.n).toBe(0);
    // Nor does it make anyone an active member: the balance moved in, the customer did nothing here.
    const active = await sql<{ n: number }>`select count(*)::int as n from insight_active_days where shop_id = ${shopId}`.execute(db);
    expect(active.rows[0]!.n).toBe(0);
    expect(await unaccountedBalances(db, shopId)).toBe(0);
  });

  it('reads a LoyaltyLion export: merchant_id as the shop\'s customer id, approved points as the balance, an existing customer matched by e-mail', async () => {
    const shopId = await shopWithTiers('LoyaltyLion shop');
    // Ada is already a customer here, with the sign-up's points and another id: matched by her e-mail.
    await upsertCustomer(db, shopId, { shopifyCustomerId: 'shopify-ada', email: 'Ada@Example.com' });
    await db.updateTable('customers').set({ points: 0 }).where('shop_id', '=', shopId).execute();
    await sql`insert into activities (id, shop_id, customer_id, type, setting_type, description, old_points, new_points)
      select 'seed-ada', shop_id, id, 'add_points', 'manual', 'welcome', 0, 10 from customers where shop_id = ${shopId}`.execute(db);
    await db.updateTable('customers').set({ points: 10 }).where('shop_id', '=', shopId).execute();

    const result = await run(shopId, 'loyaltylion', fixture('loyaltylion-customers.csv'));
    expect(result).toMatchObject({ imported: 5, created: 4, updated: 1, unchanged: 0, balancesSet: 5, tiersPlaced: 1, rejectedCount: 2, tierProblemCount: 1 });
    expect(result.rejected).toEqual([
      { line: 7, error: expect.stringMatching(/^points:.*>=0/) },
      { line: 8, error: 'expected 12 columns as in the header, got 4' },
    ]);
    expect(result.tierProblems).toEqual([{ line: 4, error: 'tier "Diamond": the shop has no tier of that name (not placed)' }]);

    const { customers, entries } = await snapshot(db, shopId);
    expect(customers.map((c) => [c.shopify_customer_id, c.email, c.points, c.birthday, c.tier])).toEqual([
      ['shopify-ada', 'Ada@Example.com', 80, null, null],
      ['7001', 'barbara@example.com', 640, '1939-11-07', 'Silver'],
      ['7003', 'dennis@example.com', 300, '1004-09-09', null],
      ['7002', 'ken@example.com', 15, null, null],
      // No merchant_id: the e-mail stands for the id until the shop's platform names them.
      ['no-id@example.com', 'no-id@example.com', 5, null, null],
    ]);
    const ada = entries.filter((e) => e.email === 'Ada@Example.com');
    expect(ada.map((e) => [e.description, e.old_points, e.new_points])).toEqual([['welcome', 0, 10], ['Imported from LoyaltyLion', 10, 80]]);
    expect(entries.find((e) => e.email === 'barbara@example.com')?.note).toBe('LoyaltyLion: 100 spent, 20 pending points there');
    expect(await unaccountedBalances(db, shopId)).toBe(0);
  });

  it('changes nothing on a second run of the same file, and refuses a changed balance on its line', async () => {
    const shopId = await shopWithTiers('Re-run shop');
    await run(shopId, 'smile', fixture('smile-customers.csv'));
    const before = await snapshot(db, shopId);

    const again = await run(shopId, 'smile', fixture('smile-customers.csv'));
    expect(again).toMatchObject({ imported: 4, created: 0, updated: 0, unchanged: 4, balancesSet: 0, tiersPlaced: 0 });
    expect(await snapshot(db, shopId)).toEqual(before);

    // Ada spends here, then the file comes again with another balance for her.
    const ada = await db.selectFrom('customers').select(['id', 'points']).where('shop_id', '=', shopId).where('email', '=', 'ada@example.com').executeTakeFirstOrThrow();
    await sql`insert into activities (id, shop_id, customer_id, type, setting_type, description, old_points, new_points)
      values ('spend-ada', ${shopId}, ${ada.id}, 'redeem_points', 'manual', 'spent here', 1200, 1000)`.execute(db);
    await db.updateTable('customers').set({ points: 1000 }).where('id', '=', ada.id).execute();
    const dir = await mkdtemp(path.join(tmpdir(), 'peer-'));
    try {
      const changed = path.join(dir, 'smile.csv');
      await writeFile(changed, 'Email,Points balance\nada@example.com,1500\nedsger@example.com,75\n');
      const result = await run(shopId, 'smile', changed);
      expect(result).toMatchObject({ imported: 1, unchanged: 1, balancesSet: 0, rejectedCount: 1 });
      expect(result.rejected[0]).toEqual({
        line: 2,
        error: 'points: the balance was imported from this program before (1200); the file now says 1500, which is not set again (adjust it with a points call)',
      });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const after = await db.selectFrom('customers').select('points').where('id', '=', ada.id).executeTakeFirstOrThrow();
    expect(after.points).toBe(1000);
    expect(await unaccountedBalances(db, shopId)).toBe(0);
  });

  it('gives an e-mail-keyed imported customer the first shop id that comes with their e-mail, once', async () => {
    const shopId = await shopWithTiers('Adopting shop');
    await run(shopId, 'smile', fixture('smile-customers.csv'));
    const imported = await db.selectFrom('customers').select(['id', 'points']).where('shop_id', '=', shopId).where('email', '=', 'ada@example.com').executeTakeFirstOrThrow();
    // Shopify's customers/create (or an order, or a REST call) for the same person, with their Shopify id.
    const saved = await upsertCustomer(db, shopId, { shopifyCustomerId: '7001', email: 'Ada@Example.com' });
    expect(saved).toMatchObject({ created: false, customer: { _id: imported.id, shopifyCustomerId: '7001', email: 'Ada@Example.com', points: imported.points } });
    // The e-mail is taken by that customer now: another id with it is refused, as for any e-mail.
    await expect(upsertCustomer(db, shopId, { shopifyCustomerId: '7002', email: 'ada@example.com' })).rejects.toMatchObject({ code: 'email_taken' });
    // The import's re-run finds her by e-mail, balance already set: nothing changes.
    const again = await run(shopId, 'smile', fixture('smile-customers.csv'));
    expect(again).toMatchObject({ created: 0, updated: 0, unchanged: 4, balancesSet: 0 });
    expect(await unaccountedBalances(db, shopId)).toBe(0);
  });

  it('--dry-run counts what would change and writes nothing', async () => {
    const shopId = await shopWithTiers('Dry shop');
    const before = await snapshot(db, shopId);
    const dry = await run(shopId, 'smile', fixture('smile-customers.csv'), { dryRun: true });
    expect(dry).toMatchObject({ dryRun: true, imported: 4, created: 4, balancesSet: 4, tiersPlaced: 2, rejectedCount: 4, tierProblemCount: 1 });
    expect(await snapshot(db, shopId)).toEqual(before);
    // The real run then does what the dry run said.
    const real = await run(shopId, 'smile', fixture('smile-customers.csv'));
    expect({ ...real, dryRun: true }).toEqual(dry);
  });

  it('refuses a file without the balance column, naming it', async () => {
    const { shop } = await createShop(db, 'Header shop');
    const dir = await mkdtemp(path.join(tmpdir(), 'peer-'));
    try {
      const file = path.join(dir, 'll.csv');
      await writeFile(file, 'merchant_id,email,points_spent\n1,a@example.com,3\n');
      await expect(run(shop.id, 'loyaltylion', file)).rejects.toThrow('the CSV header lacks the column(s) points (points_approved)');
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe('CLI: import smile / loyaltylion', () => {
  let env: Record<string, string>;
  let cliDb: Awaited<ReturnType<typeof cliDatabase>> | undefined;
  let dataDir: string;
  beforeAll(async () => {
    cliDb = await cliDatabase('loyalty-peer-cli-');
    ({ env, dataDir } = cliDb);
  });
  afterAll(() => cliDb?.drop());
  const cli = (args: string[]): Promise<CliResult> => runCli(args, env);

  it('dry-runs, imports and re-imports from the command line, listing the refused lines and tiers', { timeout: 300_000 }, async () => {
    const created = await cli(['shop', 'create', '--name', 'Peer CLI shop', '--json']);
    const { shopId } = JSON.parse(created.stdout);

    const dry = await cli(['import', 'smile', fixture('smile-customers.csv'), '--shop', 'Peer CLI shop', '--dry-run']);
    expect(dry.code, dry.stderr).toBe(2);
    expect(dry.stdout).toContain('Dry run, nothing written: would import 4 customer(s) from Smile.io');
    expect(dry.stdout).toContain('  line 6: email: Invalid email address');
    expect(dry.stdout).toContain('Tier not placed on 3 line(s):');
    expect(dry.stdout).toContain('  line 2: tier "Gold": the shop has no tier of that name (not placed)');

    const ll = await cli(['import', 'loyaltylion', fixture('loyaltylion-customers.csv'), '--shop', shopId, '--tier-until', '2099-01-01', '--json']);
    expect(ll.code).toBe(2);
    expect(JSON.parse(ll.stdout)).toMatchObject({ source: 'loyaltylion', imported: 5, created: 5, balancesSet: 5, rejectedCount: 2, tierUntil: '2099-01-01T00:00:00.000Z' });
    const again = await cli(['import', 'loyaltylion', fixture('loyaltylion-customers.csv'), '--shop', shopId, '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ imported: 5, created: 0, updated: 0, unchanged: 5, balancesSet: 0 });

    const past = await cli(['import', 'smile', fixture('smile-customers.csv'), '--shop', shopId, '--tier-until', '2020-01-01']);
    expect(past.code).toBe(1);
    expect(past.stderr).toMatch(/must be in the future/);

    const check = await openDatabase(onPostgres ? { url: env.DATABASE_URL } : { dataDir });
    try {
      expect(await unaccountedBalances(check.db, shopId)).toBe(0);
      const entries = await check.db.selectFrom('activities').select('description').where('shop_id', '=', shopId).execute();
      expect(entries).toHaveLength(5);
      expect(new Set(entries.map((e) => e.description))).toEqual(new Set(['Imported from LoyaltyLion']));
    } finally {
      await check.close();
    }
  });
});

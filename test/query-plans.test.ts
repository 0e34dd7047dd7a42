import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PREPARED } from '../src/db/database.js';
import type { Database } from '../src/db/schema.js';
import { findCustomer, listCustomers } from '../src/domain/customers/customers.js';
import { encodeCursor, encodeTimeCursor } from '../src/domain/kernel/pagination.js';
import { changePoints, listActivities, listActivitiesOfCustomers, writeBalanceChange } from '../src/domain/ledger/points.js';
import { writeFirstStates } from '../src/domain/orders/order-first-states.js';
import { parseOrderPut } from '../src/domain/orders/orders.js';
import { birthdayRun } from '../src/domain/program/birthday-run.js';
import { nextExpiries, pointExpiry } from '../src/domain/program/expiry.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { createTier, customerTiers } from '../src/domain/program/tiers.js';
import { createShop } from '../src/domain/shops/shops.js';
import { codeExpiry, codeWarnings } from '../src/domain/codes/code-expiry.js';
import { listDiscountCodes, listDiscountCodesOfCustomers } from '../src/domain/codes/discount-codes.js';
import { listReferees, listRefereesOfReferrers, pageReferees } from '../src/domain/rewards/referrals.js';
import { getDelivery, listAttemptsOfDeliveries, listDeliveries, listDeliveriesPage } from '../src/domain/webhooks/webhook-deliveries.js';
import { searchCustomers } from '../src/domain/search/customer-search.js';
import { buildLargeShop, deliveryId, LARGE_TABLES, subscriptionId } from './fixtures/large-shop.js';
import { onPostgres, openTestDatabase } from './helpers.js';

/**
 * Every list and lookup reads in proportion to what it returns (issue 16). On a shop large
 * enough for the planner to choose as it would in production, each statement the domain sends
 * for a list is run under EXPLAIN ANALYZE, and the test fails on the plan shapes that make a page
 * cost the data behind it: a sequential scan of a large table, a sort of many rows, or an index
 * walked while a filter throws most rows away (the customer whose entries are all old, the e-mail
 * prefix the index order does not serve).
 */

/** More rows than any page plus its look-ahead, fewer than any shape that reads the table. */
const BOUND = 1_000;

type PlanNode = {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  'Actual Rows': number;
  'Actual Loops': number;
  'Rows Removed by Filter'?: number;
  Plans?: PlanNode[];
};

function nodesOf(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodesOf)];
}

/** What is wrong with a plan, in words; empty when nothing is. */
function problemsOf(plan: PlanNode): string[] {
  const problems: string[] = [];
  for (const node of nodesOf(plan)) {
    const relation = node['Relation Name'];
    if (node['Node Type'] === 'Seq Scan' && relation && LARGE_TABLES.includes(relation)) problems.push(`sequential scan of ${relation}`);
    if (node['Node Type'].endsWith('Sort')) {
      const input = node.Plans?.[0];
      const sorted = input ? input['Actual Rows'] * input['Actual Loops'] : 0;
      if (sorted > BOUND) problems.push(`${node['Node Type']} of ${sorted} rows`);
    }
    const removed = (node['Rows Removed by Filter'] ?? 0) * node['Actual Loops'];
    if (removed > BOUND) problems.push(`${node['Node Type']} on ${node['Index Name'] ?? relation} filtered out ${removed} rows`);
  }
  return problems;
}

describe.skipIf(!onPostgres)('query plans at scale (PostgreSQL)', () => {
  let handle: Awaited<ReturnType<typeof openTestDatabase>>;
  let pool: pg.Pool;
  let db: Kysely<Database>;
  let captured: Array<{ sql: string; parameters: readonly unknown[] }> = [];
  const SHOP = 'shop_big';

  beforeAll(async () => {
    handle = await openTestDatabase();
    pool = new pg.Pool({ connectionString: handle.url, max: 2 });
    db = new Kysely<Database>({
      dialect: new PostgresDialect({ pool }),
      log: (event) => {
        if (event.level === 'query') captured.push({ sql: event.query.sql, parameters: event.query.parameters });
      },
    });
    await buildLargeShop((statement) => pool.query(statement), SHOP);
    // As autovacuum would have by then: statistics, and the visibility map index-only scans need.
    await pool.query(`vacuum analyze ${LARGE_TABLES.join(', ')}`);
  }, 180_000);

  afterAll(async () => {
    await db?.destroy();
    await handle?.close();
  });

  /** Runs `call`, then EXPLAIN ANALYZE on each statement it sent; returns the problems found, by statement. */
  async function plansOf(call: () => Promise<unknown>): Promise<string[]> {
    captured = [];
    await call();
    // Transaction control (savepoints too) has no plan.
    const statements = captured.filter((c) => !/^(begin|commit|rollback|savepoint|release)\b/i.test(c.sql.trim()));
    expect(statements.length).toBeGreaterThan(0);
    const problems: string[] = [];
    for (const statement of statements) {
      const { rows } = await pool.query(`explain (analyze, format json) ${statement.sql}`, statement.parameters as unknown[]);
      const plan = (rows[0]['QUERY PLAN'] as Array<{ Plan: PlanNode }>)[0]!.Plan;
      problems.push(...problemsOf(plan).map((p) => `${p} in: ${statement.sql}`));
    }
    return problems;
  }

  const HEAVY = 'c_heavy';
  const first = 50;

  it.each([
    ['customers, first page', () => listCustomers(db, SHOP, { first })],
    ['customers by e-mail prefix', () => listCustomers(db, SHOP, { first, emailPrefix: 'm' })],
    ['customers by a rare e-mail prefix', () => listCustomers(db, SHOP, { first, emailPrefix: 'zz' })],
    ['customers after a deep cursor', () => listCustomers(db, SHOP, { first, after: encodeCursor(['q', '']) })],
    ['customers by prefix after a cursor', () => listCustomers(db, SHOP, { first, emailPrefix: 'm', after: encodeCursor(['mm', '']) })],
    ['a customer by e-mail', () => findCustomer(db, SHOP, 'M1234@example.com')],
    ['a customer by shop customer id', () => findCustomer(db, SHOP, '1234')],
    ['the heavy customer\'s activities', () => listActivities(db, SHOP, HEAVY, { first })],
    ['the heavy customer\'s activities after a cursor', () => listActivities(db, SHOP, HEAVY, { first, after: encodeCursor([60_000]) })],
    ['activities of a list of customers', () => listActivitiesOfCustomers(db, SHOP, [HEAVY, 'c_1', 'c_2'], { first })],
    ['the heavy customer\'s discount codes', () => listDiscountCodes(db, SHOP, HEAVY, { first })],
    ['discount codes of a list of customers', () => listDiscountCodesOfCustomers(db, SHOP, [HEAVY, 'c_1'], { first })],
    ['referees, first keyset page', () => listReferees(db, SHOP, HEAVY, { first })],
    ['referees after a deep cursor', () => listReferees(db, SHOP, HEAVY, { first, after: encodeCursor([15_000]) })],
    ['referees of a list of referrers', () => listRefereesOfReferrers(db, SHOP, [HEAVY, 'c_1'], { first })],
    ['GET /referral/referee deep page', () => pageReferees(db, SHOP, { customerIdentifier: 'heavy@example.com', page: 60, pageSize: 250 })],
    ['GET /webhooks/deliveries deepest page', () => listDeliveries(db, SHOP, { page: 200, pageSize: 50 })],
    ['GET /webhooks/deliveries after a deep cursor', () => listDeliveries(db, SHOP, { after: encodeTimeCursor({ created_at: new Date(Date.UTC(2026, 0, 2)), id: deliveryId(50_000) }) })],
    ['deliveries by status (none)', () => listDeliveries(db, SHOP, { status: 'pending' })],
    ['deliveries by status, deep page', () => listDeliveries(db, SHOP, { status: 'succeeded', page: 200 })],
    ['deliveries by subscription', () => listDeliveries(db, SHOP, { subscriptionId: subscriptionId(2), page: 100 })],
    ['deliveries by topic', () => listDeliveries(db, SHOP, { topic: 'points/subtracted', page: 100 })],
    ['deliveries by topic group', () => listDeliveries(db, SHOP, { topic: 'points/*', page: 100 })],
    ['deliveries after a deep cursor', () => listDeliveriesPage(db, SHOP, {}, { first, after: encodeTimeCursor({ created_at: new Date(Date.UTC(2026, 0, 2)), id: deliveryId(50_000) }) })],
    ['deliveries by topic group after a cursor', () =>
      listDeliveriesPage(db, SHOP, { topic: 'points/*' }, { first, after: encodeTimeCursor({ created_at: new Date(Date.UTC(2026, 0, 2)), id: deliveryId(50_000) }) })],
    ['a delivery with its attempts', () => getDelivery(db, SHOP, deliveryId(77))],
    ['attempts of a page of deliveries', () => listAttemptsOfDeliveries(db, SHOP, [1, 2, 3].map(deliveryId))],
    ['customer search by a common e-mail prefix', () => searchCustomers(db, SHOP, { query: 'm', first: 50 })],
    ['customer search by a rare e-mail prefix', () => searchCustomers(db, SHOP, { query: 'zz' })],
    ['customer search by a shop customer id', () => searchCustomers(db, SHOP, { query: '1234' })],
    ['customer search by a discount code', () => searchCustomers(db, SHOP, { query: 'OTHER2345' })],
  ] as Array<[string, () => Promise<unknown>]>)('%s reads only what it returns', async (_name, call) => {
    expect(await plansOf(call)).toEqual([]);
  });

  it('customer search probes the three unique or ordered indexes, one each way', async () => {
    captured = [];
    const hits = await searchCustomers(db, SHOP, { query: 'other2345' });
    expect(hits.map((h) => [h.matchedBy, h.customer.shopifyCustomerId])).toEqual([['discount_code', '2345']]);
    const [statement] = captured;
    const { rows } = await pool.query(`explain (analyze, format json) ${statement!.sql}`, statement!.parameters as unknown[]);
    const indexes = nodesOf((rows[0]['QUERY PLAN'] as Array<{ Plan: PlanNode }>)[0]!.Plan).map((n) => n['Index Name']).filter(Boolean);
    expect(new Set(indexes)).toEqual(new Set(['customers_shop_customer_id_key', 'discount_codes_shop_code_key', 'customers_shop_email_order_idx', 'customers_pkey']));
  });

  it('the birthday run reads the day\'s birthdays only', async () => {
    // One customer in 100 born on 15 June; a birthday rule whose run is due for 16 June 2026 (no
    // birthday that day: EXPLAIN ANALYZE runs each statement again, and an award would not repeat).
    await pool.query(`update customers set birthday = '1990-06-15' where shop_id = $1 and shopify_customer_id like '%37'`, [SHOP]);
    await pool.query(`analyze customers`);
    await pool.query(
      `insert into earning_rules (id, shop_id, type, name, earn_point) values ('r_birthday', $1, 'birthday', 'Happy birthday', 10)`,
      [SHOP],
    );
    await pool.query(`insert into shop_day_runs (shop_id, kind, day, due_at) values ($1, 'birthdays', '2026-06-16', '2026-06-16T00:00:00Z')`, [SHOP]);
    expect(await plansOf(() => birthdayRun.runDue(db, new Date('2026-06-16T01:00:00Z'), 50))).toEqual([]);
  });

  /**
   * The problems in the generic plan of a new order's statement (its prepared form), run after the
   * order is written: it inserts nothing then, and shows every lookup.
   */
  async function firstStateProblems(on: { db: Kysely<Database>; pool: pg.Pool }, shopId: string, customerIdentifier: string, code?: string): Promise<string[]> {
    captured = [];
    const body = { customerIdentifier, currency: 'USD', subtotal: '10.00', total: '10.00', status: 'paid', lineItems: [], ...(code ? { discountCodes: [{ code, amount: '5.00' }] } : {}) };
    const [outcome] = await writeFirstStates(on.db, [parseOrderPut(shopId, code ? `plan-${code}` : 'plan-1', body, new Date())]);
    expect(outcome).toMatchObject({ created: true });
    const statement = captured.find((c) => c.sql.startsWith(PREPARED))!;
    const client = await on.pool.connect();
    try {
      await client.query('begin');
      await client.query('set local plan_cache_mode = force_generic_plan');
      await client.query(`prepare first_states as ${statement.sql}`);
      const values = statement.parameters.map((v) => (v instanceof Date ? `'${v.toISOString()}'` : typeof v === 'string' ? `'${v.replaceAll("'", "''")}'` : String(v)));
      const { rows } = await client.query(`explain (analyze, format json) execute first_states(${values.join(', ')})`);
      return problemsOf((rows[0]['QUERY PLAN'] as Array<{ Plan: PlanNode }>)[0]!.Plan);
    } finally {
      await client.query('rollback');
      await client.query('deallocate all');
      client.release();
    }
  }

  it('a new order\'s statement, planned generic as its prepared statement is, probes indexes', async () => {
    expect(await firstStateProblems({ db, pool }, SHOP, '1234')).toEqual([]);
  });

  it('a new order\'s statement with a code, planned generic, finds the code by an index probe', async () => {
    // Counting on 100 orders of 100 codes each, the planner once hashed every code of every shop to
    // find the batch's few (20 ms a batch at 40,000 codes; PUT /orders with a code at 0.64 of without).
    expect(await firstStateProblems({ db, pool }, SHOP, '2345', 'OTHER2345')).toEqual([]);
    const { rows } = await pool.query(`select status, order_id from discount_codes where shop_id = $1 and code = 'OTHER2345'`, [SHOP]);
    expect(rows).toEqual([{ status: 'used', order_id: 'plan-OTHER2345' }]);
  });

  it('a new order\'s statement probes indexes on a small table too (1,000 customers), where a scan looks cheap to the planner', async () => {
    // The generic plan counts on 100 input rows: it once locked the batch's customers by a pass over
    // every customer, two thirds of the statement's time in the orders bench.
    const small = await openTestDatabase();
    const smallPool = new pg.Pool({ connectionString: small.url, max: 2 });
    const smallDb = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: smallPool }),
      log: (event) => {
        if (event.level === 'query') captured.push({ sql: event.query.sql, parameters: event.query.parameters });
      },
    });
    try {
      await smallPool.query(`insert into shops (id, name) values ('shop_small', 'small')`);
      await smallPool.query(`insert into earning_rules (id, shop_id, type, name, earn_point, spent_minor) values ('r_small', 'shop_small', 'place_order', '1 per $1', 1, 100)`);
      await smallPool.query(`insert into customers (id, shop_id, shopify_customer_id, email) select 's_' || i, 'shop_small', i::text, 's' || i || '@example.com' from generate_series(1, 1000) i`);
      await smallPool.query('vacuum analyze customers');
      expect(await firstStateProblems({ db: smallDb, pool: smallPool }, 'shop_small', '12')).toEqual([]);
    } finally {
      await smallDb.destroy();
      await small.close();
    }
  });

  /**
   * Runs `call` on one connection with auto_explain, which also shows the statements a trigger
   * runs (the ledger's expiry trigger); returns the problems found in every plan.
   */
  async function nestedPlansOf(call: (db: Kysely<Database>) => Promise<unknown>, seen?: (plan: { 'Query Text': string; Plan: PlanNode }) => void): Promise<string[]> {
    const single = new pg.Pool({ connectionString: handle.url, max: 1 });
    const plans: Array<{ 'Query Text': string; Plan: PlanNode }> = [];
    single.on('connect', (client) => {
      client.on('notice', (notice) => {
        const text = notice.message ?? '';
        if (text.includes('"Plan"')) plans.push(JSON.parse(text.slice(text.indexOf('{'))));
      });
    });
    const traced = new Kysely<Database>({ dialect: new PostgresDialect({ pool: single }) });
    try {
      await sql`load 'auto_explain'`.execute(traced);
      for (const setting of ['log_min_duration = 0', 'log_nested_statements = on', 'log_analyze = on', 'log_timing = off', "log_format = 'json'", "log_level = 'notice'"]) {
        await sql.raw(`set auto_explain.${setting}`).execute(traced);
      }
      await call(traced);
    } finally {
      await traced.destroy();
    }
    expect(plans.length).toBeGreaterThan(0);
    if (seen) plans.forEach(seen);
    return plans.flatMap((p) => problemsOf(p.Plan).map((problem) => `${problem} in: ${p['Query Text']}`));
  }

  it('expiry reads lots by customer, even when all of them fell due since the last statistics', async () => {
    // per_earn with every balance in lots: three of 1 point per customer, a hundred of 1,000 for the heavy one.
    await pool.query(`update shops set expiry_mode = 'per_earn' where id = $1`, [SHOP]);
    await pool.query(`insert into point_lots (shop_id, customer_id, points, expires_at, created_at)
      select $1, 'c_' || (1 + g / 3), 1, '2100-01-01', now() from generate_series(0, 299999) g`, [SHOP]);
    await pool.query(`insert into point_lots (shop_id, customer_id, points, expires_at, created_at)
      select $1, 'c_heavy', 1000, '2100-01-01', now() from generate_series(1, 100) g`, [SHOP]);
    await pool.query(`analyze point_lots`);
    const drawn: number[] = [];
    // Then the dates move: the statistics still say every lot expires in 2100, and none is due.
    await pool.query(`update point_lots set expires_at = expires_at + id * interval '1 second' where customer_id = 'c_heavy'`);
    await pool.query(`update point_lots set expires_at = '2026-06-01' where customer_id <> 'c_heavy'`);
    const problems = await nestedPlansOf(async (traced) => {
      expect(await pointExpiry.runDue(traced, new Date('2026-06-02T00:00:00Z'), 50)).toBeGreaterThan(0);
      // A debit draws the soonest lots of its customer only.
      expect(await writeBalanceChange(traced, SHOP, { customerId: 'c_heavy' }, { op: 'subtract', amount: 1500, type: 'subtract_points', settingType: 'api', description: null, note: null })).toBeDefined();
      expect((await nextExpiries(traced, SHOP, ['c_heavy', 'c_99999']))[0]).toMatchObject({ points: 500 });
    }, (plan) => {
      if (plan['Query Text'].includes('from point_lots where customer_id = customer')) drawn.push(plan.Plan['Actual Rows']);
    });
    expect(problems).toEqual([]);
    // The sweep's expiries drew each customer's three lots; then 1,500 points of lots of 1,000 took
    // one fetch of PL/pgSQL's loop (10 rows) of the heavy customer's hundred lots, not all of them.
    expect(drawn.slice(0, -1).every((rows) => rows === 3)).toBe(true);
    expect(drawn.at(-1)).toBe(10);
  });

  it('the tiers trigger runs its statements on their generic plans, not planned again at every write', async () => {
    const { shop } = await createShop(db, 'Tiered');
    await createTier(db, shop.id, { name: 'Gold', threshold: '1000' });
    const { customer } = await upsertCustomer(db, shop.id, { shopifyCustomerId: 't-1', email: 't-1@example.com' });
    const upgrades: string[] = [];
    const problems = await nestedPlansOf(async (traced) => {
      for (let i = 0; i < 8; i++) await changePoints(traced, shop.id, 'add', { customerIdentifier: 't-1', amount: 200 });
    }, (plan) => {
      if (plan['Query Text'].includes('tier_for(m.shop_id')) upgrades.push(JSON.stringify(plan.Plan));
    });
    expect(problems).toEqual([]);
    expect(upgrades).toHaveLength(8);
    // A custom plan (made for the call, at the cost of planning it) holds the call's ids as a
    // constant; the generic plan refers to the parameter.
    expect(upgrades.filter((p) => p.includes("ANY ('{"))).toEqual([]);
    expect(upgrades.every((p) => p.includes('ANY ($'))).toBe(true);
    expect((await customerTiers(db, shop.id, [customer._id]))[0]?.tier.name).toBe('Gold');
  });

  it('code expiry and warnings read the codes due, not the codes waiting', async () => {
    // Every code of the big shop expires, ten minutes apart from 1 January 2026 on (the last in
    // October); the shop warns 3 days ahead: at 05:00 on 1 January, 30 codes are due, 600 to warn.
    await pool.query(`update discount_codes set expires_at = timestamptz '2026-01-01' + (row_number) * interval '10 minutes'
      from (select id, row_number() over (order by id) from discount_codes where shop_id = $1) n where n.id = discount_codes.id`, [SHOP]);
    await pool.query(`update shops set code_warning_days = 3 where id = $1`, [SHOP]);
    await pool.query('vacuum analyze discount_codes, shops');
    const now = new Date('2026-01-01T05:00:00Z');
    const problems = await nestedPlansOf(async (traced) => {
      expect(await codeWarnings.runDue(traced, now, 50)).toBe(50);
      expect(await codeWarnings.oldestDue(traced, now)).toEqual(new Date('2025-12-29T00:00:00Z'));
      expect(await codeExpiry.oldestDue(traced, now)).toEqual(new Date('2026-01-01T00:10:00Z'));
      expect(await codeExpiry.runDue(traced, now, 50)).toBe(30);
    });
    expect(problems).toEqual([]);
  });

  it('catches the shapes it is meant to catch', async () => {
    // The checker itself: the statements issue 16 found, written the old way, are refused.
    const seqScan = await plansOf(() => db.selectFrom('webhook_deliveries').select('id').where('payload', '=', 'x').execute());
    expect(seqScan.join()).toMatch(/sequential scan of webhook_deliveries/);
    const bigSort = await plansOf(() => db.selectFrom('customers').select('id').where('shop_id', '=', SHOP).orderBy('created_at').limit(5).execute());
    expect(bigSort.join()).toMatch(/Sort of \d+ rows|sequential scan/);
    const filtered = await plansOf(() =>
      db.selectFrom('customers').select('id').where('shop_id', '=', SHOP).where('email', 'like', '%zz%').orderBy('id').limit(5).execute(),
    );
    expect(filtered.join()).toMatch(/filtered out \d+ rows/);
  });
});

import { Kysely, PostgresDialect } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../src/db/schema.js';
import { findCustomer, listCustomers } from '../src/domain/customers.js';
import { listDiscountCodes, listDiscountCodesOfCustomers } from '../src/domain/discount-codes.js';
import { encodeCursor, encodeTimeCursor } from '../src/domain/pagination.js';
import { listActivities, listActivitiesOfCustomers } from '../src/domain/points.js';
import { listReferees, listRefereesOfReferrers, pageReferees } from '../src/domain/referrals.js';
import { getDelivery, listAttemptsOfDeliveries, listDeliveries, listDeliveriesPage } from '../src/domain/webhook-deliveries.js';
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
    const statements = captured;
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
  ] as Array<[string, () => Promise<unknown>]>)('%s reads only what it returns', async (_name, call) => {
    expect(await plansOf(call)).toEqual([]);
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

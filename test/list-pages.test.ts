import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listCustomers, prefixRange } from '../src/domain/customers/customers.js';
import type { Page, PageArgs } from '../src/domain/kernel/pagination.js';
import { listActivities, listActivitiesOfCustomers } from '../src/domain/ledger/points.js';
import { listDiscountCodes, listDiscountCodesOfCustomers } from '../src/domain/codes/discount-codes.js';
import { listReferees, listRefereesOfReferrers, pageReferees } from '../src/domain/rewards/referrals.js';
import { listDeliveries, listDeliveriesPage } from '../src/domain/webhooks/webhook-deliveries.js';
import { buildLargeShop, subscriptionId } from './fixtures/large-shop.js';
import { openTestDatabase } from './helpers.js';

/**
 * The lists read only their page's index range (test/query-plans.test.ts); here, on both
 * databases, every page of every list, walked to the end, must equal what a plain query with
 * ORDER BY, OFFSET and no tricks returns: the far-end bounds, key-first offsets, row-comparison
 * cursors and prefix ranges change what is read, never what is returned.
 */

const SHOP = 'shop_pages';

/** Every node of a keyset list, page after page. */
async function walk<T>(pageOf: (args: PageArgs) => Promise<Page<T>>, first: number): Promise<T[]> {
  const nodes: T[] = [];
  let after: string | undefined;
  for (;;) {
    const page = await pageOf({ first, after });
    nodes.push(...page.items.map((item) => item.node));
    expect(page.items.length).toBeLessThanOrEqual(first);
    if (!page.hasNextPage) return nodes;
    expect(page.items).toHaveLength(first);
    after = page.items.at(-1)!.cursor;
  }
}

describe('list pages equal the plain query, page after page', () => {
  let handle: Awaited<ReturnType<typeof openTestDatabase>>;
  const ids = (rows: unknown[]) => (rows as Array<{ id?: string; _id?: string }>).map((row) => row._id ?? row.id);

  beforeAll(async () => {
    handle = await openTestDatabase();
    // 1,000 customers, 1,000 entries and 200 codes of one customer, 200 referees, 1,000 deliveries.
    await buildLargeShop((statement) => sql.raw(statement).execute(handle.db), SHOP, 0.01);
  }, 120_000);

  afterAll(async () => {
    await handle?.close();
  });

  it('customers by lower-cased e-mail in byte order, with and without a prefix', async () => {
    const all = await sql<{ id: string; key: string }>`
      select id, lower(email) as key from customers where shop_id = ${SHOP} order by lower(email) collate "C", id`.execute(handle.db);
    expect(ids(await walk((args) => listCustomers(handle.db, SHOP, args), 37))).toEqual(ids(all.rows));
    for (const prefix of ['m', 'M', 'z1', 'c10', 'nobody', 'héllo']) {
      const expected = all.rows.filter((row) => row.key.startsWith(prefix.toLowerCase()));
      expect(ids(await walk((args) => listCustomers(handle.db, SHOP, { ...args, emailPrefix: prefix }), 7))).toEqual(ids(expected));
    }
  });

  it('a customer\'s ledger and codes, newest first, alone and beside others', async () => {
    type One = (db: typeof handle.db, shopId: string, customerId: string, args: PageArgs) => Promise<Page<unknown>>;
    type Many = (db: typeof handle.db, shopId: string, customerIds: string[], args: PageArgs) => Promise<Array<Page<unknown>>>;
    for (const [table, list, listMany] of [
      ['activities', listActivities, listActivitiesOfCustomers],
      ['discount_codes', listDiscountCodes, listDiscountCodesOfCustomers],
    ] as Array<[string, One, Many]>) {
      for (const customer of ['c_heavy', 'c_1', 'c_nobody']) {
        const expected = await sql<{ id: string }>`
          select id from ${sql.table(table)} where customer_id = ${customer} order by seq desc`.execute(handle.db);
        expect(ids(await walk((args) => list(handle.db, SHOP, customer, args), 23))).toEqual(ids(expected.rows));
        expect(ids(await walk(async (args) => (await listMany(handle.db, SHOP, ['c_2', customer, 'c_3'], args))[1]!, 23))).toEqual(ids(expected.rows));
      }
    }
  });

  it('a referrer\'s referees in sign-up order: keyset pages, nested pages and the contract\'s numbered pages', async () => {
    const expected = await sql<{ id: string }>`select id from referrals where referrer_id = 'c_heavy' order by seq`.execute(handle.db);
    expect(ids(await walk((args) => listReferees(handle.db, SHOP, 'c_heavy', args), 19))).toEqual(ids(expected.rows));
    expect(ids(await walk(async (args) => (await listRefereesOfReferrers(handle.db, SHOP, ['c_1', 'c_heavy'], args))[1]!, 19))).toEqual(ids(expected.rows));
    const numbered = [];
    for (let page = 1; ; page++) {
      const rows = await pageReferees(handle.db, SHOP, { customerIdentifier: 'heavy@example.com', page, pageSize: 19 });
      numbered.push(...rows);
      if (rows.length < 19) break;
    }
    expect(ids(numbered)).toEqual(ids(expected.rows));
  });

  it('webhook deliveries newest first under every filter, keyset and numbered pages alike', async () => {
    const filters = [
      {},
      { status: 'retrying' },
      { status: 'pending' },
      { subscriptionId: subscriptionId(1) },
      { subscriptionId: subscriptionId(2), status: 'succeeded' },
      { topic: 'points/subtracted' },
      { topic: 'points/*' },
      { topic: 'points/*', status: 'failed' },
      { topic: 'points/added/*' },
      { topic: 'nothing/*' },
    ] as const;
    for (const filter of filters) {
      const topic = 'topic' in filter ? filter.topic : undefined;
      const expected = await sql<{ id: string }>`
        select id from webhook_deliveries
        where shop_id = ${SHOP}
          and (${'status' in filter ? filter.status : null}::text is null or status = ${'status' in filter ? filter.status : null})
          and (${'subscriptionId' in filter ? filter.subscriptionId : null}::text is null or subscription_id = ${'subscriptionId' in filter ? filter.subscriptionId : null})
          and (${topic ?? null}::text is null or topic = ${topic ?? null} or (${topic ?? ''} like '%/*' and topic like replace(${topic ?? ''}, '*', '%') and topic not like replace(${topic ?? ''}, '*', '%/%')))
        order by created_at desc, id desc`.execute(handle.db);
      expect(ids(await walk((args) => listDeliveriesPage(handle.db, SHOP, filter, args), 29)), JSON.stringify(filter)).toEqual(ids(expected.rows));
      const numbered = [];
      for (let page = 1; ; page++) {
        const { deliveries, nextCursor } = await listDeliveries(handle.db, SHOP, { ...filter, page: String(page), pageSize: '29' });
        numbered.push(...deliveries);
        expect(nextCursor === null, JSON.stringify({ filter, page })).toBe(numbered.length === expected.rows.length);
        if (!nextCursor) break;
      }
      expect(ids(numbered), JSON.stringify(filter)).toEqual(ids(expected.rows));
      // REST's cursor form, entered from the second numbered page, gives the same sequence.
      const second = await listDeliveries(handle.db, SHOP, { ...filter, page: '2', pageSize: '13' });
      const followed = [...(await listDeliveries(handle.db, SHOP, { ...filter, pageSize: '13' })).deliveries, ...second.deliveries];
      for (let after = second.nextCursor; after; ) {
        const next = await listDeliveries(handle.db, SHOP, { ...filter, after, pageSize: '31' });
        followed.push(...next.deliveries);
        after = next.nextCursor;
      }
      expect(ids(followed), JSON.stringify(filter)).toEqual(ids(expected.rows));
    }
  });
});

describe('prefixRange', () => {
  it.each([
    ['m', ['m', 'n']],
    ['ab', ['ab', 'ac']],
    ['a~', ['a~', 'a\u007f']],
    ['\u{d7ff}', ['\u{d7ff}', '\u{e000}']],
    ['x\u{10ffff}', ['x\u{10ffff}', null]],
    ['é', ['é', 'ê']],
  ] as Array<[string, [string, string | null]]>)('%j covers the strings starting with it', (prefix, range) => {
    expect(prefixRange(prefix)).toEqual(range);
  });
});

import { sql } from 'kysely';
import { expect } from 'vitest';
import type { DB } from '../../src/db/database.js';
import type { TestApp } from '../helpers.js';

/**
 * Gives a shop rows in many of its tables through the API: an earning rule, customers with
 * balances, a paid order that earns, a webhook subscription and the events and deliveries the
 * changes cause. What a shop's deletion or archive must cover.
 */
export async function fillShop(t: TestApp, s: { shopId: string; apiKey: string }, tag: string): Promise<void> {
  const rule = await t.graphql(s.apiKey, 'mutation { earningRuleCreate(input: { type: place_order, name: "1 pt per $1", earnPoint: 1, spent: "1.00" }) { userErrors { message } } }');
  expect(rule.data.earningRuleCreate.userErrors).toEqual([]);
  const sub = await t.post('/rest-api/v1/webhooks/subscriptions', { topic: 'points/*', callbackUrl: 'https://hooks.example.com/loyalty' }, s.apiKey);
  expect(sub.status).toBe(201);
  for (let i = 0; i < 3; i++) await t.customer(s.shopId, `${tag}-${i}`, 10 * (i + 1));
  const order = await fetch(`${t.url}/rest-api/v1/orders/${tag}-order-1`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${s.apiKey}` },
    body: JSON.stringify({
      customerIdentifier: `${tag}-0`, currency: 'USD', subtotal: '50.50', shipping: '5.00', tax: '4.04', total: '59.54', refunded: '0', status: 'paid',
      lineItems: [{ productId: 'shirt', quantity: 2, price: '20.00' }, { productId: 'mug', quantity: 1, price: '10.50' }],
    }),
  });
  expect(order.status).toBeLessThan(300);
}

/** Every table of the schema that has a shop_id column. */
export async function shopIdTables(db: DB): Promise<string[]> {
  const { rows } = await sql<{ table_name: string }>`
    select c.table_name from information_schema.columns c join information_schema.tables t using (table_schema, table_name)
    where c.table_schema = current_schema() and c.column_name = 'shop_id' and t.table_type = 'BASE TABLE' order by 1`.execute(db);
  return rows.map((r) => r.table_name);
}

/** The shop's rows per table (tables with a shop_id column, and the shop's own row), but the record of its deletion. */
export async function shopRowCounts(db: DB, shopId: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const table of (await shopIdTables(db)).filter((name) => name !== 'shop_deletions')) {
    const { rows } = await sql<{ n: string }>`select count(*)::text as n from ${sql.table(table)} where shop_id = ${shopId}`.execute(db);
    counts[table] = Number(rows[0]!.n);
  }
  const { rows } = await sql<{ n: string }>`select count(*)::text as n from shops where id = ${shopId}`.execute(db);
  counts.shops = Number(rows[0]!.n);
  return counts;
}

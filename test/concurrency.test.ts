import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onPostgres, startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
let shop: { shopId: string; apiKey: string };

beforeAll(async () => {
  t = await startTestApp();
  shop = await t.shop();
});
afterAll(() => t?.stop());

/** Balance, last ledger entry and the ledger's sum of deltas for one customer. */
async function ledgerOf(shopifyCustomerId: string) {
  const { db } = t.app.database;
  const customer = await db
    .selectFrom('customers')
    .selectAll()
    .where('shop_id', '=', shop.shopId)
    .where('shopify_customer_id', '=', shopifyCustomerId)
    .executeTakeFirstOrThrow();
  const entries = await db.selectFrom('activities').selectAll().where('customer_id', '=', customer.id).orderBy('seq').execute();
  const chained = entries.every((e, i) => i === 0 || e.old_points === entries[i - 1]!.new_points);
  return {
    balance: customer.points,
    last: entries.at(-1)?.new_points,
    sum: entries.reduce((s, e) => s + (e.new_points - e.old_points), 0),
    chained,
    entries,
  };
}

describe(`concurrent balance changes (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, () => {
  it('150 parallel subtractions of 10 from 1,000: exactly 100 pass and the balance is 0', async () => {
    await t.customer(shop.shopId, 'race-1', 1000);
    const responses = await Promise.all(
      Array.from({ length: 150 }, () =>
        t.post('/rest-api/v1/points/substract', { customerIdentifier: 'race-1', amount: 10 }, shop.apiKey),
      ),
    );
    const statuses = responses.map((r) => r.status);
    expect(statuses.filter((s) => s === 200)).toHaveLength(100);
    expect(statuses.filter((s) => s === 422)).toHaveLength(50);
    const ledger = await ledgerOf('race-1');
    expect(ledger.balance).toBe(0);
    expect(ledger.last).toBe(0);
    expect(ledger.sum).toBe(0); // opening +1000, then 100 × −10
    expect(ledger.chained).toBe(true);
    expect(ledger.entries.filter((e) => e.type === 'subtract_points')).toHaveLength(100);
  });

  it('mixed adds, subtractions and sets over REST and GraphQL keep the ledger chained', async () => {
    await t.customer(shop.shopId, 'race-2', 500);
    const calls = Array.from({ length: 90 }, (_, i) => {
      const op = i % 3;
      if (i % 2 === 0) {
        const path = ['add', 'substract', 'update'][op]!;
        return t.post(`/rest-api/v1/points/${path}`, { customerIdentifier: 'race-2', amount: op === 2 ? 300 : 7 }, shop.apiKey);
      }
      const field = ['pointsAdd', 'pointsSubtract', 'pointsSet'][op]!;
      return t.graphql(shop.apiKey, `mutation($input: PointsChangeInput!) { ${field}(input: $input) { userErrors { code } } }`, {
        input: { customerIdentifier: 'race-2', amount: op === 2 ? 300 : 7 },
      });
    });
    await Promise.all(calls);
    const ledger = await ledgerOf('race-2');
    expect(ledger.entries.length).toBeGreaterThan(80);
    expect(ledger.chained).toBe(true);
    expect(ledger.balance).toBe(ledger.last);
    // The ledger starts at 0 (the opening set), so the balance is the sum of every delta.
    expect(ledger.entries[0]!.old_points).toBe(0);
    expect(ledger.balance).toBe(ledger.sum);
  });

  it('200 parallel changes over 40 customers, by id and by e-mail, REST and GraphQL: every ledger exact', async () => {
    // Changes for different customers share statements (group commit); each must still be its own.
    const ids = Array.from({ length: 40 }, (_, i) => `many-${i}`);
    for (const id of ids) await t.customer(shop.shopId, id, 100);
    const mutation = (field: string, customerIdentifier: string, amount: number) =>
      t.post('/graphql', { query: `mutation($input: PointsChangeInput!) { ${field}(input: $input) { userErrors { code } } }`, variables: { input: { customerIdentifier, amount } } }, shop.apiKey);
    const calls = ids.flatMap((id) => [
      t.post('/rest-api/v1/points/add', { customerIdentifier: id, amount: 5 }, shop.apiKey),
      t.post('/rest-api/v1/points/substract', { customerIdentifier: `${id.toUpperCase()}@EXAMPLE.COM`, amount: 30 }, shop.apiKey),
      t.post('/rest-api/v1/points/substract', { customerIdentifier: id, amount: 30 }, shop.apiKey),
      mutation('pointsAdd', `${id}@example.com`, 7),
      mutation('pointsSubtract', id, 30),
    ]);
    const responses = await Promise.all(calls);
    expect(responses.map((r) => r.status)).toEqual(calls.map(() => 200));
    for (const res of responses) expect(JSON.stringify(await res.json())).not.toMatch(/"code"|"error"/);
    for (const id of ids) {
      const ledger = await ledgerOf(id);
      expect(ledger.chained).toBe(true);
      expect(ledger.balance).toBe(ledger.last);
      expect(ledger.balance).toBe(ledger.sum);
      // 100 + 5 + 7 − 3 × 30 = 22: every change applies, in whatever order, as none can overdraw.
      expect(ledger.balance).toBe(22);
      expect(ledger.entries).toHaveLength(6);
    }
  });

  it('writes one outbox event per ledger entry', async () => {
    const { db } = t.app.database;
    const events = await db.selectFrom('outbox_events').select((eb) => eb.fn.countAll<number>().as('n')).where('shop_id', '=', shop.shopId).where('type', 'like', 'points/%').executeTakeFirstOrThrow();
    const entries = await db.selectFrom('activities').select((eb) => eb.fn.countAll<number>().as('n')).where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow();
    expect(Number(events.n)).toBe(Number(entries.n));
  });
});

describe('concurrent upserts of one new customer', () => {
  it('20 at once: every one answers without an error, one creates it, one customers/created event', async () => {
    const upsert = 'mutation($input: CustomerInput!) { customerUpsert(input: $input) { created customer { _id } userErrors { code } } }';
    const answers = await Promise.all(
      Array.from({ length: 20 }, () => t.graphql(shop.apiKey, upsert, { input: { shopifyCustomerId: 'racing-new', email: 'racing-new@example.com' } })),
    );
    const payloads = answers.map((a) => a.data.customerUpsert);
    expect(payloads.filter((p) => p.userErrors.length)).toEqual([]);
    expect(payloads.filter((p) => p.created)).toHaveLength(1);
    expect(new Set(payloads.map((p) => p.customer._id)).size).toBe(1);
    const { db } = t.app.database;
    const created = await db.selectFrom('outbox_events').select('data').where('shop_id', '=', shop.shopId).where('type', '=', 'customers/created').execute();
    expect(created.filter((e) => (e.data as { shopifyCustomerId: string }).shopifyCustomerId === 'racing-new')).toHaveLength(1);
  });
});

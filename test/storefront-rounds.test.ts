import type { KyselyPlugin } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.js';

/**
 * Issue 38, item 5: the storefront's first view (balance, tier, progress and rewards) is one round
 * of batched queries after the token's: every statement of that round is sent before the first
 * one's answer comes back. A Kysely plugin sees each statement when it is sent and when it
 * answers; WORKER=off, so nothing in the background speaks meanwhile.
 */

type Event = { kind: 'sent' | 'answered'; id: object };
let events: Event[] | null = null;
const watcher: KyselyPlugin = {
  transformQuery: ({ node, queryId }) => {
    events?.push({ kind: 'sent', id: queryId });
    return node;
  },
  transformResult: async ({ result, queryId }) => {
    events?.push({ kind: 'answered', id: queryId });
    return result;
  },
};

let t: TestApp;
let token: string;

beforeAll(async () => {
  t = await startTestApp({ WORKER: 'off', STOREFRONT_RATE_PER_CUSTOMER: '1000', STOREFRONT_RATE_PER_IP: '100000' }, { databasePlugins: [watcher] });
  const { apiKey, shopId } = await t.shop('Rounds shop');
  for (const [name, threshold] of [['Silver', '500'], ['Gold', '2000']]) {
    const res = await t.graphql(apiKey, 'mutation($input: TierCreateInput!) { tierCreate(input: $input) { userErrors { code } } }', { input: { name, threshold, multiplier: '1.5' } });
    expect(res.data.tierCreate.userErrors).toEqual([]);
  }
  for (let i = 1; i <= 3; i++) {
    await t.graphql(apiKey, 'mutation($input: PointsRedemptionInput!) { pointsRedemptionCreate(input: $input) { userErrors { code } } }', {
      input: { name: `$${i} off`, type: 'amount', discountPrefix: `R${i}-`, rewardValue: 300 * i, discountValue: i },
    });
  }
  await t.customer(shopId, 'ada');
  // Points added are earned: they count toward the tier (a balance set is not).
  expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 'ada', amount: 700 }, apiKey)).status).toBe(200);
  const res = await t.graphql(apiKey, 'mutation($input: CustomerAccessTokenCreateInput!) { customerAccessTokenCreate(input: $input) { accessToken } }', { input: { customerIdentifier: 'ada' } });
  token = res.data.customerAccessTokenCreate.accessToken;
});
afterAll(() => t?.stop());

/** The statements one storefront query sends, and its answer's data. */
async function watch(query: string): Promise<{ events: Event[]; data: any }> {
  events = [];
  const res = await fetch(`${t.url}/storefront/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ query }) });
  const body = (await res.json()) as any;
  const seen = events;
  events = null;
  expect(body.errors).toBeUndefined();
  return { events: seen, data: body.data };
}

/** The statements in rounds: a round is what is sent before the first of its answers comes back. */
function rounds(seen: Event[]): number[] {
  const sizes: number[] = [];
  let open = 0;
  let answered = true;
  for (const e of seen) {
    if (e.kind === 'sent') {
      if (answered) sizes.push(0);
      answered = false;
      sizes[sizes.length - 1]! += 1;
      open += 1;
    } else {
      answered = true;
      open -= 1;
    }
  }
  expect(open).toBe(0);
  return sizes;
}

it("the first view (balance, tier, progress, rewards) is the token's read, then one round", async () => {
  const { events: seen, data } = await watch('{ me { points pendingPoints tier { tier { name } } tierProgress { current next { name } remaining } } rewards(first: 10) { edges { node { name redeemable } } } }');
  expect(data.me).toEqual({ points: 700, pendingPoints: 0, tier: { tier: { name: 'Silver' } }, tierProgress: { current: '700', next: { name: 'Gold' }, remaining: '1300' } });
  expect(data.rewards.edges.map((e: any) => e.node)).toEqual([
    { name: '$1 off', redeemable: true },
    { name: '$2 off', redeemable: true },
    { name: '$3 off', redeemable: false },
  ]);
  // The token with its customer's record (for `me` and for the balance the rewards are judged by),
  // then two statements at once: the standing with the ladder, and the rewards.
  const sizes = rounds(seen);
  expect(sizes, JSON.stringify(sizes)).toEqual([1, 2]);
});

it('a view without the tier reads none of it', async () => {
  const { events: seen, data } = await watch('{ me { points } }');
  expect(data.me).toEqual({ points: 700 });
  // The token's read has the customer's record: nothing more to ask.
  expect(rounds(seen)).toEqual([1]);
});

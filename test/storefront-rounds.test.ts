import type { KyselyPlugin } from 'kysely';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.js';

/**
 * Issue 38, item 5: the storefront's first view (balance, tier, progress and rewards) is one
 * statement once the token is cached (CUSTOMER_TOKEN_CACHE_TTL_MS) and the shop's rewards were read
 * at the rewards_version that statement reads. A round is what is sent before the first answer comes back. A Kysely plugin sees each statement when
 * it is sent and when it answers; WORKER=off, so nothing in the background speaks meanwhile.
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
let apiKey: string;
let token: string;

beforeAll(async () => {
  t = await startTestApp({ WORKER: 'off', STOREFRONT_RATE_PER_CUSTOMER: '1000', STOREFRONT_RATE_PER_IP: '100000' }, { databasePlugins: [watcher] });
  const shop = await t.shop('Rounds shop');
  apiKey = shop.apiKey;
  const { shopId } = shop;
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

const FIRST_VIEW = '{ me { points pendingPoints tier { tier { name } } tierProgress { current next { name } remaining } } rewards(first: 10) { edges { node { name redeemable } } } }';

it("the first view (balance, tier, progress, rewards) is one statement, the token's read first when it is not cached, and the rewards' after it when they are not kept", async () => {
  // A token not seen for CUSTOMER_TOKEN_CACHE_TTL_MS is read first, in a round of its own; the
  // rewards, not kept yet, once the customer's statement has said their version.
  expect(rounds((await watch(FIRST_VIEW)).events)).toEqual([1, 1, 1]);
  const { events: seen, data } = await watch(FIRST_VIEW);
  expect(data.me).toEqual({ points: 700, pendingPoints: 0, tier: { tier: { name: 'Silver' } }, tierProgress: { current: '700', next: { name: 'Gold' }, remaining: '1300' } });
  expect(data.rewards.edges.map((e: any) => e.node)).toEqual([
    { name: '$1 off', redeemable: true },
    { name: '$2 off', redeemable: true },
    { name: '$3 off', redeemable: false },
  ]);
  // The token cached and the rewards kept: one statement, the customer's record with their
  // standing, the ladder and the rewards' version (for `me`, and the balance the rewards are judged by).
  const sizes = rounds(seen);
  expect(sizes, JSON.stringify(sizes)).toEqual([1]);
});

it("keeps the shop's rewards while they are unchanged: a change by this instance or by any other shows in the very next view", async () => {
  const names = (data: any) => data.rewards.edges.map((e: any) => e.node.name);
  await watch(FIRST_VIEW);
  expect(rounds((await watch(FIRST_VIEW)).events)).toEqual([1]);
  // Another instance's change (its statement here): the version read with the customer tells.
  const db = t.app.database.db;
  await db.updateTable('points_redemptions').set({ name: '$3 off today' }).where('name', '=', '$3 off').execute();
  const changed = await watch(FIRST_VIEW);
  expect(rounds(changed.events)).toEqual([1, 1]);
  expect(names(changed.data)).toEqual(['$1 off', '$2 off', '$3 off today']);
  expect(rounds((await watch(FIRST_VIEW)).events)).toEqual([1]);
  // Through the API: a reward created shows at once, and one deleted is gone at once.
  const created = await t.graphql(apiKey, 'mutation($input: PointsRedemptionInput!) { pointsRedemptionCreate(input: $input) { pointsRedemption { _id } userErrors { code } } }', {
    input: { name: '$4 off', type: 'amount', discountPrefix: 'R4-', rewardValue: 1200, discountValue: 4 },
  });
  expect(names((await watch(FIRST_VIEW)).data)).toEqual(['$1 off', '$2 off', '$3 off today', '$4 off']);
  const deleted = await t.graphql(apiKey, 'mutation($input: PointsRedemptionDeleteInput!) { pointsRedemptionDelete(input: $input) { userErrors { code } } }', {
    input: { id: created.data.pointsRedemptionCreate.pointsRedemption._id },
  });
  expect(deleted.data.pointsRedemptionDelete.userErrors).toEqual([]);
  expect(names((await watch(FIRST_VIEW)).data)).toEqual(['$1 off', '$2 off', '$3 off today']);
  await db.updateTable('points_redemptions').set({ name: '$3 off' }).where('name', '=', '$3 off today').execute();
  expect(names((await watch(FIRST_VIEW)).data)).toEqual(['$1 off', '$2 off', '$3 off']);
});

it('asked with the rewards first, it is still one round: the record with the rewards\' balance, the standing beside it', async () => {
  const query = '{ rewards(first: 10) { edges { node { redeemable } } } me { points tier { tier { name } } } }';
  await watch(query);
  const { events: seen, data } = await watch(query);
  expect(data.me).toEqual({ points: 700, tier: { tier: { name: 'Silver' } } });
  expect(rounds(seen)).toEqual([3]);
});

it('a view without the tier reads none of it', async () => {
  await watch('{ me { points } }');
  const { events: seen, data } = await watch('{ me { points } }');
  expect(data.me).toEqual({ points: 700 });
  // The token cached: the customer's record alone.
  expect(rounds(seen)).toEqual([1]);
});

it("reads the customer's record afresh, the token cached: a change of balance shows in the very next view", async () => {
  expect((await watch(FIRST_VIEW)).data.me.points).toBe(700);
  expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 'ada', amount: 1400 }, apiKey)).status).toBe(200);
  const { events: seen, data } = await watch(FIRST_VIEW);
  expect(rounds(seen)).toEqual([1]);
  expect(data.me).toMatchObject({ points: 2100, tier: { tier: { name: 'Gold' } }, tierProgress: { current: '2100', next: null } });
  expect(data.rewards.edges.map((e: any) => e.node.redeemable)).toEqual([true, true, true]);
  expect((await watch('{ me { points } }')).data.me.points).toBe(2100);
});

import { readFileSync } from 'node:fs';
import { sql } from 'kysely';
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { printSchemaSDL } from '../src/graphql/schema.js';
import { createStorefrontLimiter } from '../src/rate-limit/storefront.js';
import { createLogger } from '../src/logger.js';
import { freePort, onPostgres, startRedis, startTestApp, type TestApp } from './helpers.js';
import { collect, sse, until, wsClient } from './live-helpers.js';

let t: TestApp;
let shop: { shopId: string; apiKey: string };
let other: { shopId: string; apiKey: string };
let rewardId: string;
const ORIGIN = 'http://shop.example.test:8080';

async function token(customerIdentifier: string, apiKey = shop.apiKey, expiresInSeconds?: number): Promise<string> {
  const res = await t.graphql(apiKey, 'mutation($input: CustomerAccessTokenCreateInput!) { customerAccessTokenCreate(input: $input) { accessToken userErrors { code } } }', {
    input: { customerIdentifier, ...(expiresInSeconds ? { expiresInSeconds } : {}) },
  });
  return res.data.customerAccessTokenCreate.accessToken;
}

async function sf(bearer: string | null, query: string, variables?: Record<string, unknown>, headers: Record<string, string> = {}) {
  const res = await fetch(`${t.url}/storefront/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(bearer ? { authorization: `Bearer ${bearer}` } : {}), ...headers },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
}

const ME = '{ me { _id shopifyCustomerId email points pendingPoints tier { tier { name } } tierProgress { current next { name } remaining } nextExpiry { points } referralCode activities(first: 5) { edges { cursor node { _id customer newPoints } } } orders(first: 5) { edges { node { orderId customer } } } discountCodes(first: 5) { edges { node { code customer } } } } }';
const REDEEM = 'mutation($input: RedeemInput!) { redeem(input: $input) { discountCode { code pointsAmount customer } customer { points } userErrors { code field message } } }';

beforeAll(async () => {
  t = await startTestApp({ STOREFRONT_RATE_PER_CUSTOMER: '1000', STOREFRONT_RATE_PER_IP: '100000' });
  shop = await t.shop('Storefront shop');
  other = await t.shop('Other shop');
  await t.customer(shop.shopId, 'ada', 1000);
  await t.customer(shop.shopId, 'bob', 300);
  await t.customer(other.shopId, 'ada', 50);
  const settings = await t.graphql(shop.apiKey, 'mutation($o: [String!]) { shopSettingsUpdate(input: { storefrontOrigins: $o }) { settings { storefrontOrigins } userErrors { code } } }', { o: [ORIGIN] });
  expect(settings.data.shopSettingsUpdate.settings.storefrontOrigins).toEqual([ORIGIN]);
  const reward = await t.graphql(shop.apiKey, 'mutation($input: PointsRedemptionInput!) { pointsRedemptionCreate(input: $input) { pointsRedemption { _id } } }', {
    input: { name: '$5 off', type: 'amount', discountPrefix: 'FIVE-', rewardValue: 500, discountValue: 5 },
  });
  rewardId = reward.data.pointsRedemptionCreate.pointsRedemption._id;
  await t.graphql(shop.apiKey, 'mutation($input: EarningRuleCreateInput!) { earningRuleCreate(input: $input) { userErrors { code } } }', { input: { type: 'sign_up', name: 'Join', earnPoint: 50 } });
  await t.graphql(shop.apiKey, 'mutation($input: EarningRuleCreateInput!) { earningRuleCreate(input: $input) { userErrors { code } } }', { input: { type: 'birthday', name: 'Birthday', earnPoint: 10, active: false } });
});
afterAll(() => t?.stop());

describe('schema.storefront.graphql', () => {
  it('is what the code builds (npm run schema:print) and holds nothing of other customers or the shop', () => {
    const sdl = readFileSync(new URL('../schema.storefront.graphql', import.meta.url), 'utf8');
    expect(sdl).toBe(printSchemaSDL('storefront'));
    for (const absent of ['referees', 'customers(', 'customer(', 'pointsAdd', 'apiKeys', 'webhookSubscriptions', 'shopSettingsUpdate', 'events(', 'note:', 'customerIdentifier']) {
      expect(sdl, absent).not.toContain(absent);
    }
  });
});

describe('the storefront face', () => {
  it('answers the token\'s customer: balance, tier, progress, activities, rewards with redeemable, earning rules with eligibility', async () => {
    const ada = await token('ada');
    const me = await sf(ada, ME);
    expect(me.status).toBe(200);
    expect(me.body.data.me).toMatchObject({ shopifyCustomerId: 'ada', points: 1000, pendingPoints: 0, tier: null, referralCode: null });
    expect(me.body.data.me.activities.edges.every((e: any) => e.node.customer === me.body.data.me._id)).toBe(true);

    const rewards = await sf(ada, '{ rewards(first: 10) { edges { node { _id name redeemable rewardValue } } } }');
    expect(rewards.body.data.rewards.edges).toEqual([{ node: { _id: rewardId, name: '$5 off', redeemable: true, rewardValue: 500 } }]);
    const bob = await sf(await token('bob'), '{ rewards(first: 10) { edges { node { redeemable } } } }');
    expect(bob.body.data.rewards.edges[0].node.redeemable).toBe(false);

    const ways = await sf(ada, '{ waysToEarn { isEarned rule { type earnPoint active } } }');
    // The inactive birthday rule is not shown.
    expect(ways.body.data.waysToEarn).toEqual([{ isEarned: false, rule: { type: 'sign_up', earnPoint: 50, active: true } }]);
  });

  it('redeems and creates the referral code for the token\'s customer, with the admin error codes', async () => {
    await t.customer(shop.shopId, 'cyd', 700);
    const cyd = await token('cyd');
    const first = await sf(cyd, REDEEM, { input: { rewardId, pointsAmount: 500 } });
    expect(first.body.data.redeem.userErrors).toEqual([]);
    expect(first.body.data.redeem.customer.points).toBe(200);
    const poor = await sf(cyd, REDEEM, { input: { rewardId, pointsAmount: 500 } });
    expect(poor.body.data.redeem.userErrors[0].code).toBe('insufficient_points');
    const bad = await sf(cyd, REDEEM, { input: { rewardId: 'nope', pointsAmount: 500 } });
    expect(bad.body.data.redeem.userErrors[0].code).toBe('validation_error');

    const code = await sf(cyd, 'mutation { referralCode { referralCode userErrors { code } } }');
    expect(code.body.data.referralCode.referralCode).toMatch(/\S+/);
    const again = await sf(cyd, 'mutation { referralCode { referralCode } }');
    expect(again.body.data.referralCode.referralCode).toBe(code.body.data.referralCode.referralCode);
    const me = await sf(cyd, '{ me { points referralCode discountCodes(first: 5) { edges { node { pointsAmount } } } } }');
    expect(me.body.data.me).toEqual({ points: 200, referralCode: code.body.data.referralCode.referralCode, discountCodes: { edges: [{ node: { pointsAmount: 500 } }] } });
  });

  it('refuses what is not a live token of this face: 401 in GraphQL\'s shape', async () => {
    const ada = await token('ada');
    const refused = async (bearer: string | null) => {
      const res = await sf(bearer, '{ me { points } }');
      expect(res.status, String(bearer)).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer');
      expect(res.body.errors[0].extensions.code).toBe('unauthorized');
      return res.body.errors[0].message as string;
    };
    await refused(null);
    expect(await refused(shop.apiKey)).toContain('API key is for /graphql');
    await refused(`${ada.slice(0, -1)}${ada.endsWith('a') ? 'b' : 'a'}`); // forged
    await refused('ct_zzzzzzzzzz_' + 'x'.repeat(40));

    // A token on the admin face is no API key.
    const admin = await t.graphql(ada, '{ shop { id } }');
    expect(admin.errors[0].extensions.code).toBe('unauthorized');

    // Revoked (used just before, so trusted from the cache until then), expired, and a customer deleted while holding one.
    const revoked = await token('bob');
    expect((await sf(revoked, '{ me { points } }')).status).toBe(200);
    await t.graphql(shop.apiKey, 'mutation { customerAccessTokensRevoke(input: { customerIdentifier: "bob" }) { revokedCount } }');
    await refused(revoked);
    // No API deletes customers yet; a deleted one (a GDPR erasure by hand) takes its tokens along.
    await t.customer(shop.shopId, 'dee');
    const doomed = await token('dee');
    await sql`delete from activities where customer_id = (select id from customers where shop_id = ${shop.shopId} and shopify_customer_id = 'dee')`.execute(t.app.database.db);
    await t.app.database.db.deleteFrom('customers').where('shop_id', '=', shop.shopId).where('shopify_customer_id', '=', 'dee').execute();
    await refused(doomed);
    const shortLived = await token('ada', shop.apiKey, 60);
    await t.app.database.db.updateTable('customer_access_tokens').set({ expires_at: new Date(Date.now() - 1000) }).where('prefix', '=', shortLived.split('_')[1]!).execute();
    await refused(shortLived);
  });

  it('CORS: preflights and requests from the shop\'s origins only', async () => {
    const ada = await token('ada');
    const preflight = (origin: string) =>
      fetch(`${t.url}/storefront/graphql`, {
        method: 'OPTIONS',
        headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
      });
    const ok = await preflight(ORIGIN);
    expect(ok.status).toBe(204);
    expect(ok.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    expect(ok.headers.get('access-control-allow-headers')).toContain('authorization');
    const evil = await preflight('https://evil.example');
    expect(evil.status).toBe(403);
    expect(evil.headers.get('access-control-allow-origin')).toBeNull();

    const allowed = await sf(ada, '{ me { points } }', undefined, { origin: ORIGIN });
    expect(allowed.status).toBe(200);
    expect(allowed.headers.get('access-control-allow-origin')).toBe(ORIGIN);
    const refused = await sf(ada, '{ me { points } }', undefined, { origin: 'https://evil.example' });
    expect(refused.status).toBe(403);
    expect(refused.body.errors[0].extensions.code).toBe('origin_not_allowed');
    expect(refused.headers.get('access-control-allow-origin')).toBeNull();
    // The other shop allows no origin: its tokens work from servers, not from this shop's pages.
    const foreign = await sf(await token('ada', other.apiKey), '{ me { points } }', undefined, { origin: ORIGIN });
    expect(foreign.status).toBe(403);

    // WebSockets are not guarded by CORS: the upgrade's Origin is checked against the token's shop.
    const socketFrom = async (origin: string) => {
      let closed: number | undefined;
      class FromOrigin extends WebSocket {
        constructor(url: string, protocols?: string | string[]) {
          super(url, protocols, { origin });
        }
      }
      const client = createClient({
        url: `${t.url.replace(/^http/, 'ws')}/storefront/graphql`,
        webSocketImpl: FromOrigin,
        connectionParams: { Authorization: `Bearer ${ada}` },
        retryAttempts: 0,
        on: { closed: (event) => void (closed = (event as { code: number }).code) },
      });
      const result = collect(client, '{ me { shopifyCustomerId } }');
      await until(() => result.completed, 10_000, 'the socket query');
      await client.dispose();
      return { closed, results: result.results };
    };
    expect((await socketFrom(ORIGIN)).results).toEqual([{ data: { me: { shopifyCustomerId: 'ada' } } }]);
    const evilSocket = await socketFrom('https://evil.example');
    expect(evilSocket.results).toEqual([]);
    expect(evilSocket.closed).toBe(4403);

    // The admin face gives browsers nothing: no preflight pass, no reflected origin.
    const adminPreflight = await fetch(`${t.url}/graphql`, { method: 'OPTIONS', headers: { origin: ORIGIN, 'access-control-request-method': 'POST' } });
    expect(adminPreflight.headers.get('access-control-allow-origin')).toBeNull();
    const adminCall = await t.post('/graphql', { query: '{ shop { id } }' }, shop.apiKey, { origin: ORIGIN });
    expect(adminCall.headers.get('access-control-allow-origin')).toBeNull();
  });

  it('refuses a malformed storefrontOrigins list whole', async () => {
    for (const bad of [['https://shop.example/path'], ['shop.example'], ['ftp://shop.example'], ['https://shop.example/'], Array.from({ length: 21 }, (_, i) => `https://s${i}.example`)]) {
      const res = await t.graphql(shop.apiKey, 'mutation($o: [String!]) { shopSettingsUpdate(input: { storefrontOrigins: $o }) { settings { storefrontOrigins } userErrors { code } } }', { o: bad });
      expect(res.data.shopSettingsUpdate.userErrors[0].code, JSON.stringify(bad)).toBe('validation_error');
    }
    const kept = await t.graphql(shop.apiKey, '{ shop { settings { storefrontOrigins } } }');
    expect(kept.data.shop.settings.storefrontOrigins).toEqual([ORIGIN]);
  });
});

describe('isolation: a token of customer X reaches nothing of Y or of another shop', () => {
  it('through fields, arguments, cursors and idempotency keys', async () => {
    await t.customer(shop.shopId, 'xav', 900);
    await t.customer(shop.shopId, 'yan', 900);
    const x = await token('xav');
    const y = await token('yan');
    await sf(y, REDEEM, { input: { rewardId, pointsAmount: 500 } });
    const yMe = (await sf(y, ME)).body.data.me;
    const xMe = (await sf(x, ME)).body.data.me;
    expect(xMe._id).not.toBe(yMe._id);
    expect(JSON.stringify(xMe)).not.toContain(yMe._id);
    expect(xMe.discountCodes.edges).toEqual([]);

    // Y's activity cursor given to X's list pages X's ledger only.
    const yCursor = yMe.activities.edges[0].cursor;
    const paged = await sf(x, 'query($after: String) { me { activities(first: 50, after: $after) { edges { node { customer } } } } }', { after: yCursor });
    for (const edge of paged.body.data?.me.activities.edges ?? []) expect(edge.node.customer).toBe(xMe._id);

    // No argument names a customer: asking for one is a validation error, not a lookup.
    const named = await sf(x, '{ me(identifier: "yan") { points } }');
    expect(named.body.data).toBeUndefined();
    expect(named.body.errors[0].message).toContain('Unknown argument "identifier"');
    const input = await sf(x, REDEEM, { input: { rewardId, pointsAmount: 500, customerIdentifier: 'yan' } });
    expect(input.body.errors[0].message).toContain('customerIdentifier');

    // The same Idempotency-Key and body from X and Y are two redemptions, each the caller's own.
    const key = { 'idempotency-key': 'same-key-for-both' };
    await t.customer(shop.shopId, 'zed', 600);
    const z = await token('zed');
    const byX = await sf(x, REDEEM, { input: { rewardId, pointsAmount: 500 } }, key);
    const byZ = await sf(z, REDEEM, { input: { rewardId, pointsAmount: 500 } }, key);
    expect(byX.body.data.redeem.discountCode.customer).toBe(xMe._id);
    expect(byZ.headers.get('idempotent-replayed')).toBeNull();
    expect(byZ.body.data.redeem.discountCode.customer).not.toBe(xMe._id);
    expect(byZ.body.data.redeem.customer.points).toBe(100);
    const replay = await sf(x, REDEEM, { input: { rewardId, pointsAmount: 500 } }, key);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(byX.body);

    // Another shop's customer with the same shop customer id is another customer.
    const otherAda = (await sf(await token('ada', other.apiKey), '{ me { points rewards: __typename } rewards(first: 5) { edges { node { _id } } } }')).body.data;
    expect(otherAda.me.points).toBe(50);
    expect(otherAda.rewards.edges).toEqual([]);
  });

  it('through subscriptions: X hears its own changes only, over graphql-ws and SSE, until its token is revoked', async () => {
    await t.customer(shop.shopId, 'sub-x', 100);
    await t.customer(shop.shopId, 'sub-y', 100);
    // Their creation's own events are relayed first, so the streams opened next hear only what follows.
    await until(async () => (await t.app.database.db.selectFrom('outbox_events').select('id').where('relayed_at', 'is', null).execute()).length === 0, 10_000, 'the set-up\'s events relayed');
    const x = await token('sub-x');
    const client = wsClient(t.url, x, { path: '/storefront/graphql' });
    const ws = collect(client, 'subscription { meChanged { shopifyCustomerId points } }');
    const stream = await sse(t.url, x, 'subscription { meChanged { shopifyCustomerId points } }', undefined, {}, '/storefront/graphql');
    expect(stream.status).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
    await t.post('/rest-api/v1/points/add', { customerIdentifier: 'sub-y', amount: 5 }, shop.apiKey);
    await t.post('/rest-api/v1/points/add', { customerIdentifier: 'sub-x', amount: 7 }, shop.apiKey);
    await until(() => ws.results.length >= 1 && stream.events.some((e) => e.event === 'next'), 10_000, 'X\'s change');
    expect(ws.results.map((r) => r.data?.meChanged)).toEqual([{ shopifyCustomerId: 'sub-x', points: 107 }]);
    expect(stream.events.filter((e) => e.event === 'next').map((e) => e.data.data.meChanged)).toEqual([{ shopifyCustomerId: 'sub-x', points: 107 }]);

    // Revoked: the next change of X ends both streams instead of reaching them.
    await t.graphql(shop.apiKey, 'mutation { customerAccessTokensRevoke(input: { customerIdentifier: "sub-x" }) { revokedCount } }');
    await t.post('/rest-api/v1/points/add', { customerIdentifier: 'sub-x', amount: 1 }, shop.apiKey);
    await until(() => ws.completed, 10_000, 'the ws stream to end');
    await stream.ended;
    expect(ws.results).toHaveLength(1);
    expect(stream.events.filter((e) => e.event === 'next')).toHaveLength(1);
    // And the socket takes no new operation with it.
    const after = collect(client, '{ me { points } }');
    await until(() => after.completed, 10_000, 'refusal');
    expect(after.results).toEqual([]);
    await client.dispose();
  });
});

describe('storefront limits', () => {
  it('per customer and per client IP: 429 with Retry-After, another customer unaffected', async () => {
    const limited = await startTestApp({ STOREFRONT_RATE_PER_CUSTOMER: '3', STOREFRONT_RATE_PER_IP: '1000' });
    try {
      const s = await limited.shop();
      await limited.customer(s.shopId, 'a', 1);
      await limited.customer(s.shopId, 'b', 1);
      const mint = async (c: string) =>
        (await limited.graphql(s.apiKey, `mutation { customerAccessTokenCreate(input: { customerIdentifier: "${c}" }) { accessToken } }`)).data.customerAccessTokenCreate.accessToken;
      const [a, b] = [await mint('a'), await mint('b')];
      const call = (bearer: string) =>
        fetch(`${limited.url}/storefront/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${bearer}` }, body: JSON.stringify({ query: '{ me { points } }' }) });
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await call(a)).status);
      expect(statuses).toEqual([200, 200, 200, 429]);
      const refused = await call(a);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(((await refused.json()) as any).errors[0].extensions.code).toBe('rate_limited');
      expect((await call(b)).status).toBe(200);
    } finally {
      await limited.stop();
    }
    const byIp = await startTestApp({ STOREFRONT_RATE_PER_IP: '5' });
    try {
      const statuses = [];
      // Unauthenticated guesses count too: the sixth is refused before any token is looked at.
      for (let i = 0; i < 6; i++) statuses.push((await fetch(`${byIp.url}/storefront/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: 'Bearer ct_guessguess_' + 'x'.repeat(40) }, body: '{"query":"{ me { points } }"}' })).status);
      expect(statuses).toEqual([401, 401, 401, 401, 401, 429]);
    } finally {
      await byIp.stop();
    }
  });

  it('live subscriptions: the storefront counts per customer and apart from the shop\'s own', async () => {
    const app = await startTestApp({ SUBSCRIPTIONS_PER_SHOP: '1', STOREFRONT_SUBSCRIPTIONS_PER_CUSTOMER: '2' });
    const streams: Array<{ close(): void }> = [];
    try {
      const s = await app.shop();
      await app.customer(s.shopId, 'a');
      await app.customer(s.shopId, 'b');
      const mint = async (c: string) =>
        (await app.graphql(s.apiKey, `mutation { customerAccessTokenCreate(input: { customerIdentifier: "${c}" }) { accessToken } }`)).data.customerAccessTokenCreate.accessToken;
      const [a, b] = [await mint('a'), await mint('b')];
      const open = async (bearer: string, path: string, query: string) => {
        const stream = await sse(app.url, bearer, query, undefined, {}, path);
        streams.push(stream);
        await new Promise((r) => setTimeout(r, 100));
        return stream;
      };
      const ME = 'subscription { meChanged { points } }';
      const admin = await open(s.apiKey, '/graphql', 'subscription { events(topics: ["points/*"]) { id } }');
      const [a1, a2, a3] = [await open(a, '/storefront/graphql', ME), await open(a, '/storefront/graphql', ME), await open(a, '/storefront/graphql', ME)];
      const b1 = await open(b, '/storefront/graphql', ME);
      // The shop's own slot (1) is its dashboard's; the customers' are their own, two each.
      for (const stream of [admin, a1, a2, b1]) expect(stream.events.filter((e) => e.event === 'next' && e.data.errors)).toEqual([]);
      expect(a3.events.map((e) => e.data?.errors?.[0]?.extensions?.code)).toContain('subscription_limit_reached');
    } finally {
      for (const stream of streams) stream.close();
      await app.stop();
    }
  });

  it('with Redis down, the insurance limiter in memory still limits', async () => {
    const limiter = await createStorefrontLimiter({ limits: { perCustomerPerMinute: 2, perIpPerMinute: 100 }, redisUrl: 'redis://127.0.0.1:1', keyPrefix: 'test:', logger: createLogger('silent') });
    try {
      const decisions = [];
      for (let i = 0; i < 3; i++) decisions.push((await limiter.consumeCustomer('c1')).allowed);
      expect(decisions).toEqual([true, true, false]);
    } finally {
      await limiter.close();
    }
  });

  it.runIf(Boolean(process.env.TEST_REDIS_URL))('when Redis dies mid-window, the insurance limiter takes over at once', async () => {
    const port = await freePort();
    const redis = await startRedis(port);
    const limiter = await createStorefrontLimiter({ limits: { perCustomerPerMinute: 3, perIpPerMinute: 100 }, redisUrl: `redis://127.0.0.1:${port}`, keyPrefix: 'test:', logger: createLogger('silent') });
    try {
      expect((await limiter.consumeCustomer('c')).allowed).toBe(true);
      redis.kill('SIGKILL');
      await new Promise((resolve) => redis.once('exit', resolve));
      const during = [];
      for (let i = 0; i < 4; i++) during.push((await limiter.consumeCustomer('c')).allowed);
      // The insurance counts on its own: three more pass, the fourth is refused; nothing throws.
      expect(during).toEqual([true, true, true, false]);
    } finally {
      await limiter.close();
      redis.kill('SIGKILL');
    }
  });

  it.runIf(Boolean(process.env.TEST_REDIS_URL) && onPostgres)('on Redis, two instances share one count per customer', async () => {
    const prefix = `test:${Date.now()}:`;
    const make = () => createStorefrontLimiter({ limits: { perCustomerPerMinute: 4, perIpPerMinute: 100 }, redisUrl: process.env.TEST_REDIS_URL, keyPrefix: prefix, logger: createLogger('silent') });
    const [one, two] = [await make(), await make()];
    try {
      const decisions = [];
      for (let i = 0; i < 6; i++) decisions.push((await (i % 2 ? two : one).consumeCustomer('shared')).allowed);
      expect(decisions).toEqual([true, true, true, true, false, false]);
    } finally {
      await one.close();
      await two.close();
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticateCustomerToken, CUSTOMER_TOKEN_CACHE_TTL_MS } from '../src/domain/customers/customer-access-tokens.js';
import { onPostgres, startTestApp, startTwoInstances, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';

const REDIS_URL = process.env.TEST_REDIS_URL;

let t: TestApp;
let shop: { shopId: string; apiKey: string };
let other: { shopId: string; apiKey: string };

const CREATE = 'mutation($input: CustomerAccessTokenCreateInput!) { customerAccessTokenCreate(input: $input) { accessToken expiresAt customer { _id shopifyCustomerId } userErrors { code field message } } }';
const REVOKE = 'mutation($input: CustomerAccessTokensRevokeInput!) { customerAccessTokensRevoke(input: $input) { revokedCount userErrors { code message } } }';

async function create(input: Record<string, unknown>, apiKey = shop.apiKey) {
  return (await t.graphql(apiKey, CREATE, { input })).data.customerAccessTokenCreate;
}

const db = () => t.app.database.db;

beforeAll(async () => {
  t = await startTestApp();
  shop = await t.shop('Storefront shop');
  other = await t.shop('Other shop');
  await t.customer(shop.shopId, 'ada', 100);
  await t.customer(shop.shopId, 'bob', 100);
  await t.customer(other.shopId, 'ada', 100);
});
afterAll(() => t?.stop());

describe('customer access tokens', () => {
  it('are minted for one customer over GraphQL and REST, live an hour by default, and are stored only as a hash', async () => {
    const before = Date.now();
    const minted = await create({ customerIdentifier: 'ada@example.com' });
    expect(minted.userErrors).toEqual([]);
    expect(minted.accessToken).toMatch(/^ct_[a-z0-9]{10}_[A-Za-z0-9]{40}$/);
    expect(minted.customer.shopifyCustomerId).toBe('ada');
    const expiresAt = Date.parse(minted.expiresAt);
    expect(expiresAt - before).toBeGreaterThanOrEqual(3600_000 - 1000);
    expect(expiresAt - before).toBeLessThanOrEqual(3600_000 + 5000);
    const holder = (await authenticateCustomerToken(db(), minted.accessToken))?.holder;
    expect(holder).toMatchObject({ shopId: shop.shopId, customerId: minted.customer._id });

    const rest = await t.post('/rest-api/v1/customerAccessTokens', { customerIdentifier: 'bob', expiresInSeconds: 86_400 }, shop.apiKey);
    expect(rest.status).toBe(201);
    const body = await rest.json();
    expect((await authenticateCustomerToken(db(), body.accessToken))?.holder).toMatchObject({ shopId: shop.shopId, customerId: body.customer._id });

    // Neither token is in the database, only hashes that are not the token.
    const stored = await db().selectFrom('customer_access_tokens').select(['prefix', 'token_hash']).where('shop_id', '=', shop.shopId).execute();
    const all = JSON.stringify(stored);
    for (const token of [minted.accessToken, body.accessToken]) {
      expect(all).not.toContain(token.split('_')[2]);
      expect(stored.some((r) => token.startsWith(`ct_${r.prefix}_`))).toBe(true);
    }
  });

  it.each([
    [{ customerIdentifier: 'ada', expiresInSeconds: 86_401 }, 'validation_error'],
    [{ customerIdentifier: 'ada', expiresInSeconds: 0 }, 'validation_error'],
    [{ customerIdentifier: '' }, 'validation_error'],
    [{ customerIdentifier: 'nobody' }, 'customer_not_found'],
  ])('refuses %j with %s', async (input, code) => {
    expect((await create(input)).userErrors[0].code).toBe(code);
  });

  it('is refused when forged, expired, revoked, of a deleted customer, or not a token at all', async () => {
    const { accessToken } = await create({ customerIdentifier: 'ada', expiresInSeconds: 60 });
    const [, prefix, secret] = accessToken.split('_');
    const forged = `ct_${prefix}_${secret.slice(0, -1)}${secret.endsWith('a') ? 'b' : 'a'}`;
    expect(await authenticateCustomerToken(db(), forged)).toBeNull();
    expect(await authenticateCustomerToken(db(), `ct_zzzzzzzzzz_${secret}`)).toBeNull();
    expect(await authenticateCustomerToken(db(), shop.apiKey)).toBeNull();
    expect(await authenticateCustomerToken(db(), '')).toBeNull();
    // A moved clock: valid up to its last second, not after.
    expect(await authenticateCustomerToken(db(), accessToken, new Date(Date.now() + 59_000))).not.toBeNull();
    expect(await authenticateCustomerToken(db(), accessToken, new Date(Date.now() + 61_000))).toBeNull();

    // A customer deleted (as an operator would, by SQL) takes their tokens along.
    await t.customer(shop.shopId, 'gone', 0);
    const gone = await create({ customerIdentifier: 'gone' });
    await db().deleteFrom('customers').where('id', '=', gone.customer._id).execute();
    expect(await authenticateCustomerToken(db(), gone.accessToken)).toBeNull();
  });

  it('revokes every live token of one customer, at once, and only theirs', async () => {
    const first = await create({ customerIdentifier: 'bob' });
    const second = await create({ customerIdentifier: 'bob', expiresInSeconds: 600 });
    const ada = await create({ customerIdentifier: 'ada' });
    const otherShops = await create({ customerIdentifier: 'ada' }, other.apiKey);
    // Each used first: trusted from this process's cache until the revocation.
    for (const token of [first, second, ada, otherShops]) expect(await authenticateCustomerToken(db(), token.accessToken)).not.toBeNull();
    const revoked = (await t.graphql(shop.apiKey, REVOKE, { input: { customerIdentifier: 'bob' } })).data.customerAccessTokensRevoke;
    // Bob's two, and the REST one of the first test.
    expect(revoked).toEqual({ revokedCount: 3, userErrors: [] });
    expect(await authenticateCustomerToken(db(), first.accessToken)).toBeNull();
    expect(await authenticateCustomerToken(db(), second.accessToken)).toBeNull();
    expect(await authenticateCustomerToken(db(), ada.accessToken)).not.toBeNull();
    // Another shop's customer of the same id is another customer.
    expect((await authenticateCustomerToken(db(), otherShops.accessToken))?.holder).toMatchObject({ shopId: other.shopId });
    const again = (await t.graphql(shop.apiKey, REVOKE, { input: { customerIdentifier: 'bob' } })).data.customerAccessTokensRevoke;
    expect(again.revokedCount).toBe(0);
  });

  it('shows the token only in the create answer, never cached', async () => {
    const res = await t.post('/graphql', { query: CREATE, variables: { input: { customerIdentifier: 'ada' } } }, shop.apiKey);
    expect(res.headers.get('cache-control')).toBe('no-store');
  });
});

describe.skipIf(!onPostgres || !REDIS_URL)('two instances on PostgreSQL + Redis', () => {
  let instances: Awaited<ReturnType<typeof startTwoInstances>>;
  let one: TestApp;
  let two: TestApp;
  beforeAll(async () => {
    instances = await startTwoInstances({ STOREFRONT_RATE_PER_IP: '100000' });
    ({ one, two } = instances);
  });
  afterAll(async () => {
    await instances?.stop();
  });

  const ORIGIN = 'https://shop.example';
  /** The status of a storefront `me` on `app` with the token (and the page's Origin). */
  const me = async (app: TestApp, token: string, origin?: string) =>
    (await fetch(`${app.url}/storefront/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...(origin ? { origin } : {}) },
      body: JSON.stringify({ query: '{ me { points } }' }),
    })).status;

  it('a token ended on one instance is refused at once there and on the other before its cache there would expire: revoked, erased, the origins changed', async () => {
    const s = await one.shop('Ended everywhere');
    expect((await one.graphql(s.apiKey, 'mutation($o: [String!]) { shopSettingsUpdate(input: { storefrontOrigins: $o }) { userErrors { code } } }', { o: [ORIGIN] })).data.shopSettingsUpdate.userErrors).toEqual([]);
    const tokenOf = async (customer: string) => {
      await one.customer(s.shopId, customer, 10);
      return (await one.graphql(s.apiKey, CREATE, { input: { customerIdentifier: customer } })).data.customerAccessTokenCreate.accessToken as string;
    };
    /**
     * Uses the token on both instances (each caches it), ends it on one with `end`, and returns
     * how long after the first use on two (its cache entry is younger) two took to refuse it.
     */
    const endedWithin = async (token: string, end: () => Promise<void>, refused: () => Promise<boolean>) => {
      const usedAt = Date.now();
      expect(await me(two, token, ORIGIN)).toBe(200);
      expect(await me(one, token, ORIGIN)).toBe(200);
      await end();
      await until(refused, CUSTOMER_TOKEN_CACHE_TTL_MS, 'instance two refusing the token');
      return Date.now() - usedAt;
    };

    const revoked = await tokenOf('ada');
    const afterRevocation = await endedWithin(
      revoked,
      async () => {
        expect((await one.graphql(s.apiKey, REVOKE, { input: { customerIdentifier: 'ada' } })).data.customerAccessTokensRevoke.revokedCount).toBe(1);
        expect(await me(one, revoked)).toBe(401);
      },
      async () => (await me(two, revoked)) === 401,
    );

    const erased = await tokenOf('bob');
    const afterErasure = await endedWithin(
      erased,
      async () => {
        const res = await one.graphql(s.apiKey, 'mutation { customerErase(input: { customerIdentifier: "bob" }) { revokedTokens userErrors { code } } }');
        expect(res.data.customerErase).toEqual({ revokedTokens: 1, userErrors: [] });
        expect(await me(one, erased)).toBe(401);
      },
      async () => (await me(two, erased)) === 401,
    );

    // New origins: the old one is refused and the new one let in, as on the instance that changed them.
    const moved = await tokenOf('cy');
    const NEW_ORIGIN = 'https://new.shop.example';
    const afterOrigins = await endedWithin(
      moved,
      async () => {
        await one.graphql(s.apiKey, 'mutation($o: [String!]) { shopSettingsUpdate(input: { storefrontOrigins: $o }) { userErrors { code } } }', { o: [NEW_ORIGIN] });
        expect([await me(one, moved, ORIGIN), await me(one, moved, NEW_ORIGIN)]).toEqual([403, 200]);
      },
      async () => (await me(two, moved, ORIGIN)) === 403 && (await me(two, moved, NEW_ORIGIN)) === 200,
    );

    console.log(`two instances: tokens refused on the other instance ${afterRevocation} (revoked), ${afterErasure} (erased), ${afterOrigins} (origins) ms after their first use there`);
    for (const ms of [afterRevocation, afterErasure, afterOrigins]) expect(ms).toBeLessThan(CUSTOMER_TOKEN_CACHE_TTL_MS);
  });
});

import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { updateShopSettings } from '../src/domain/settings/shop-settings.js';
import { createLogger } from '../src/logger.js';
import { createDeliveryWorker } from '../src/webhooks/delivery-worker.js';
import { createSecretBox } from '../src/webhooks/secret-box.js';
import { UrlPolicy } from '../src/webhooks/url-policy.js';
import { startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';
import { type Receiver, startReceiver } from './webhook-receiver.js';

// Shop settings and API keys over GraphQL, against a real server (relay and delivery worker
// inside) and a real HTTPS webhook receiver.

let t: TestApp;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await startReceiver();
  // With TEST_REDIS_URL, rate limits (and live events) go through Redis, on keys of this file's own.
  const redis = process.env.TEST_REDIS_URL;
  t = await startTestApp({
    WEBHOOK_ALLOWED_HOSTS: 'localhost',
    ...(redis ? { REDIS_URL: redis, REDIS_KEY_PREFIX: `test:${randomBytes(4).toString('hex')}:` } : {}),
  });
});
afterAll(async () => {
  await t?.stop();
  await receiver?.close();
});

const SETTINGS = 'query { shop { id name createdAt settings { referrerPoints refereePoints rateLimitPerMinute webhookRetentionDays } } }';
const UPDATE = `mutation($input: ShopSettingsInput!) {
  shopSettingsUpdate(input: $input) {
    settings { referrerPoints refereePoints rateLimitPerMinute webhookRetentionDays }
    userErrors { code field message }
  }
}`;
const KEYS = 'query { apiKeys { prefix createdAt revokedAt active current } }';
const CREATE_KEY = 'mutation { apiKeyCreate { key apiKey { prefix createdAt revokedAt active current } userErrors { code field message } } }';
const REVOKE_KEY = `mutation($input: ApiKeyRevokeInput!) {
  apiKeyRevoke(input: $input) { apiKey { prefix revokedAt active } userErrors { code field message } }
}`;

const update = (apiKey: string, input: Record<string, unknown>) => t.graphql(apiKey, UPDATE, { input });

describe('shop and settings', () => {
  it('reads the authenticated shop with its settings; overrides are null (the server default) at first', async () => {
    const shop = await t.shop('Settings shop');
    const res = await t.graphql(shop.apiKey, SETTINGS);
    expect(res.errors).toBeUndefined();
    expect(res.data.shop).toEqual({
      id: shop.shopId,
      name: 'Settings shop',
      createdAt: expect.any(String),
      settings: { referrerPoints: 0, refereePoints: 0, rateLimitPerMinute: null, webhookRetentionDays: null },
    });
  });

  it('updates the given fields only, resets an override with null, and shares the writer with shopReferralSettingsUpdate', async () => {
    const shop = await t.shop();
    const all = await update(shop.apiKey, { referrerPoints: 50, refereePoints: 20, rateLimitPerMinute: 1000, webhookRetentionDays: 7 });
    expect(all.data.shopSettingsUpdate).toEqual({
      settings: { referrerPoints: 50, refereePoints: 20, rateLimitPerMinute: 1000, webhookRetentionDays: 7 },
      userErrors: [],
    });
    const partial = await update(shop.apiKey, { refereePoints: 25, webhookRetentionDays: null });
    expect(partial.data.shopSettingsUpdate.settings).toEqual({ referrerPoints: 50, refereePoints: 25, rateLimitPerMinute: 1000, webhookRetentionDays: null });
    const nothing = await update(shop.apiKey, {});
    expect(nothing.data.shopSettingsUpdate.settings).toEqual(partial.data.shopSettingsUpdate.settings);

    const referral = await t.graphql(
      shop.apiKey,
      'mutation { shopReferralSettingsUpdate(input: { referrerPoints: 9 }) { referralSettings { referrerPoints refereePoints } userErrors { code } } }',
    );
    expect(referral.data.shopReferralSettingsUpdate).toEqual({ referralSettings: { referrerPoints: 9, refereePoints: 25 }, userErrors: [] });
    const read = await t.graphql(shop.apiKey, SETTINGS);
    expect(read.data.shop.settings).toEqual({ referrerPoints: 9, refereePoints: 25, rateLimitPerMinute: 1000, webhookRetentionDays: null });
    // Another shop's settings are its own.
    const other = await t.shop();
    expect((await t.graphql(other.apiKey, SETTINGS)).data.shop.settings.referrerPoints).toBe(0);
  });

  it('refuses values out of bounds with validation_error and changes nothing; accepts the bounds themselves', async () => {
    const shop = await t.shop();
    const refused: Array<[Record<string, unknown>, string]> = [
      [{ rateLimitPerMinute: 0 }, 'rateLimitPerMinute'],
      [{ rateLimitPerMinute: 10_001 }, 'rateLimitPerMinute'],
      [{ webhookRetentionDays: 0 }, 'webhookRetentionDays'],
      [{ webhookRetentionDays: 91 }, 'webhookRetentionDays'],
      [{ referrerPoints: -1 }, 'referrerPoints'],
      [{ refereePoints: null }, 'refereePoints'],
      [{ refereePoints: 1_000_000_001 }, 'refereePoints'],
    ];
    for (const [input, field] of refused) {
      const res = await t.post('/graphql', { query: UPDATE, variables: { input } }, shop.apiKey);
      expect(res.status, JSON.stringify(input)).toBe(200);
      const body = await res.json();
      expect(body.errors, JSON.stringify(input)).toBeUndefined();
      expect(body.data.shopSettingsUpdate.settings).toBeNull();
      expect(body.data.shopSettingsUpdate.userErrors, JSON.stringify(input)).toEqual([
        { code: 'validation_error', field: ['input', field], message: expect.any(String) },
      ]);
    }
    expect((await t.graphql(shop.apiKey, SETTINGS)).data.shop.settings).toEqual({
      referrerPoints: 0,
      refereePoints: 0,
      rateLimitPerMinute: null,
      webhookRetentionDays: null,
    });
    // The lower bound last: a limit of 1 a minute leaves no room for another request.
    for (const input of [{ rateLimitPerMinute: 10_000, webhookRetentionDays: 90 }, { rateLimitPerMinute: 1, webhookRetentionDays: 1 }]) {
      expect((await update(shop.apiKey, input)).data.shopSettingsUpdate.settings).toMatchObject(input);
    }
  });

  it('a new rate limit applies from the next request: 429 at the new limit, REST and GraphQL alike; null restores the default', async () => {
    const shop = await t.shop();
    await t.customer(shop.shopId, 'rl-1', 0);
    const add = () => t.post('/rest-api/v1/points/add', { customerIdentifier: 'rl-1', amount: 1 }, shop.apiKey);
    // Requests under the default first, so the limiter has the shop's (empty) override cached.
    expect((await add()).headers.get('ratelimit-limit')).toBe('600');
    expect((await t.post('/graphql', { query: SETTINGS }, shop.apiKey)).headers.get('ratelimit-limit')).toBe('600');

    // After this mutation the GraphQL bucket holds 2 requests (the query, the mutation); points/add 1.
    expect((await update(shop.apiKey, { rateLimitPerMinute: 3 })).data.shopSettingsUpdate.userErrors).toEqual([]);
    for (let i = 0; i < 2; i++) {
      const res = await add();
      expect(res.status).toBe(200);
      expect(res.headers.get('ratelimit-limit')).toBe('3');
    }
    const refused = await add();
    expect(refused.status).toBe(429);
    expect(await refused.json()).toMatchObject({ error: 'rate_limited' });
    const gqlOk = await t.post('/graphql', { query: SETTINGS }, shop.apiKey);
    expect(gqlOk.status).toBe(200);
    const gqlRefused = await t.post('/graphql', { query: SETTINGS }, shop.apiKey);
    expect(gqlRefused.status).toBe(429);
    expect(gqlRefused.headers.get('ratelimit-limit')).toBe('3');

    // GraphQL is refused now, so reset through the same domain writer the mutation calls.
    await updateShopSettings(t.app.database.db, shop.shopId, { rateLimitPerMinute: null });
    const back = await add();
    expect(back.status).toBe(200);
    expect(back.headers.get('ratelimit-limit')).toBe('600');
  });
});

describe('webhook delivery retention per shop', () => {
  const DAY = 24 * 60 * 60 * 1000;

  async function shopWithDeliveries(name: string, retentionDays: number | null, count: number) {
    const shop = await t.shop(name);
    if (retentionDays !== null) {
      expect((await update(shop.apiKey, { webhookRetentionDays: retentionDays })).data.shopSettingsUpdate.userErrors).toEqual([]);
    }
    const created = await t.graphql(
      shop.apiKey,
      'mutation($input: WebhookSubscriptionCreateInput!) { webhookSubscriptionCreate(input: $input) { webhookSubscription { id } userErrors { code message } } }',
      { input: { topic: 'points/*', callbackUrl: `${receiver.url}/${shop.shopId}` } },
    );
    expect(created.data.webhookSubscriptionCreate.userErrors).toEqual([]);
    await t.customer(shop.shopId, `ret-${shop.shopId}`, 0);
    for (let i = 0; i < count; i++) {
      await t.post('/rest-api/v1/points/add', { customerIdentifier: `ret-${shop.shopId}`, amount: 1 }, shop.apiKey);
    }
    const db = t.app.database.db;
    const finished = () =>
      db.selectFrom('webhook_deliveries').select('id').where('shop_id', '=', shop.shopId).where('status', '=', 'succeeded').execute();
    await until(async () => (await finished()).length === count, 15_000, `${name}'s deliveries`);
    return shop;
  }

  it("purges a shop's deliveries after its own retention, and another shop's after the server's", async () => {
    const short = await shopWithDeliveries('One day', 1, 2);
    const byDefault = await shopWithDeliveries('Default', null, 2);
    const long = await shopWithDeliveries('Ninety days', 90, 2);
    const db = t.app.database.db;
    const now = Date.now();
    // Age every delivery of the three shops: two days, or 31 days for one of each shop's.
    const age = async (shopId: string) => {
      const ids = (await db.selectFrom('webhook_deliveries').select('id').where('shop_id', '=', shopId).orderBy('created_at').execute()).map((r) => r.id);
      await db.updateTable('webhook_deliveries').set({ created_at: new Date(now - 31 * DAY) }).where('id', '=', ids[0]!).execute();
      await db.updateTable('webhook_deliveries').set({ created_at: new Date(now - 2 * DAY) }).where('id', '=', ids[1]!).execute();
      return ids;
    };
    const shortIds = await age(short.shopId);
    const defaultIds = await age(byDefault.shopId);
    const longIds = await age(long.shopId);

    // The worker's own purge, with a server retention of 30 days.
    const worker = createDeliveryWorker({
      db,
      logger: createLogger('silent'),
      urlPolicy: new UrlPolicy({ allowedHosts: [] }),
      secrets: createSecretBox(randomBytes(32)),
      retentionMs: 30 * DAY,
    });
    expect(await worker.purge()).toBe(3);
    const left = async (shopId: string) =>
      (await db.selectFrom('webhook_deliveries').select('id').where('shop_id', '=', shopId).execute()).map((r) => r.id).sort();
    expect(await left(short.shopId)).toEqual([]); // both older than its 1 day
    expect(await left(byDefault.shopId)).toEqual([defaultIds[1]!]); // the 31-day one went
    expect(await left(long.shopId)).toEqual([...longIds].sort()); // 90 days keeps both
    const attempts = await db.selectFrom('webhook_delivery_attempts').select('id').where('delivery_id', 'in', shortIds).execute();
    expect(attempts).toEqual([]);
  });
});

describe('API keys', () => {
  const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

  it('lists prefixes and dates, never a key or its hash; marks the key making the request', async () => {
    const shop = await t.shop();
    const res = await t.post('/graphql', { query: KEYS }, shop.apiKey);
    const text = await res.text();
    const secret = shop.apiKey.slice(14);
    for (const forbidden of [shop.apiKey, secret, sha256(shop.apiKey)]) expect(text).not.toContain(forbidden);
    expect(JSON.parse(text).data.apiKeys).toEqual([
      { prefix: shop.apiKey.slice(0, 13), createdAt: expect.any(String), revokedAt: null, active: true, current: true },
    ]);
    // Nor can a query ask for them: the type has no such field.
    const introspection = await t.graphql(shop.apiKey, '{ __type(name: "ApiKey") { fields { name } } }');
    expect(introspection.data.__type.fields.map((f: { name: string }) => f.name).sort()).toEqual(['active', 'createdAt', 'current', 'prefix', 'revokedAt']);
  });

  it('apiKeyCreate shows the whole key once, uncacheable; the key works at once', async () => {
    const shop = await t.shop();
    const res = await t.post('/graphql', { query: CREATE_KEY }, shop.apiKey);
    expect(res.headers.get('cache-control')).toBe('no-store');
    const created = (await res.json()).data.apiKeyCreate;
    expect(created.userErrors).toEqual([]);
    expect(created.key).toMatch(/^lk_[a-z0-9]{10}_[A-Za-z0-9]{40}$/);
    expect(created.apiKey).toEqual({ prefix: created.key.slice(0, 13), createdAt: expect.any(String), revokedAt: null, active: true, current: false });

    const me = await t.graphql(created.key, '{ shop { id } apiKeys { prefix current } }');
    expect(me.data.shop.id).toBe(shop.shopId);
    expect(me.data.apiKeys).toEqual([
      { prefix: created.key.slice(0, 13), current: true },
      { prefix: shop.apiKey.slice(0, 13), current: false },
    ]);
    // The listing after creation has no secret either.
    expect(JSON.stringify(me)).not.toContain(created.key);
  });

  it('a revoked key gets 401 at once; a key cannot revoke itself; revoking again keeps the first time', async () => {
    const shop = await t.shop();
    const second = (await t.graphql(shop.apiKey, CREATE_KEY)).data.apiKeyCreate.key as string;
    await t.customer(shop.shopId, 'k-1', 5);
    expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 'k-1', amount: 1 }, second)).status).toBe(200);
    expect((await t.graphql(second, '{ shop { id } }')).data.shop.id).toBe(shop.shopId);

    const self = await t.graphql(second, REVOKE_KEY, { input: { prefix: second.slice(0, 13) } });
    expect(self.data.apiKeyRevoke).toEqual({
      apiKey: null,
      userErrors: [{ code: 'api_key_in_use', field: ['input', 'prefix'], message: expect.any(String) }],
    });
    expect((await t.graphql(second, '{ shop { id } }')).data.shop.id).toBe(shop.shopId);

    const revoked = await t.graphql(shop.apiKey, REVOKE_KEY, { input: { prefix: second.slice(0, 13) } });
    expect(revoked.data.apiKeyRevoke).toEqual({ apiKey: { prefix: second.slice(0, 13), revokedAt: expect.any(String), active: false }, userErrors: [] });
    // At once, on REST and GraphQL, although the key was just used (and cached).
    const rest = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'k-1', amount: 1 }, second);
    expect(rest.status).toBe(401);
    const gql = await t.post('/graphql', { query: '{ shop { id } }' }, second);
    expect(gql.status).toBe(401);

    const again = await t.graphql(shop.apiKey, REVOKE_KEY, { input: { prefix: second.slice(3, 13) } });
    expect(again.data.apiKeyRevoke.apiKey.revokedAt).toBe(revoked.data.apiKeyRevoke.apiKey.revokedAt);
    const listed = (await t.graphql(shop.apiKey, KEYS)).data.apiKeys;
    expect(listed.map((k: { active: boolean }) => k.active)).toEqual([false, true]);
  });

  it("refuses a malformed prefix with validation_error; one shop can neither see nor revoke another's keys", async () => {
    const a = await t.shop('Keys A');
    const b = await t.shop('Keys B');
    const bogus = await t.graphql(a.apiKey, REVOKE_KEY, { input: { prefix: 'lk_NOT-A-KEY' } });
    expect(bogus.data.apiKeyRevoke).toMatchObject({ apiKey: null, userErrors: [{ code: 'validation_error', field: ['input', 'prefix'] }] });

    const seenByB = (await t.graphql(b.apiKey, KEYS)).data.apiKeys.map((k: { prefix: string }) => k.prefix);
    expect(seenByB).toEqual([b.apiKey.slice(0, 13)]);
    const attempt = await t.graphql(b.apiKey, REVOKE_KEY, { input: { prefix: a.apiKey.slice(0, 13) } });
    expect(attempt.data.apiKeyRevoke).toEqual({ apiKey: null, userErrors: [expect.objectContaining({ code: 'api_key_not_found' })] });
    expect((await t.graphql(a.apiKey, '{ shop { id } }')).data.shop.id).toBe(a.shopId);
    expect((await t.graphql(a.apiKey, KEYS)).data.apiKeys).toEqual([expect.objectContaining({ prefix: a.apiKey.slice(0, 13), active: true })]);
  });
});

import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'graphql';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TOPICS } from '../src/domain/kernel/events.js';
import { graphqlRateUnits } from '../src/graphql/limits.js';
import { printSchemaSDL, schema } from '../src/graphql/schema.js';
import { createLogger } from '../src/logger.js';
import { RateLimiter, WINDOW_MS } from '../src/rate-limit/limiter.js';
import { MemoryStore } from '../src/rate-limit/memory-store.js';
import { rateLimitTable } from '../src/rate-limit/operations.js';
import { RedisStore } from '../src/rate-limit/redis-store.js';
import type { RateLimitStore } from '../src/rate-limit/store.js';
import { freePort, startRedis, startTestApp, type TestApp } from './helpers.js';

const REDIS_URL = process.env.TEST_REDIS_URL;
/** Keys of this run only, so parallel runs sharing the machine's Redis never meet. */
const prefix = () => `test:${randomBytes(6).toString('hex')}:`;

const redisClients: Redis[] = [];
afterAll(async () => {
  for (const redis of redisClients) {
    if (redis.status === 'ready') await redis.quit();
    else redis.disconnect();
  }
});

const stores: Array<[string, () => RateLimitStore]> = [['memory', () => new MemoryStore()]];
if (REDIS_URL) {
  stores.push([
    'Redis',
    () => {
      const redis = new Redis(REDIS_URL);
      return new RedisStore(redis);
    },
  ]);
}

const OP = { name: 'webhook_subscriptions', limit: 30 } as const;

describe.each(stores)('rolling 60 s window on the %s store', (_name, makeStore) => {
  let store: RateLimitStore;
  beforeAll(() => {
    store = makeStore();
  });
  afterAll(() => store.close());

  /** A limiter on a hand-moved clock, with a bucket no other test uses. */
  function limiter() {
    const clock = { now: 1_800_000_000_000 };
    const rl = new RateLimiter({ store, defaultLimit: 600, shopLimit: async () => null, keyPrefix: prefix(), clock: () => clock.now });
    return { clock, hit: () => rl.consume('shop', [OP]) };
  }

  it('30 calls spread over 59 s pass, the 31st is refused; once the oldest leaves, exactly one more passes', async () => {
    const { clock, hit } = limiter();
    const start = clock.now;
    for (let i = 0; i < 30; i++) {
      clock.now = start + Math.round((i * 59_000) / 29);
      const d = await hit();
      expect(d).toMatchObject({ allowed: true, limit: 30, remaining: 29 - i });
    }
    clock.now = start + 59_000;
    const refused = await hit();
    expect(refused).toMatchObject({ allowed: false, remaining: 0, resetSeconds: 1 });

    clock.now = start + WINDOW_MS - 1; // the oldest is still inside
    expect((await hit()).allowed).toBe(false);
    clock.now = start + WINDOW_MS; // now it has left
    expect(await hit()).toMatchObject({ allowed: true, remaining: 0 });
    expect((await hit()).allowed).toBe(false);
    // Then the second call (made at ~2 s) leaves, ~2 s later, and makes room for one more.
    clock.now = start + Math.round(59_000 / 29) + WINDOW_MS;
    expect((await hit()).allowed).toBe(true);
    expect((await hit()).allowed).toBe(false);
  });

  it('has no double burst at a minute boundary', async () => {
    const { clock, hit } = limiter();
    const minute = Math.ceil(clock.now / WINDOW_MS) * WINDOW_MS;
    clock.now = minute - 100; // 30 calls just before a fixed window would reset…
    for (let i = 0; i < 30; i++) expect((await hit()).allowed).toBe(true);
    for (const t of [minute, minute + 1, minute + 30_000, minute + WINDOW_MS - 101]) {
      clock.now = t; // …and none just after it
      expect((await hit()).allowed).toBe(false);
    }
    clock.now = minute - 100 + WINDOW_MS;
    for (let i = 0; i < 30; i++) expect((await hit()).allowed).toBe(true);
    expect((await hit()).allowed).toBe(false);
  });

  it('never lets more than 30 through in any 60 s span of a random stream', async () => {
    const { clock, hit } = limiter();
    const accepted: number[] = [];
    let seed = 42;
    const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
    for (let i = 0; i < 400; i++) {
      clock.now += Math.floor(random() * 1_500); // ~0.75 s apart on average: about 2.7x the limit
      if ((await hit()).allowed) accepted.push(clock.now);
    }
    for (let i = 0; i < accepted.length; i++) {
      const inSpan = accepted.filter((t) => t >= accepted[i]! && t < accepted[i]! + WINDOW_MS).length;
      expect(inSpan).toBeLessThanOrEqual(30);
    }
    // …and does not starve it either: about 30 per minute of stream got through.
    const minutes = (accepted.at(-1)! - accepted[0]!) / WINDOW_MS;
    expect(accepted.length).toBeGreaterThan(30 * minutes);
  });

  it('lets exactly the limit through when requests race', async () => {
    const { hit } = limiter();
    const results = await Promise.all(Array.from({ length: 100 }, () => hit()));
    expect(results.filter((r) => r.allowed)).toHaveLength(30);
  });

  it('counts a request against all its operations or none', async () => {
    const clock = { now: 1_800_000_000_000 };
    const rl = new RateLimiter({ store, defaultLimit: 3, shopLimit: async () => null, keyPrefix: prefix(), clock: () => clock.now });
    const graphql = { name: 'graphql', limit: 'default' } as const;
    const pointsAdd = { name: 'points_add', limit: 2 } as const;
    expect((await rl.consume('s', [graphql, pointsAdd, pointsAdd])).allowed).toBe(true); // points_add 2/2
    const refused = await rl.consume('s', [graphql, pointsAdd]);
    expect(refused).toMatchObject({ allowed: false, operation: 'points_add', limit: 2 });
    // The refusal did not use up the graphql bucket: two more fit.
    expect((await rl.consume('s', [graphql])).allowed).toBe(true);
    expect(await rl.consume('s', [graphql])).toMatchObject({ allowed: true, remaining: 0 });
    expect((await rl.consume('s', [graphql])).allowed).toBe(false);
  });
});

describe('the rate-limit table', () => {
  it('names only routes and GraphQL root fields that exist', async () => {
    const t = await startTestApp();
    try {
      const sdl = printSchemaSDL();
      const rootFields = new Set(
        [...sdl.matchAll(/^type (Query|Mutation) \{([\s\S]*?)^\}/gm)].flatMap((m) => [...m[2]!.matchAll(/^ {2}(\w+)[(:]/gm)].map((f) => f[1]!)),
      );
      for (const entry of rateLimitTable()) {
        for (const field of entry.graphql) expect(rootFields.has(field), field).toBe(true);
        for (const route of entry.rest) {
          const [method, path] = route.split(' ') as [string, string];
          const res = await fetch(`${t.url}/rest-api/v1${path.replace(':id', '0123456789abcdef01234567')}`, { method });
          // 401 (no key) proves a route exists; a missing one would be 404.
          expect(res.status, route).toBe(401);
        }
      }
    } finally {
      await t.stop();
    }
  });
});

describe('through HTTP: REST and GraphQL twins share one bucket', () => {
  let t: TestApp;
  const clock = { now: Date.now() };
  beforeAll(async () => {
    t = await startTestApp({}, { clock: () => clock.now });
  });
  afterAll(() => t?.stop());

  async function shopWithLimit(limit: number) {
    const shop = await t.shop();
    await t.app.database.db.updateTable('shops').set({ rate_limit_per_minute: limit }).where('id', '=', shop.shopId).execute();
    await t.customer(shop.shopId, 'c-1', 0);
    return shop;
  }

  const ADD = 'mutation($input: PointsChangeInput!) { pointsAdd(input: $input) { activity { newPoints } userErrors { code } } }';

  it('sends RateLimit headers on every limited response; the default is 600 a minute', async () => {
    const shop = await t.shop();
    await t.customer(shop.shopId, 'c-1', 0);
    const res = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'c-1', amount: 1 }, shop.apiKey);
    expect(res.status).toBe(200);
    expect(res.headers.get('ratelimit-limit')).toBe('600');
    expect(res.headers.get('ratelimit-remaining')).toBe('599');
    expect(Number(res.headers.get('ratelimit-reset'))).toBe(60);
    expect(res.headers.get('retry-after')).toBeNull();
  });

  it('pointsAdd counts against POST /points/add; a refused operation is HTTP 429 and runs nothing', async () => {
    const shop = await shopWithLimit(5);
    for (let i = 0; i < 3; i++) expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 'c-1', amount: 1 }, shop.apiKey)).status).toBe(200);
    for (let i = 0; i < 2; i++) {
      const ok = await t.graphql(shop.apiKey, ADD, { input: { customerIdentifier: 'c-1', amount: 1 } });
      expect(ok.data.pointsAdd.activity.newPoints).toBe(4 + i);
    }
    const refused = await t.post('/graphql', { query: ADD, variables: { input: { customerIdentifier: 'c-1', amount: 1 } } }, shop.apiKey);
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(refused.headers.get('ratelimit-limit')).toBe('5');
    expect(refused.headers.get('ratelimit-remaining')).toBe('0');
    const body = await refused.json();
    expect(body.data).toBeUndefined();
    expect(body.errors).toEqual([expect.objectContaining({ extensions: { code: 'rate_limited' } })]);

    const rest = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'c-1', amount: 1 }, shop.apiKey);
    expect(rest.status).toBe(429);
    expect(await rest.json()).toMatchObject({ success: false, statusCode: 429, error: 'rate_limited' });
    // Other operations keep their own buckets.
    expect((await t.post('/rest-api/v1/points/substract', { customerIdentifier: 'c-1', amount: 1 }, shop.apiKey)).status).toBe(200);
    const balance = await t.app.database.db.selectFrom('customers').select('points').where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow();
    expect(balance.points).toBe(4); // 5 added, 1 subtracted, nothing refused applied
  });

  it('counts a mutation repeated under aliases once per occurrence', async () => {
    const shop = await shopWithLimit(5);
    const many = `mutation { ${Array.from({ length: 6 }, (_, i) => `a${i}: pointsAdd(input: { customerIdentifier: "c-1", amount: 1 }) { userErrors { code } }`).join(' ')} }`;
    const res = await t.post('/graphql', { query: many }, shop.apiKey);
    expect(res.status).toBe(429);
    const four = many.replace(/a4:.*$/, '}');
    const ok = await t.graphql(shop.apiKey, four);
    expect(Object.keys(ok.data)).toHaveLength(4);
    expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 'c-1', amount: 1 }, shop.apiKey)).status).toBe(200);
    expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 'c-1', amount: 1 }, shop.apiKey)).status).toBe(429);
  });

  it('webhookSubscriptionRotateSecret shares rotate-secret\'s 5 a minute', async () => {
    const shop = await t.shop();
    const created = await t.post('/rest-api/v1/webhooks/subscriptions', { topic: 'points/added', callbackUrl: 'https://93.184.216.34/hook' }, shop.apiKey);
    const { id } = (await created.json()).subscription;
    const ROTATE = 'mutation($id: ID!) { webhookSubscriptionRotateSecret(input: { id: $id, graceHours: 1 }) { signingSecret userErrors { code } } }';
    for (let i = 0; i < 3; i++) expect((await t.post(`/rest-api/v1/webhooks/subscriptions/${id}/rotate-secret`, {}, shop.apiKey)).status).toBe(201);
    for (let i = 0; i < 2; i++) expect((await t.graphql(shop.apiKey, ROTATE, { id })).data.webhookSubscriptionRotateSecret.signingSecret).toMatch(/^[0-9a-f]{64}$/);
    const refused = await t.post('/graphql', { query: ROTATE, variables: { id } }, shop.apiKey);
    expect(refused.status).toBe(429);
    expect((await refused.json()).errors[0].extensions.code).toBe('rate_limited');
    expect((await t.post(`/rest-api/v1/webhooks/subscriptions/${id}/rotate-secret`, {}, shop.apiKey)).status).toBe(429);
    // A minute later the oldest has left.
    clock.now += WINDOW_MS;
    expect((await t.post(`/rest-api/v1/webhooks/subscriptions/${id}/rotate-secret`, {}, shop.apiKey)).status).toBe(201);
  });

  it('every GraphQL operation counts against the shop\'s GraphQL limit', async () => {
    const shop = await shopWithLimit(2);
    for (let i = 0; i < 2; i++) expect((await t.graphql(shop.apiKey, '{ webhookTopics { topic } }')).data.webhookTopics).toHaveLength(Object.keys(EVENT_TOPICS).length);
    const res = await t.post('/graphql', { query: '{ webhookTopics { topic } }' }, shop.apiKey);
    expect(res.status).toBe(429);
    expect(res.headers.get('ratelimit-limit')).toBe('2');
  });
});

describe('RATE_LIMIT_FIXED_MULTIPLIER', () => {
  it('multiplies the webhook endpoints\' fixed limits, and only those', async () => {
    const t = await startTestApp({ RATE_LIMIT_FIXED_MULTIPLIER: '3' });
    try {
      const shop = await t.shop();
      await t.customer(shop.shopId, 'c-1', 0);
      const get = (path: string) => fetch(`${t.url}/rest-api/v1${path}`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
      const deliveries = await get('/webhooks/deliveries');
      expect(deliveries.status).toBe(200);
      expect(deliveries.headers.get('ratelimit-limit')).toBe('180');
      expect((await get('/webhooks/subscriptions')).headers.get('ratelimit-limit')).toBe('90');
      const add = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'c-1', amount: 1 }, shop.apiKey);
      expect(add.headers.get('ratelimit-limit')).toBe('600');
    } finally {
      await t.stop();
    }
  });
});

describe('GraphQL operations count by their cost', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await startTestApp({});
  });
  afterAll(() => t?.stop());

  const page = (first: number) => `{ customers(first: ${first}) { edges { node {
    _id email points
    activities(first: 1) { edges { node { _id type newPoints } } }
    discountCodes(first: 1) { edges { node { code value } } }
  } } } }`;

  it('a wide nested page uses as many units as graphqlRateUnits says, a mutation or small query one', async () => {
    const shop = await t.shop();
    await t.customer(shop.shopId, 'c-1', 0);
    const remaining = async (query: string) => {
      const res = await t.post('/graphql', { query }, shop.apiKey);
      expect(res.status).toBe(200);
      return Number(res.headers.get('ratelimit-remaining'));
    };
    const table = [
      { query: '{ webhookTopics { topic } }', units: 1 },
      { query: 'mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: 1 }) { userErrors { code } } }', units: 1 },
      { query: page(10), units: graphqlRateUnits(schema, parse(page(10)), undefined) },
      { query: page(250), units: graphqlRateUnits(schema, parse(page(250)), undefined) },
    ];
    // Units grow with the page: one per COST_PER_RATE_UNIT of armor's cost, at least one.
    expect(table[3]!.units).toBeGreaterThan(10 * table[2]!.units);
    let left = 600;
    for (const { query, units } of table) {
      left -= units;
      expect(await remaining(query), query).toBe(left);
    }
  });

  it('refuses a wide page the shop can no longer afford with 429, and a one-unit query still passes', async () => {
    const shop = await t.shop();
    const units = graphqlRateUnits(schema, parse(page(250)), undefined);
    await t.app.database.db.updateTable('shops').set({ rate_limit_per_minute: units + 1 }).where('id', '=', shop.shopId).execute();
    expect((await t.post('/graphql', { query: page(250) }, shop.apiKey)).status).toBe(200);
    const refused = await t.post('/graphql', { query: page(250) }, shop.apiKey);
    expect(refused.status).toBe(429);
    expect((await refused.json()).errors[0].extensions.code).toBe('rate_limited');
    expect((await t.post('/graphql', { query: '{ webhookTopics { topic } }' }, shop.apiKey)).status).toBe(200);
  });
});

describe.skipIf(!REDIS_URL)('on a shared Redis', () => {
  it('two server instances share one limit', async () => {
    const env = { REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: prefix() };
    const one = await startTestApp(env);
    const two = await startTestApp(env);
    try {
      // The same shop and key in both databases, as if they shared one.
      const shop = await one.shop();
      const db1 = one.app.database.db;
      const db2 = two.app.database.db;
      await db2.insertInto('shops').values(await db1.selectFrom('shops').select(['id', 'name']).where('id', '=', shop.shopId).executeTakeFirstOrThrow()).execute();
      await db2.insertInto('api_keys').values(await db1.selectFrom('api_keys').selectAll().where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow()).execute();

      const get = (app: TestApp) => fetch(`${app.url}/rest-api/v1/webhooks/subscriptions`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
      const statuses: number[] = [];
      for (let i = 0; i < 30; i++) statuses.push((await get(i % 2 ? two : one)).status);
      expect(statuses.every((s) => s === 200)).toBe(true);
      const last = await get(two);
      expect(last.status).toBe(429);
      expect((await get(one)).status).toBe(429);
      expect(last.headers.get('ratelimit-limit')).toBe('30');
    } finally {
      await Promise.all([one.stop(), two.stop()]);
    }
  });

  it('keeps serving, limited in memory, when its Redis dies, and goes back to Redis when it returns', async () => {
    const port = await freePort();
    let redisServer = await startRedis(port);
    const logs: string[] = [];
    const logger = createLogger('info', { write: (line: string) => void logs.push(line) });
    const t = await startTestApp({ REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_KEY_PREFIX: prefix() }, { logger });
    const probe = new Redis(`redis://127.0.0.1:${port}`, { lazyConnect: true, maxRetriesPerRequest: 0 });
    probe.on('error', () => {});
    redisClients.push(probe);
    try {
      const shop = await t.shop();
      const get = () => fetch(`${t.url}/rest-api/v1/webhooks/deliveries`, { headers: { authorization: `Bearer ${shop.apiKey}` } });
      for (let i = 0; i < 3; i++) expect((await get()).status).toBe(200);
      await probe.connect();
      expect((await probe.keys('*rl:*')).length).toBe(1); // counted in Redis
      probe.disconnect();

      redisServer.kill('SIGKILL');
      await once(redisServer, 'exit');
      const started = Date.now();
      for (let i = 0; i < 10; i++) {
        const res = await get();
        expect(res.status).toBe(200);
        expect(res.headers.get('ratelimit-limit')).toBe('60');
      }
      expect(Date.now() - started).toBeLessThan(5_000);
      // Memory keeps limiting: 60 a minute still holds on this server.
      let refused = 0;
      for (let i = 0; i < 60; i++) if ((await get()).status === 429) refused++;
      expect(refused).toBe(10);
      expect(logs.filter((l) => l.includes('Redis is unavailable'))).toHaveLength(1);

      redisServer = await startRedis(port);
      const deadline = Date.now() + 10_000;
      while (!logs.some((l) => l.includes('Redis is back')) && Date.now() < deadline) {
        await get();
        await sleep(200);
      }
      expect(logs.some((l) => l.includes('Redis is back'))).toBe(true);
    } finally {
      await t.stop();
      redisServer.kill('SIGKILL');
    }
  });
});

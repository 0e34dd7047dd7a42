import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { connect } from 'node:net';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey } from '../src/domain/shops/shops.js';
import { createLogger } from '../src/logger.js';
import { freePort, isolatedPostgresUrl, onPostgres, startRedis, startTestApp, type TestApp } from './helpers.js';
import { collect, sse, until, wsClient } from './live-helpers.js';

let t: TestApp;
let a: { shopId: string; apiKey: string };
let b: { shopId: string; apiKey: string };

const REDIS_URL = process.env.TEST_REDIS_URL;
/** With TEST_REDIS_URL every test here runs over the Redis bus, on keys of its own. */
const busPrefix = `test:${randomBytes(4).toString('hex')}:`;
const busEnv = (prefix = `test:${randomBytes(4).toString('hex')}:`): Record<string, string> =>
  REDIS_URL ? { REDIS_URL, REDIS_KEY_PREFIX: prefix } : {};

beforeAll(async () => {
  t = await startTestApp(busEnv(busPrefix));
  a = await t.shop('Shop A');
  b = await t.shop('Shop B');
  await t.customer(a.shopId, 'a-1', 100);
  await t.customer(a.shopId, 'a-2', 100);
  await t.customer(b.shopId, 'b-1', 100);
  // Live events come from the outbox relay: let it pass these set-ups' events before any test
  // subscribes, or a loaded machine's late relay hands a subscriber a set-up's points/updated.
  await until(async () => {
    const { n } = await t.app.database.db.selectFrom('outbox_events').select((eb) => eb.fn.countAll<string>().as('n')).where('relayed_at', 'is', null).executeTakeFirstOrThrow();
    return Number(n) === 0;
  }, 20_000, 'the set-up\'s events relayed');
});
afterAll(() => t?.stop());

const EVENTS = `subscription($topics: [String!]!) { events(topics: $topics) { id type timestamp shopId data } }`;
const POINTS_CHANGED = `subscription($identifier: String!) {
  customerPointsChanged(identifier: $identifier) { customer points activity { _id type oldPoints newPoints createdAt } }
}`;

const addPoints = async (shop: { apiKey: string }, customerIdentifier: string, amount: number) => {
  const res = await t.post('/rest-api/v1/points/add', { customerIdentifier, amount }, shop.apiKey);
  expect(res.status).toBe(200);
  return (await res.json()).activity;
};
const listeners = () => t.app.bus.stats().listeners;

describe('events over graphql-ws', () => {
  it('delivers the shop\'s events on its topics only, with wildcards, in the webhook envelope', async () => {
    const client = wsClient(t.url, a.apiKey);
    try {
      const points = collect(client, EVENTS, { topics: ['points/*'] });
      const customers = collect(client, EVENTS, { topics: ['customers/created'] });
      await until(() => listeners() === 2, 10_000, 'two listeners');

      const activity = await addPoints(a, 'a-1', 7);
      await addPoints(b, 'b-1', 9); // another shop: nobody here hears it
      await t.post('/rest-api/v1/points/substract', { customerIdentifier: 'a-1', amount: 2 }, a.apiKey);
      const created = await t.graphql(a.apiKey, `mutation { customerUpsert(input: { shopifyCustomerId: "a-9", email: "a-9@example.com" }) { customer { _id } } }`);

      await until(() => points.results.length >= 2 && customers.results.length >= 1, 10_000, 'events');
      await new Promise((r) => setTimeout(r, 300)); // nothing more arrives
      const pointsEvents = points.results.map((r) => r.data.events);
      expect(pointsEvents.map((e) => e.type)).toEqual(['points/added', 'points/subtracted']);
      expect(pointsEvents[0]).toEqual({
        id: expect.stringMatching(/^evt_/),
        type: 'points/added',
        timestamp: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
        shopId: a.shopId,
        data: { ...activity, oldPoints: 100, newPoints: 107 },
      });
      expect(pointsEvents.every((e) => e.shopId === a.shopId)).toBe(true);
      expect(customers.results.map((r) => r.data.events)).toEqual([
        expect.objectContaining({ type: 'customers/created', data: expect.objectContaining({ _id: created.data.customerUpsert.customer._id }) }),
      ]);
      points.stop();
      customers.stop();
      await until(() => listeners() === 0, 5_000, 'listeners released');
    } finally {
      await client.dispose();
    }
  });

  it('refuses an unknown topic with a GraphQL error before the stream starts', async () => {
    const client = wsClient(t.url, a.apiKey);
    try {
      for (const topics of [['points/nope'], ['nope/*'], []]) {
        const sub = collect(client, EVENTS, { topics });
        await until(() => sub.completed, 5_000, 'refusal');
        expect(sub.results).toEqual([
          { errors: [expect.objectContaining({ extensions: expect.objectContaining({ code: 'validation_error' }) })] },
        ]);
      }
      expect(t.app.bus.stats()).toEqual({ subscriptions: 0, listeners: 0 });
    } finally {
      await client.dispose();
    }
  });

  it('closes a connection with a bad or missing key with 4403, before any operation', async () => {
    for (const key of ['lk_not_a_real_key', '']) {
      const closed = new Promise<number>((resolve) => {
        const client = wsClient(t.url, key, { onClose: resolve });
        collect(client, EVENTS, { topics: ['points/*'] });
      });
      expect(await closed).toBe(4403);
    }
    expect(t.app.bus.stats()).toEqual({ subscriptions: 0, listeners: 0 });
  });

  it('answers upgrades to other paths with 404 and survives odd request targets', async () => {
    const { port } = new URL(t.url);
    const upgrade = (target: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), '127.0.0.1', () => {
          socket.write(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n` +
            'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n');
        });
        let reply = '';
        // The status line is all we need; stop there rather than on a timer (slow under load).
        socket.on('data', (chunk) => {
          reply += chunk.toString();
          if (reply.includes('\r\n')) socket.destroy();
        });
        socket.on('close', () => resolve(reply));
        socket.on('error', reject);
        setTimeout(() => socket.destroy(), 15_000);
      });
    expect(await upgrade('/elsewhere')).toMatch(/^HTTP\/1.1 404/);
    expect(await upgrade('http://[x/graphql')).toMatch(/^HTTP\/1.1 (400|404)/);
    expect(await upgrade('/graphql')).toMatch(/^HTTP\/1.1 101/);
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
  });

  it('closes the socket with 4403 at the next operation once its key is revoked', async () => {
    const shop = await t.shop('Revoked');
    let closedWith: number | undefined;
    const client = wsClient(t.url, shop.apiKey, { onClose: (code) => (closedWith ??= code) });
    const open = collect(client, EVENTS, { topics: ['points/*'] }); // keeps the socket up
    await until(() => t.app.bus.stats().subscriptions === 1, 10_000, 'subscribed');
    await revokeApiKey(t.app.database.db, shop.shopId, shop.apiKey);
    collect(client, `{ webhookTopics { topic } }`);
    await until(() => closedWith !== undefined, 5_000, 'the socket closed');
    expect(closedWith).toBe(4403);
    expect(open.completed).toBe(true);
    expect(t.app.bus.stats()).toEqual({ subscriptions: 0, listeners: 0 });
  });

  it('streams one customer\'s balance changes, redemptions included', async () => {
    const client = wsClient(t.url, a.apiKey);
    try {
      const mine = collect(client, POINTS_CHANGED, { identifier: 'a-2@example.com' });
      await until(() => listeners() === 1, 10_000, 'listener');
      await addPoints(a, 'a-1', 1); // another customer
      const added = await addPoints(a, 'a-2', 25);
      await t.post('/rest-api/v1/points/update', { customerIdentifier: 'a-2', amount: 60 }, a.apiKey);
      const option = await t.graphql(a.apiKey, `mutation { pointsRedemptionCreate(input: { name: "$5 off", type: amount, discountPrefix: "FIVE-", rewardValue: 50, discountValue: 5 }) { pointsRedemption { _id } } }`);
      const redeemed = await t.post('/rest-api/v1/pointsRedemptions', { customerIdentifier: 'a-2', pointsAmount: 50, rewardId: option.data.pointsRedemptionCreate.pointsRedemption._id }, a.apiKey);
      expect(redeemed.status).toBe(200);
      await until(() => mine.results.length >= 3, 10_000, 'three changes');
      expect(mine.results.map((r) => r.data.customerPointsChanged)).toEqual([
        { customer: added.customer, points: 125, activity: { _id: added._id, type: 'add_points', oldPoints: 100, newPoints: 125, createdAt: added.createdAt } },
        expect.objectContaining({ points: 60, activity: expect.objectContaining({ type: 'update_points', oldPoints: 125 }) }),
        expect.objectContaining({ points: 10, activity: expect.objectContaining({ type: 'redeem_points', oldPoints: 60 }) }),
      ]);
      mine.stop();

      const unknown = collect(client, POINTS_CHANGED, { identifier: 'ghost' });
      await until(() => unknown.completed, 5_000, 'refusal');
      expect(unknown.results[0]!.errors![0]!.extensions!.code).toBe('customer_not_found');
    } finally {
      await client.dispose();
    }
  });
});

describe('operations over graphql-ws share the HTTP pipeline', () => {
  it('runs queries and mutations as the connection\'s shop, with the same validation and rate limits', async () => {
    const shop = await t.shop('Socket shop');
    await t.customer(shop.shopId, 's-1', 10);
    await t.app.database.db.updateTable('shops').set({ rate_limit_per_minute: 3 }).where('id', '=', shop.shopId).execute();
    const client = wsClient(t.url, shop.apiKey);
    const run = async (query: string) => {
      const sub = collect(client, query);
      await until(() => sub.completed, 5_000, 'a result');
      return sub.results[0]!;
    };
    try {
      const added = await run(`mutation { pointsAdd(input: { customerIdentifier: "s-1", amount: 5 }) { customer { points } userErrors { code } } }`);
      expect(added).toEqual({ data: { pointsAdd: { customer: { points: 15 }, userErrors: [] } } });
      // Another shop's customer does not exist for this connection.
      expect(await run(`{ customer(identifier: "a-1") { points } }`)).toEqual({ data: { customer: null } });
      const invalid = await run(`mutation { pointsAdd(input: { customerIdentifier: "s-1", amount: -1 }) { userErrors { code field } } }`);
      expect(invalid).toEqual({ data: { pointsAdd: { userErrors: [{ code: 'validation_error', field: ['input', 'amount'] }] } } });
      const limited = await run(`{ customer(identifier: "s-1") { points } }`); // the 4th GraphQL operation this minute
      expect(limited.errors![0]!.extensions!.code).toBe('rate_limited');
      const malformed = collect(client, `{ customer(identifier: "s-1") { nope } }`);
      await until(() => malformed.completed, 5_000, 'a validation failure');
      expect(String((malformed.failure as Array<{ message: string }>)[0]!.message)).toContain('nope');
    } finally {
      await client.dispose();
    }
  });
});

describe('events over SSE', () => {
  it('streams the shop\'s events on its topics only', async () => {
    const stream = await sse(t.url, a.apiKey, EVENTS, { topics: ['points/added'] });
    const other = await sse(t.url, b.apiKey, EVENTS, { topics: ['customers/*'] });
    try {
      expect(stream.status).toBe(200);
      expect(stream.contentType).toContain('text/event-stream');
      await until(() => listeners() === 2, 10_000, 'two SSE listeners');
      const activity = await addPoints(a, 'a-1', 3);
      await t.post('/rest-api/v1/points/substract', { customerIdentifier: 'a-1', amount: 1 }, a.apiKey); // not points/added
      await addPoints(b, 'b-1', 4); // shop B, and B listens to customers/* only
      await until(() => stream.events.length >= 1, 10_000, 'an SSE event');
      await new Promise((r) => setTimeout(r, 300));
      expect(stream.events).toEqual([
        { event: 'next', data: { data: { events: expect.objectContaining({ type: 'points/added', shopId: a.shopId, data: activity }) } } },
      ]);
      expect(other.events).toEqual([]);
    } finally {
      stream.close();
      other.close();
    }
    await until(() => listeners() === 0, 5_000, 'SSE listeners released on disconnect');
  });

  it('answers a bad key with 401 and an unknown topic with an error, not a stream', async () => {
    const unauthorized = await sse(t.url, 'lk_wrong', EVENTS, { topics: ['points/*'] });
    expect(unauthorized.status).toBe(401);
    const unknown = await sse(t.url, a.apiKey, EVENTS, { topics: ['points/whatever'] });
    await unknown.ended;
    expect(unknown.events.flatMap((e) => e.data?.errors ?? []).map((e: any) => e.extensions.code)).toEqual(['validation_error']);
    expect(t.app.bus.stats().subscriptions).toBe(0);
  });
});

describe('client mistakes in the log', () => {
  it('logs an unknown topic below error, without a stack, with the argument path in its message', async () => {
    const lines: string[] = [];
    const logged = await startTestApp({ ...busEnv(), LOG_LEVEL: 'debug' }, { logger: createLogger('debug', { write: (line: string) => void lines.push(line) }) });
    try {
      const shop = await logged.shop('Logged');
      const unknown = await sse(logged.url, shop.apiKey, EVENTS, { topics: ['points/*', 'points/whatever'] });
      await unknown.ended;
      const [error] = unknown.events.flatMap((e) => e.data?.errors ?? []);
      expect(error).toMatchObject({ message: 'topics[1]: unknown topic "points/whatever": use one from webhookTopics, or <group>/*', extensions: { code: 'validation_error' } });
      // A bad cursor over plain HTTP: a client mistake too.
      const cursor = await logged.graphql(shop.apiKey, '{ customers(first: 1, after: "garbage") { edges { cursor } } }');
      expect(cursor.errors[0].extensions.code).toBe('validation_error');

      const entries = lines.map((line) => JSON.parse(line));
      const mentions = entries.filter((e) => /unknown topic|cursor/.test(JSON.stringify(e)));
      expect(mentions.length).toBeGreaterThanOrEqual(2);
      for (const entry of mentions) {
        expect(entry.level, JSON.stringify(entry)).toBeLessThan(50);
        expect(JSON.stringify(entry)).not.toMatch(/stack|    at /);
      }
      expect(mentions.find((e) => /unknown topic/.test(e.msg))).toMatchObject({ level: 30, code: 'validation_error', path: 'events', msg: expect.stringContaining('topics[1]: unknown topic') });
    } finally {
      await logged.stop();
    }
  });
});

describe('limits and disposal', () => {
  it('refuses the subscription past SUBSCRIPTIONS_PER_SHOP with a clear error, per shop', async () => {
    const small = await startTestApp({ ...busEnv(), SUBSCRIPTIONS_PER_SHOP: '3' });
    try {
      const s1 = await small.shop('Limited');
      const s2 = await small.shop('Other');
      const client = wsClient(small.url, s1.apiKey);
      const open = [0, 1, 2].map(() => collect(client, EVENTS, { topics: ['points/*'] }));
      await until(() => small.app.bus.stats().listeners === 3, 10_000, 'three open');

      const refusedWs = collect(client, EVENTS, { topics: ['points/*'] });
      await until(() => refusedWs.completed, 5_000, 'refusal over graphql-ws');
      expect(refusedWs.results[0]!.errors![0]).toMatchObject({
        message: expect.stringContaining('3 live subscriptions'),
        extensions: { code: 'subscription_limit_reached' },
      });
      const refusedSse = await sse(small.url, s1.apiKey, EVENTS, { topics: ['points/*'] });
      await refusedSse.ended;
      expect(refusedSse.events.flatMap((e) => e.data?.errors ?? []).map((e: any) => e.extensions.code)).toEqual(['subscription_limit_reached']);

      // Another shop has its own allowance; a closed subscription frees its slot.
      const otherShop = await sse(small.url, s2.apiKey, EVENTS, { topics: ['points/*'] });
      await until(() => small.app.bus.stats().listeners === 4, 10_000, 'other shop open');
      otherShop.close();
      open[0]!.stop();
      await until(() => small.app.bus.stats().subscriptions === 2, 5_000, 'slot freed');
      const again = collect(client, EVENTS, { topics: ['points/*'] });
      await until(() => small.app.bus.stats().listeners === 3, 10_000, 'reopened');
      expect(again.results).toEqual([]);
      await client.dispose();
      await until(() => small.app.bus.stats().subscriptions === 0, 5_000, 'all released on socket close');
    } finally {
      await small.stop();
    }
  });

  it('opens and closes 1,000 subscriptions without leaking listeners or memory', async () => {
    const gc = collectGarbage();
    const shops = await Promise.all(Array.from({ length: 10 }, (_, i) => t.shop(`Leak ${i}`)));
    await t.customer(shops[0]!.shopId, 'leak-1');
    // 10 shops x 100 subscriptions (the default per-shop limit), 100 multiplexed on each socket.
    const round = async () => {
      const clients = shops.map((s) => wsClient(t.url, s.apiKey));
      const subs = clients.flatMap((client) => Array.from({ length: 100 }, () => collect(client, EVENTS, { topics: ['points/*'] })));
      await until(() => t.app.bus.stats().listeners === 1_000, 30_000, '1,000 listeners');
      expect(t.app.bus.stats()).toEqual({ subscriptions: 1_000, listeners: 1_000 });
      // 100 listeners per shop on the EventTarget; on Redis one subscribed client per channel.
      expect(await listenersLeft()).toEqual(shops.map(() => (REDIS_URL ? 1 : 100)));
      await addPoints(shops[0]!, 'leak-1', 1);
      await until(() => subs.slice(0, 100).every((s) => s.results.length === 1), 10_000, 'all of shop 0 hear the event');
      expect(subs.slice(100).every((s) => s.results.length === 0)).toBe(true);
      // Half end their subscription, half go with their socket.
      for (const s of subs.slice(0, 500)) s.stop();
      await Promise.all(clients.slice(5).map((c) => c.dispose()));
      await until(() => t.app.bus.stats().subscriptions === 0, 10_000, 'all released');
      expect(t.app.bus.stats()).toEqual({ subscriptions: 0, listeners: 0 });
      expect(await listenersLeft()).toEqual(shops.map(() => 0));
      await Promise.all(clients.slice(0, 5).map((c) => c.dispose()));
    };
    // Asked of the EventTarget itself, or of Redis: who still listens on each shop's channel.
    const listenersLeft = async () => {
      if (!REDIS_URL) return shops.map((s) => t.app.bus.listenersOn(s.shopId));
      const redis = new Redis(REDIS_URL);
      try {
        const reply = (await redis.pubsub('NUMSUB', ...shops.map((s) => `${busPrefix}events:${s.shopId}`))) as Array<string | number>;
        return reply.filter((_, i) => i % 2 === 1).map(Number);
      } finally {
        redis.disconnect();
      }
    };
    await round(); // warm-up: code paths compiled, pools filled
    const before = await heapAfterGc(gc);
    for (let i = 0; i < 3; i++) await round();
    const after = await heapAfterGc(gc);
    const growthMb = (after - before) / 1024 / 1024;
    console.log(`heap after 1 round ${(before / 1048576).toFixed(1)} MB, after 3 more ${(after / 1048576).toFixed(1)} MB`);
    expect(growthMb).toBeLessThan(8);
  });

  it('releases SSE subscriptions when clients disconnect', async () => {
    const shops = await Promise.all([t.shop('SSE 1'), t.shop('SSE 2')]);
    const streams = await Promise.all(shops.flatMap((s) => Array.from({ length: 100 }, () => sse(t.url, s.apiKey, EVENTS, { topics: ['customers/*'] }))));
    await until(() => t.app.bus.stats().listeners === 200, 20_000, '200 SSE listeners');
    for (const s of streams) s.close();
    await until(() => t.app.bus.stats().subscriptions === 0, 10_000, 'SSE released');
    expect(t.app.bus.stats()).toEqual({ subscriptions: 0, listeners: 0 });
  });

  it('on stop, closes sockets with 1001 and ends SSE streams instead of waiting for them', async () => {
    const other = await startTestApp(busEnv());
    const s = await other.shop();
    const closed = new Promise<number>((resolve) => {
      const client = wsClient(other.url, s.apiKey, { onClose: resolve });
      collect(client, EVENTS, { topics: ['points/*'] });
    });
    const stream = await sse(other.url, s.apiKey, EVENTS, { topics: ['points/*'] });
    await until(() => other.app.bus.stats().listeners === 2, 10_000, 'both open');
    const started = Date.now();
    await other.stop();
    expect(Date.now() - started).toBeLessThan(10_000); // not the 30 s a socket close may wait, nor forever for SSE
    expect(await closed).toBe(1001);
    await stream.ended;
    expect(other.app.bus.stats()).toEqual({ subscriptions: 0, listeners: 0 });
  });
});

/** V8's gc(), reachable without starting the worker with --expose-gc. */
function collectGarbage(): () => void {
  setFlagsFromString('--expose-gc');
  return runInNewContext('gc') as () => void;
}

/**
 * The heap after collections, its least over a second: the app's own background work (the relay,
 * the scheduler's passes) holds transient memory at any one instant, which a loaded machine's
 * timing can put into one sample (8.9 MB once in CI); a leak is in every sample.
 */
async function heapAfterGc(gc: () => void): Promise<number> {
  let least = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 5; i++) {
    gc();
    await new Promise((r) => setTimeout(r, 200));
    gc();
    least = Math.min(least, process.memoryUsage().heapUsed);
  }
  return least;
}

describe.skipIf(!onPostgres || !REDIS_URL)('two instances on PostgreSQL + Redis', () => {
  it('a subscriber on one instance hears a change made through the other', async () => {
    const database = await isolatedPostgresUrl();
    const prefix = `test:${randomBytes(4).toString('hex')}:`;
    const env = { DATABASE_URL: database.url, REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: prefix };
    const relaying = await startTestApp(env);
    // No relay here: whatever its subscribers hear came through Redis from the other instance.
    const quiet = await startTestApp({ ...env, WORKER: 'off' });
    const redis = new Redis(REDIS_URL!);
    try {
      const shop = await relaying.shop('Scaled');
      const other = await relaying.shop('Elsewhere');
      await relaying.customer(shop.shopId, 's-1');
      await relaying.customer(other.shopId, 'o-1');
      const channel = `${prefix}events:${shop.shopId}`;

      const client = wsClient(quiet.url, shop.apiKey);
      const onQuiet = collect(client, EVENTS, { topics: ['points/*'] });
      const otherClient = wsClient(quiet.url, other.apiKey);
      const onQuietOther = collect(otherClient, EVENTS, { topics: ['points/*'] });
      const onRelaying = await sse(relaying.url, shop.apiKey, EVENTS, { topics: ['points/added'] });
      await until(async () => ((await redis.pubsub('NUMSUB', channel)) as [string, number])[1] === 2, 10_000, 'both instances on the channel');

      const viaQuiet = await quiet.post('/rest-api/v1/points/add', { customerIdentifier: 's-1', amount: 11 }, shop.apiKey);
      expect(viaQuiet.status).toBe(200);
      const viaRelaying = await relaying.post('/rest-api/v1/points/add', { customerIdentifier: 's-1', amount: 22 }, shop.apiKey);
      expect(viaRelaying.status).toBe(200);
      await quiet.post('/rest-api/v1/points/add', { customerIdentifier: 'o-1', amount: 5 }, other.apiKey);

      await until(() => onQuiet.results.length === 2 && onRelaying.events.length === 2 && onQuietOther.results.length === 1, 10_000, 'events on both');
      expect(onQuiet.results.map((r) => r.data.events.data.newPoints)).toEqual([11, 33]);
      expect(onRelaying.events.map((e) => e.data.data.events.data.newPoints)).toEqual([11, 33]);
      expect(onQuietOther.results[0]!.data.events).toMatchObject({ shopId: other.shopId, data: { newPoints: 5 } });
      expect(onQuiet.results[0]!.data.events).toEqual(onRelaying.events[0]!.data.data.events); // one envelope, both ways

      onQuiet.stop();
      onRelaying.close();
      await until(async () => ((await redis.pubsub('NUMSUB', channel)) as [string, number])[1] === 0, 10_000, 'channel released');
      await Promise.all([client.dispose(), otherClient.dispose()]);
    } finally {
      redis.disconnect();
      await quiet.stop();
      await relaying.stop();
      await database.drop();
    }
  });

  it('counts a shop\'s subscriptions across instances against SUBSCRIPTIONS_PER_SHOP', async () => {
    const database = await isolatedPostgresUrl();
    const prefix = `test:${randomBytes(4).toString('hex')}:`;
    const env = { DATABASE_URL: database.url, REDIS_URL: REDIS_URL!, REDIS_KEY_PREFIX: prefix, SUBSCRIPTIONS_PER_SHOP: '2' };
    const one = await startTestApp(env);
    const two = await startTestApp(env);
    const redis = new Redis(REDIS_URL!);
    try {
      const shop = await one.shop('Limited everywhere');
      const onOne = wsClient(one.url, shop.apiKey);
      const onTwo = wsClient(two.url, shop.apiKey);
      const first = collect(onOne, EVENTS, { topics: ['points/*'] });
      const second = await sse(two.url, shop.apiKey, EVENTS, { topics: ['points/*'] });
      await until(() => one.app.bus.stats().subscriptions === 1 && two.app.bus.stats().subscriptions === 1, 10_000, 'one on each');
      const third = collect(onTwo, EVENTS, { topics: ['points/*'] });
      await until(() => third.completed, 5_000, 'refusal on the second instance');
      expect(third.results[0]!.errors![0]!.extensions!.code).toBe('subscription_limit_reached');

      first.stop(); // frees a slot on instance one, usable from instance two
      await until(() => one.app.bus.stats().subscriptions === 0, 5_000, 'released');
      const fourth = collect(onTwo, EVENTS, { topics: ['points/*'] });
      await until(() => two.app.bus.stats().subscriptions === 2, 10_000, 'reopened on two');
      expect(fourth.results).toEqual([]);
      second.close();
      await Promise.all([onOne.dispose(), onTwo.dispose()]);
      await until(async () => (await redis.zcard(`${prefix}live-subscriptions:${shop.shopId}`)) === 0, 5_000, 'Redis slots released');
    } finally {
      redis.disconnect();
      await two.stop();
      await one.stop();
      await database.drop();
    }
  });
});

describe.skipIf(!REDIS_URL)('the Redis bus', () => {
  it('keeps serving through a Redis outage: subscriptions still open, events resume when Redis is back', async () => {
    const port = await freePort();
    let redisServer = await startRedis(port);
    const app = await startTestApp({ REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_KEY_PREFIX: 'outage:' });
    try {
      const shop = await app.shop('Outage');
      await app.customer(shop.shopId, 'x-1');
      const shopClient = wsClient(app.url, shop.apiKey);
      const before = collect(shopClient, EVENTS, { topics: ['points/*'] });
      await until(() => app.app.bus.stats().subscriptions === 1, 10_000, 'subscribed');
      await addPointsOn(app, shop, 'x-1', 1);
      await until(() => before.results.length === 1, 10_000, 'an event through Redis');

      redisServer.kill('SIGKILL');
      await once(redisServer, 'exit');
      await addPointsOn(app, shop, 'x-1', 1); // committed and acknowledged; heard only on this instance
      const during = collect(shopClient, EVENTS, { topics: ['points/*'] });
      await until(() => app.app.bus.stats().subscriptions === 2, 10_000, 'a subscription accepted without Redis');

      redisServer = await startRedis(port);
      // Once the bus has re-subscribed, events flow to both again.
      await until(async () => {
        await addPointsOn(app, shop, 'x-1', 1);
        await new Promise((r) => setTimeout(r, 200));
        return during.results.length > 0;
      }, 20_000, 'events after Redis came back');
      expect(before.results.length).toBeGreaterThan(1);
      await shopClient.dispose();
    } finally {
      await app.stop();
      redisServer.kill('SIGKILL');
    }
  });
});

async function addPointsOn(app: TestApp, shop: { apiKey: string }, customerIdentifier: string, amount: number) {
  const res = await app.post('/rest-api/v1/points/add', { customerIdentifier, amount }, shop.apiKey);
  expect(res.status).toBe(200);
}

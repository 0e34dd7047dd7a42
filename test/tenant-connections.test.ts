// Connections one shop, or one client, may hold (DESIGN.md "Tenant isolation", Connections):
// a request deadline, refusal before the body without a valid key, a per-shop cap on graphql-ws
// sockets, and revocation ending what a key holds open. On PGlite with one instance; with
// TEST_DATABASE_URL and TEST_REDIS_URL also across two instances on one PostgreSQL and one Redis.
import { randomBytes } from 'node:crypto';
import { connect } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { API_KEY_CACHE_TTL_MS, createApiKey, revokeApiKey } from '../src/domain/shops/shops.js';
import { onPostgres, startTestApp, startTwoInstances, type TestApp } from './helpers.js';
import { collect, sse, until, wsClient } from './live-helpers.js';

const REDIS_URL = process.env.TEST_REDIS_URL;
const busEnv = (): Record<string, string> => (REDIS_URL ? { REDIS_URL, REDIS_KEY_PREFIX: `test:${randomBytes(4).toString('hex')}:` } : {});
const EVENTS = 'subscription { events(topics: ["points/*"]) { id type } }';

type RawAnswer = { text: string; status: number; answeredMs: number; closedMs: number };

/**
 * Writes `head` (and `body`, if any) on a raw socket and never sends more; resolves once the
 * server closes the connection, with what it answered and when (ms after connecting).
 */
function raw(baseUrl: string, head: string, body = ''): Promise<RawAnswer> {
  const { port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const started = Date.now();
    let text = '';
    let answeredMs = -1;
    const socket = connect(Number(port), '127.0.0.1', () => socket.write(head + body));
    socket.on('data', (chunk) => {
      if (answeredMs < 0) answeredMs = Date.now() - started;
      text += chunk.toString();
    });
    socket.on('error', () => {}); // a reset after the answer still ends the exchange
    socket.on('close', () => resolve({ text, status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), answeredMs, closedMs: Date.now() - started }));
    setTimeout(() => {
      socket.destroy();
      reject(new Error(`no close within 20 s; got: ${text.slice(0, 200)}`));
    }, 20_000).unref();
  });
}

const jsonOf = (answer: RawAnswer) => JSON.parse(answer.text.slice(answer.text.indexOf('\r\n\r\n') + 4));

/** A graphql-ws socket that sends connection_init and resolves on the ack or on its close. */
function openSocket(baseUrl: string, apiKey: string): Promise<{ socket: WebSocket; acked: boolean; closed: Promise<{ code: number; reason: string }> }> {
  const socket = new WebSocket(`${baseUrl.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
  const closed = new Promise<{ code: number; reason: string }>((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  return new Promise((resolve, reject) => {
    socket.once('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { Authorization: `Bearer ${apiKey}` } })));
    socket.once('message', (data) => {
      if (JSON.parse(data.toString()).type === 'connection_ack') resolve({ socket, acked: true, closed });
    });
    void closed.then(() => resolve({ socket, acked: false, closed }));
    socket.once('error', reject);
  });
}

describe('the request deadline (REQUEST_TIMEOUT_MS)', () => {
  let t: TestApp;
  let shop: { shopId: string; apiKey: string };
  beforeAll(async () => {
    t = await startTestApp({ REQUEST_TIMEOUT_MS: '1000' });
    shop = await t.shop();
    await t.customer(shop.shopId, 'slow-1', 0);
  });
  afterAll(() => t?.stop());

  it('answers a body that stops arriving with 408 and closes its connection; the server serves on', async () => {
    const head =
      'POST /rest-api/v1/points/add HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
      `Authorization: Bearer ${shop.apiKey}\r\nContent-Length: 100\r\n\r\n`;
    const [slow, headersOnly] = await Promise.all([
      raw(t.url, head, '{"customerIdentifier":'),
      // Headers that never end are held no longer than a body.
      raw(t.url, 'POST /rest-api/v1/points/add HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n'),
    ]);
    for (const answer of [slow, headersOnly]) {
      expect(answer.status).toBe(408);
      expect(jsonOf(answer)).toMatchObject({ success: false, statusCode: 408, error: 'request_timeout' });
      // The deadline, plus Node's check interval (a second here) and some slack for a busy machine.
      expect(answer.closedMs).toBeGreaterThanOrEqual(900);
      expect(answer.closedMs).toBeLessThan(8_000);
    }
    expect((await fetch(`${t.url}/healthz`)).status).toBe(200);
    const res = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'slow-1', amount: 3 }, shop.apiKey);
    expect(res.status).toBe(200);
    expect((await res.json()).activity.newPoints).toBe(3); // the cut request changed nothing
  });
});

describe('one instance', () => {
  let t: TestApp;
  let shop: { shopId: string; apiKey: string };
  beforeAll(async () => {
    t = await startTestApp({ ...busEnv(), WEBSOCKETS_PER_SHOP: '2' });
    shop = await t.shop('Shop');
    await t.customer(shop.shopId, 'c-1', 0);
  });
  afterAll(() => t?.stop());

  it('refuses a missing or invalid key with 401 before reading the body, on REST and /graphql', async () => {
    // The default deadline is 30 s: an answer within a few is one that did not wait for the body.
    const announce = (path: string, authorization?: string) =>
      raw(
        t.url,
        `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 500000\r\n` +
          `${authorization ? `Authorization: ${authorization}\r\n` : ''}\r\n`,
      );
    for (const authorization of [undefined, 'Bearer lk_aaaaaaaaaa_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'Basic x']) {
      const rest = await announce('/rest-api/v1/points/add', authorization);
      expect(rest.status).toBe(401);
      expect(rest.text).toMatch(/\r\nwww-authenticate: Bearer\r\n/i);
      expect(jsonOf(rest)).toMatchObject({ success: false, statusCode: 401, error: 'unauthorized' });
      expect(rest.closedMs).toBeLessThan(10_000);

      const gql = await announce('/graphql', authorization);
      expect(gql.status).toBe(401);
      expect(gql.text).toMatch(/\r\nwww-authenticate: Bearer\r\n/i);
      expect(jsonOf(gql)).toEqual({ errors: [{ message: expect.stringContaining('API key'), extensions: { code: 'unauthorized' } }] });
      expect(gql.closedMs).toBeLessThan(10_000);
    }
    // GraphiQL's page stays open without a key.
    const page = await fetch(`${t.url}/graphql`, { headers: { accept: 'text/html' } });
    expect(page.status).toBe(200);
    expect(page.headers.get('content-type')).toContain('text/html');
  });

  it('caps graphql-ws sockets per shop (WEBSOCKETS_PER_SHOP): one more is closed with 1008 socket_limit_reached', async () => {
    const capped = await t.shop('Capped');
    const other = await t.shop('Other');
    const first = await openSocket(t.url, capped.apiKey);
    const second = await openSocket(t.url, capped.apiKey);
    expect([first.acked, second.acked]).toEqual([true, true]);
    const third = await openSocket(t.url, capped.apiKey);
    expect(third.acked).toBe(false);
    expect(await third.closed).toEqual({ code: 1008, reason: expect.stringMatching(/^socket_limit_reached/) });
    // Another shop is not affected; a closed socket frees its slot.
    const elsewhere = await openSocket(t.url, other.apiKey);
    expect(elsewhere.acked).toBe(true);
    first.socket.close();
    await first.closed;
    await until(async () => {
      const again = await openSocket(t.url, capped.apiKey);
      if (again.acked) again.socket.close();
      return again.acked;
    }, 5_000, 'a freed slot');
    for (const s of [second, elsewhere]) s.socket.close();
  });

  it('ends a revoked key\'s subscriptions (graphql-ws and SSE) and sockets within 2 s; other keys keep theirs', async () => {
    const { shopId, apiKey: revoked } = await t.shop('Revoking');
    await t.customer(shopId, 'r-1', 0);
    const { apiKey: kept } = await createApiKey(t.app.database.db, shopId);
    let closedWith: number | undefined;
    const client = wsClient(t.url, revoked, { onClose: (code) => (closedWith ??= code) });
    const overWs = collect(client, EVENTS);
    const overSse = await sse(t.url, revoked, EVENTS);
    const keptClient = wsClient(t.url, kept);
    const keeps = collect(keptClient, EVENTS);
    await until(() => t.app.bus.stats().subscriptions === 3, 10_000, 'three subscriptions');

    const prefix = revoked.slice(0, 13);
    const started = Date.now();
    const res = await t.graphql(kept, 'mutation($p: String!) { apiKeyRevoke(input: { prefix: $p }) { apiKey { active } userErrors { code } } }', { p: prefix });
    expect(res.data.apiKeyRevoke).toEqual({ apiKey: { active: false }, userErrors: [] });
    await until(() => closedWith !== undefined && overWs.completed && t.app.bus.stats().subscriptions === 1, 2_000, 'the revoked key\'s subscriptions ended');
    await overSse.ended;
    console.log(`one instance: the revoked key's subscriptions and socket ended ${Date.now() - started} ms after apiKeyRevoke was sent`);
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(closedWith).toBe(4403);

    // No event reaches the revoked key's streams any more; the other key still hears them.
    await t.post('/rest-api/v1/points/add', { customerIdentifier: 'r-1', amount: 1 }, kept);
    await until(() => keeps.results.length === 1, 10_000, 'the kept key hears the event');
    expect(overWs.results).toEqual([]);
    expect(overSse.events.filter((e) => e.event === 'next')).toEqual([]);
    expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 'r-1', amount: 1 }, revoked)).status).toBe(401);
    // A subscription authenticated just before the revocation and registered after it is refused.
    const { id } = await t.app.database.db.selectFrom('api_keys').select('id').where('prefix', '=', revoked.slice(3, 13)).executeTakeFirstOrThrow();
    await expect(t.app.bus.subscribe({ shopId, apiKeyId: id })).rejects.toMatchObject({ code: 'api_key_revoked' });
    expect(t.app.bus.stats().subscriptions).toBe(1);
    await keptClient.dispose();
  });

  it('ends the subscriptions and sockets of a key revoked where no bus reaches (as the CLI does) within 2 s', async () => {
    const { shopId, apiKey } = await t.shop('Revoked elsewhere');
    let closedWith: number | undefined;
    const client = wsClient(t.url, apiKey, { onClose: (code) => (closedWith ??= code) });
    const overWs = collect(client, EVENTS);
    const overSse = await sse(t.url, apiKey, EVENTS);
    await until(() => t.app.bus.stats().subscriptions === 2, 10_000, 'two subscriptions');
    const started = Date.now();
    // The CLI's call: a write to the database that announces nothing on the event bus.
    await revokeApiKey(t.app.database.db, shopId, apiKey.slice(0, 13));
    await until(() => closedWith !== undefined && overWs.completed && t.app.bus.stats().subscriptions === 0, 2_000, 'the revoked key\'s subscriptions ended');
    await overSse.ended;
    console.log(`revoked without the bus: subscriptions and socket ended ${Date.now() - started} ms after the revocation`);
    expect(closedWith).toBe(4403);
  });

  it('knows the key over graphql-ws: a key cannot revoke itself there either, and apiKeys marks it current', async () => {
    const { shopId, apiKey } = await t.shop('Self');
    const { apiKey: other } = await createApiKey(t.app.database.db, shopId);
    const client = wsClient(t.url, apiKey);
    const run = async (query: string, variables?: Record<string, unknown>) => {
      const op = collect(client, query, variables);
      await until(() => op.completed, 10_000, 'the operation');
      return op.results[0]!;
    };
    const keys = await run('{ apiKeys { prefix current } }');
    expect(keys.data.apiKeys).toEqual(
      expect.arrayContaining([{ prefix: apiKey.slice(0, 13), current: true }, { prefix: other.slice(0, 13), current: false }]),
    );
    const self = await run('mutation($p: String!) { apiKeyRevoke(input: { prefix: $p }) { apiKey { active } userErrors { code } } }', { p: apiKey.slice(0, 13) });
    expect(self.data.apiKeyRevoke).toEqual({ apiKey: null, userErrors: [{ code: 'api_key_in_use' }] });
    expect((await t.graphql(apiKey, '{ shop { id } }')).data.shop.id).toBe(shopId);
    await client.dispose();
  });
});

describe.skipIf(!onPostgres || !REDIS_URL)('two instances on PostgreSQL + Redis', () => {
  let instances: Awaited<ReturnType<typeof startTwoInstances>>;
  let one: TestApp;
  let two: TestApp;
  let prefix: string;
  beforeAll(async () => {
    instances = await startTwoInstances({ WEBSOCKETS_PER_SHOP: '2' });
    ({ one, two, redisPrefix: prefix } = instances);
  });
  afterAll(async () => {
    await instances?.stop();
  });

  it('counts a shop\'s graphql-ws sockets across instances against WEBSOCKETS_PER_SHOP', async () => {
    const shop = await one.shop('Capped everywhere');
    const onOne = await openSocket(one.url, shop.apiKey);
    const onTwo = await openSocket(two.url, shop.apiKey);
    expect([onOne.acked, onTwo.acked]).toEqual([true, true]);
    const third = await openSocket(one.url, shop.apiKey);
    expect(third.acked).toBe(false);
    expect((await third.closed).code).toBe(1008);
    onTwo.socket.close();
    await onTwo.closed;
    const redis = new Redis(REDIS_URL!);
    try {
      await until(async () => (await redis.zcard(`${prefix}websockets:${shop.shopId}`)) === 1, 5_000, 'the slot released in Redis');
    } finally {
      redis.disconnect();
    }
    const fourth = await openSocket(one.url, shop.apiKey);
    expect(fourth.acked).toBe(true);
    for (const s of [onOne, fourth]) s.socket.close();
  });

  it('a revocation on one instance ends the key\'s subscriptions and sockets on the other within 2 s, and its key cache forgets it', async () => {
    const { shopId, apiKey: revoked } = await one.shop('Revoked everywhere');
    await one.customer(shopId, 'x-1', 0);
    const { apiKey: kept } = await createApiKey(one.app.database.db, shopId);
    let closedWith: number | undefined;
    const client = wsClient(two.url, revoked, { onClose: (code) => (closedWith ??= code) });
    const overWs = collect(client, EVENTS);
    const overSse = await sse(two.url, revoked, EVENTS);
    const bare = await openSocket(two.url, revoked); // a socket without subscriptions
    await until(() => two.app.bus.stats().subscriptions === 2, 10_000, 'two subscriptions on instance two');

    // Instance two has the key cached now: without the bus it would trust it for API_KEY_CACHE_TTL_MS.
    expect((await two.post('/rest-api/v1/points/add', { customerIdentifier: 'x-1', amount: 1 }, revoked)).status).toBe(200);
    const cachedAt = Date.now();
    const res = await one.graphql(kept, 'mutation($p: String!) { apiKeyRevoke(input: { prefix: $p }) { userErrors { code } } }', { p: revoked.slice(0, 13) });
    const revokedAt = Date.now();
    expect(res.data.apiKeyRevoke.userErrors).toEqual([]);

    await until(
      async () => (await two.post('/rest-api/v1/points/add', { customerIdentifier: 'x-1', amount: 1 }, revoked)).status === 401,
      API_KEY_CACHE_TTL_MS,
      'instance two refusing the key',
    );
    expect(Date.now() - cachedAt).toBeLessThan(API_KEY_CACHE_TTL_MS);
    await until(() => closedWith !== undefined && overWs.completed && two.app.bus.stats().subscriptions === 0, 2_000, 'subscriptions ended on instance two');
    await overSse.ended;
    expect(await bare.closed).toEqual({ code: 4403, reason: expect.stringContaining('revoked') });
    console.log(`two instances: ended on the other instance ${Date.now() - revokedAt} ms after apiKeyRevoke answered`);
    expect(Date.now() - revokedAt).toBeLessThan(2_000);
    expect(closedWith).toBe(4403);
    expect((await one.post('/rest-api/v1/points/add', { customerIdentifier: 'x-1', amount: 1 }, kept)).status).toBe(200);
  });
});

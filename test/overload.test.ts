import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { freePort, isolatedPostgresUrl, onPostgres, startTestApp, type TestApp } from './helpers.js';

/** Balance, ledger sum and ledger length of one customer: the first two must always agree. */
async function ledgerOf(t: TestApp, shopId: string, customer: string) {
  const db = t.app.database.db;
  const row = await db
    .selectFrom('customers')
    .select(['id', 'points'])
    .where('shop_id', '=', shopId)
    .where('shopify_customer_id', '=', customer)
    .executeTakeFirstOrThrow();
  const ledger = await db
    .selectFrom('activities')
    .select([(eb) => eb.fn.countAll<number>().as('entries'), (eb) => eb.fn.sum<number>(eb('new_points', '-', eb.ref('old_points'))).as('sum')])
    .where('customer_id', '=', row.id)
    .executeTakeFirstOrThrow();
  return { points: row.points, entries: Number(ledger.entries), sum: Number(ledger.sum ?? 0) };
}

const POINTS_ADD_HOT = 'mutation { pointsAdd(input: { customerIdentifier: "hot", amount: 1 }) { activity { _id } } }';

describe.skipIf(!onPostgres)('overload shedding (PostgreSQL)', () => {
  it('answers 503 overloaded with Retry-After at once when the pool queue is full, loses nothing, and recovers', async () => {
    const HOLD_MS = 4_000;
    const REQUESTS = 300;
    const schema = await isolatedPostgresUrl();
    // Two connections and four queued requests at most; a queued one may wait longer than the hold.
    const t = await startTestApp({
      DATABASE_URL: schema.url,
      DATABASE_POOL_SIZE: '2',
      DATABASE_POOL_MAX_WAITING: '4',
      DATABASE_POOL_ACQUIRE_TIMEOUT_MS: '20000',
      RATE_LIMIT_PER_MINUTE: '100000',
    });
    const holder = new pg.Client({ connectionString: schema.url });
    const watcher = new pg.Client({ connectionString: schema.url });
    try {
      // The setup is not what is under test: at start the app's own background work (relay, due
      // work, syncs, purges) may fill this tiny pool's queue for a moment, and a setup query is shed.
      const settled = async <T>(f: () => Promise<T>): Promise<T> => {
        for (let tries = 0; ; tries++) {
          try {
            return await f();
          } catch (err) {
            if (tries >= 50 || !String(err).includes('connections are busy')) throw err;
            await sleep(100);
          }
        }
      };
      const { shopId, apiKey } = await settled(() => t.shop());
      await settled(() => t.customer(shopId, 'hot'));
      const add = () => t.post('/rest-api/v1/points/add', { customerIdentifier: 'hot', amount: 1 }, apiKey);
      expect((await add()).status).toBe(200); // warms the key and rate-limit caches

      // Another client holds the customer's row lock: every points/add that gets a connection
      // waits on it, so the two connections stay busy and the queue fills.
      await holder.connect();
      await watcher.connect();
      await holder.query('begin');
      await holder.query(`select 1 from customers where shop_id = $1 and shopify_customer_id = 'hot' for update`, [shopId]);
      const calls = Array.from({ length: REQUESTS }, async () => {
        const started = performance.now();
        const res = await t.post('/rest-api/v1/points/add', { customerIdentifier: 'hot', amount: 1 }, apiKey, {}).catch((err: Error) => err);
        if (res instanceof Error) return { status: 0, ms: performance.now() - started, retryAfter: null, body: res.message };
        return { status: res.status, ms: performance.now() - started, retryAfter: res.headers.get('retry-after'), body: await res.json() };
      });
      // GraphQL is shed the same way once the queue is full: a 503 with Retry-After, not a masked
      // error in a 200. (Not awaited here: were it queued instead, it would wait for the lock.)
      // Full means both connections wait on the holder's lock and four requests wait for them: a
      // connection busy with background work (the relay, due work) would free a place in the queue.
      const holderPid = (await holder.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
      // Asked on another connection: inside the holder's transaction pg_stat_activity would not change.
      const blockedByHolder = async () =>
        Number((await watcher.query('select count(*) as n from pg_stat_activity where $1 = any(pg_blocking_pids(pid))', [holderPid])).rows[0].n);
      const full = Date.now() + HOLD_MS / 2;
      while ((t.app.database.poolStats!().waiting < 4 || (await blockedByHolder()) < 2) && Date.now() < full) await sleep(10);
      const gql = t.post('/graphql', { query: POINTS_ADD_HOT }, apiKey);
      await sleep(HOLD_MS / 2);
      // Busy is not unreachable: the probe is shed too, and readiness stays up.
      expect((await fetch(`${t.url}/readyz`)).status).toBe(200);

      await sleep(HOLD_MS / 2);
      await holder.query('commit');
      const results = await Promise.all(calls);
      const gqlRes = await gql;
      expect(gqlRes.status).toBe(503);
      expect(gqlRes.headers.get('retry-after')).toBe('1');
      // Shed by the resolver's statement (GraphQL errors), or by the key lookup if its cache expired (the envelope).
      const gqlBody = await gqlRes.json();
      expect(gqlBody.errors?.[0]?.extensions?.code ?? gqlBody.error).toBe('overloaded');

      const ok = results.filter((r) => r.status === 200);
      const shed = results.filter((r) => r.status === 503);
      // Every request was answered, 200 or 503: no timeouts, no 500s.
      expect(results.filter((r) => r.status !== 200 && r.status !== 503)).toEqual([]);
      expect(ok.length).toBeGreaterThanOrEqual(1);
      expect(shed.length).toBeGreaterThan(REQUESTS / 2);
      for (const r of shed) {
        expect(r.retryAfter).toBe('1');
        expect(r.body).toMatchObject({ success: false, statusCode: 503, error: 'overloaded' });
        // Shed without waiting for the database: answered while the lock was still held.
        expect(r.ms).toBeLessThan(HOLD_MS);
      }

      // Exactly the acknowledged changes are in the ledger (one more for the warm-up call).
      const ledger = await ledgerOf(t, shopId, 'hot');
      expect(ledger).toEqual({ points: ok.length + 1, entries: ok.length + 1, sum: ok.length + 1 });

      // The server is well afterwards: ready, serving, nothing left queued.
      expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
      expect((await add()).status).toBe(200);
      const metrics = await (await fetch(`${t.url}/metrics`)).text();
      expect(metrics).toMatch(/^loyalty_db_pool_waiting_requests 0$/m);
      expect(metrics).toContain(`loyalty_http_requests_total{method="POST",route="/rest-api/v1/points/add",status="503"} ${shed.length}`);
    } finally {
      await holder.end().catch(() => {});
      await watcher.end().catch(() => {});
      await t.stop();
    }
  }, 60_000);

  it('goes unready and answers 503 fast while the database is unreachable, and comes back', async () => {
    // A TCP proxy in front of PostgreSQL that the test can cut and restore (the machine's
    // PostgreSQL is shared and never stopped).
    const target = new URL(process.env.TEST_DATABASE_URL!);
    const port = await freePort();
    const sockets = new Set<net.Socket>();
    const startProxy = async () => {
      const proxy = net.createServer((client) => {
        const upstream = net.connect(Number(target.port || 5432), target.hostname);
        for (const s of [client, upstream]) {
          sockets.add(s);
          s.on('error', () => {});
          s.on('close', () => {
            sockets.delete(s);
            client.destroy();
            upstream.destroy();
          });
        }
        client.pipe(upstream).pipe(client);
      });
      proxy.listen(port, '127.0.0.1');
      await once(proxy, 'listening');
      return proxy;
    };
    let proxy = await startProxy();
    const schema = await isolatedPostgresUrl();
    const viaProxy = new URL(schema.url);
    viaProxy.host = `127.0.0.1:${port}`;
    // No relay or worker: their loops would log every failed poll while the database is away.
    const t = await startTestApp({ DATABASE_URL: viaProxy.toString(), WORKER: 'off', DATABASE_POOL_ACQUIRE_TIMEOUT_MS: '1000' });
    try {
      const { shopId, apiKey } = await t.shop();
      await t.customer(shopId, 'c-1');
      const add = () => t.post('/rest-api/v1/points/add', { customerIdentifier: 'c-1', amount: 1 }, apiKey);
      expect((await add()).status).toBe(200);

      proxy.close();
      for (const s of sockets) s.destroy();
      await sleep(100);
      const ready = await fetch(`${t.url}/readyz`);
      expect(ready.status).toBe(503);
      expect(await ready.json()).toMatchObject({ success: false, error: 'not_ready' });
      // The key is still cached, so GraphQL reaches its resolver, whose database call fails: 503 too.
      const gql = await t.post('/graphql', { query: 'mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: 1 }) { activity { _id } } }' }, apiKey);
      expect(gql.status).toBe(503);
      expect(gql.headers.get('retry-after')).toBe('5');
      expect((await gql.json()).errors[0].extensions.code).toBe('service_unavailable');
      await sleep(2_100); // the cached API key expires: the request needs the database again
      const started = performance.now();
      const res = await add();
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).not.toBeNull();
      expect(await res.json()).toMatchObject({ success: false, statusCode: 503, error: 'service_unavailable' });
      expect(performance.now() - started).toBeLessThan(3_000);

      proxy = await startProxy();
      const deadline = Date.now() + 10_000;
      while ((await fetch(`${t.url}/readyz`)).status !== 200) {
        if (Date.now() > deadline) throw new Error('not ready again after the database came back');
        await sleep(100);
      }
      expect((await add()).status).toBe(200);
      expect(await ledgerOf(t, shopId, 'c-1')).toEqual({ points: 2, entries: 2, sum: 2 });
    } finally {
      await t.stop();
      proxy.close();
      for (const s of sockets) s.destroy();
    }
  }, 60_000);
});

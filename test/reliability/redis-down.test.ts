/**
 * Redis goes down and comes back: the service stays up and reconnects by itself.
 *
 * A throwaway redis-server of the test's own (the machine's Redis is never touched) backs the
 * rate limits and the live-event bus of a server process; it is killed with SIGKILL, then started
 * again on the same port. It proves, while Redis is down: writes are still served, quickly; rate
 * limits fall back to the server's memory and still refuse at the limit (a 429 at request 61 of
 * GET /webhooks/deliveries); a graphql-ws subscription on the instance stays open and keeps
 * hearing the writes made on it; the process stays up. Once Redis is back: the limiter uses Redis
 * again (it logs so and its keys reappear there) and live events flow through Redis again. On
 * PostgreSQL (TEST_DATABASE_URL) a second instance on the same database (WORKER=off, so the first
 * relays every event) proves the limit is one shared limit again and that events cross instances
 * again. On PGlite it runs with one instance
 * (the demo shop of an empty DATA_DIR).
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort, onPostgres, startRedis } from '../helpers.js';
import { type Collected, collect, wsClient } from '../live-helpers.js';
import { addPoints, killAllServers, type ServerProcess, sharedDatabase, startServerProcess, waitUntil } from './processes.js';

const EVENTS = 'subscription { events(topics: ["points/*"]) { id type } }';

describe('Redis killed and restarted under a running server', () => {
  let port: number;
  let redis: ChildProcess;
  let shared: Awaited<ReturnType<typeof sharedDatabase>> | undefined;
  let dataDir: string | undefined;
  let servers: ServerProcess[] = [];
  let apiKey: string;
  let customer: string;
  const prefix = `test:${randomBytes(6).toString('hex')}:`;

  beforeAll(async () => {
    port = await freePort();
    redis = await startRedis(port);
    const env = { REDIS_URL: `redis://127.0.0.1:${port}`, REDIS_KEY_PREFIX: prefix, RATE_LIMIT_PER_MINUTE: '100000' };
    if (onPostgres) {
      shared = await sharedDatabase(3);
      apiKey = shared.apiKey;
      customer = 'c-0';
      // The second relays nothing (WORKER=off): the instance that commits an event is the one that
      // publishes it, so "the subscription on the writing instance hears it" is deterministic.
      servers = await Promise.all([
        startServerProcess({ ...env, DATABASE_URL: shared.url }),
        startServerProcess({ ...env, DATABASE_URL: shared.url, WORKER: 'off' }),
      ]);
    } else {
      // One process on PGlite: an empty DATA_DIR gets the demo shop, whose key is printed once.
      dataDir = mkdtempSync(path.join(tmpdir(), 'loyalty-redis-down-'));
      servers = [await startServerProcess({ ...env, DATA_DIR: dataDir })];
      apiKey = /(lk_[a-z0-9]{10}_[A-Za-z0-9]{40})/.exec(servers[0]!.output())![1]!;
      customer = 'demo-1001';
    }
  });
  afterAll(async () => {
    await killAllServers();
    redis?.kill('SIGKILL');
    await shared?.close();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  const deliveries = (server: ServerProcess) => fetch(`${server.url}/rest-api/v1/webhooks/deliveries`, { headers: { authorization: `Bearer ${apiKey}` } });

  /** Writes on `writer` until every subscription has heard one of them (the bus is live end to end). */
  async function untilHeard(writer: ServerProcess, subscriptions: Collected[], what: string) {
    const counts = subscriptions.map((s) => s.results.length);
    await waitUntil(
      async () => {
        expect((await addPoints(writer.url, apiKey, 'rest', customer)).status).toBe(200);
        await new Promise((r) => setTimeout(r, 200));
        return subscriptions.every((s, i) => s.results.length > counts[i]!);
      },
      20_000,
      what,
    );
  }

  it('serves, limits in memory and keeps live events on the instance while Redis is down; reconnects when it is back', { timeout: 180_000 }, async () => {
    const [a, b] = servers as [ServerProcess, ServerProcess | undefined];
    const clients = servers.map((s) => wsClient(s.url, apiKey));
    const subscriptions = clients.map((c) => collect(c, EVENTS));
    try {
      await untilHeard(a, subscriptions, 'every subscription to hear a write before Redis goes');

      redis.kill('SIGKILL');
      await once(redis, 'exit');

      // Writes are served, without waiting on Redis.
      const heardBefore = subscriptions[0]!.results.length;
      for (let i = 0; i < 20; i++) {
        const write = await addPoints(a.url, apiKey, i % 2 ? 'rest' : 'graphql', customer);
        expect(write.status).toBe(200);
        expect(write.ms).toBeLessThan(5_000);
      }
      // The subscription on the writing instance stays open and hears them.
      await waitUntil(() => subscriptions[0]!.results.length >= heardBefore + 20, 10_000, 'the 20 writes on the subscription of their instance');
      expect(subscriptions[0]!.completed).toBe(false);

      // Limits fall back to this server's memory, and still refuse at the limit: 60 a minute.
      const statuses: number[] = [];
      for (let i = 0; i < 70; i++) statuses.push((await deliveries(a)).status);
      expect(statuses.filter((s) => s === 200)).toHaveLength(60);
      expect(statuses.slice(60)).toEqual(Array(10).fill(429));
      expect(a.output()).toMatch(/Redis is unavailable/);
      expect((await fetch(`${a.url}/healthz`)).status).toBe(200);
      expect(a.child.exitCode).toBeNull();

      // Redis comes back on the same port, empty: each server finds it again by itself.
      redis = await startRedis(port);
      for (const server of servers) {
        await waitUntil(
          async () => {
            await fetch(`${server.url}/rest-api/v1/webhooks/topics`, { headers: { authorization: `Bearer ${apiKey}` } });
            // Only a server that noticed the outage (one that limited a request meanwhile) logs its end.
            return !/Redis is unavailable/.test(server.output()) || /Redis is back/.test(server.output());
          },
          30_000,
          'the limiter to use Redis again',
        );
      }
      const probe = new Redis(`redis://127.0.0.1:${port}`);
      try {
        await waitUntil(async () => (await probe.keys(`${prefix}*rl:*`)).length > 0, 5_000, 'rate-limit keys in the new Redis');
      } finally {
        probe.disconnect();
      }
      // Live events go through Redis again: a write on one instance reaches every subscription.
      await untilHeard(b ?? a, subscriptions, 'live events through the restarted Redis');

      if (b) {
        // One shared limit again: 30 a minute for /webhooks/subscriptions across both instances.
        const shared: number[] = [];
        for (let i = 0; i < 40; i++) {
          const server = i % 2 ? b : a;
          shared.push((await fetch(`${server.url}/rest-api/v1/webhooks/subscriptions`, { headers: { authorization: `Bearer ${apiKey}` } })).status);
        }
        expect(shared.filter((s) => s === 200)).toHaveLength(30);
        expect(shared.slice(30)).toEqual(Array(10).fill(429));
      }
      for (const s of subscriptions) expect(s.failure).toBeUndefined();
    } finally {
      for (const s of subscriptions) s.stop();
      await Promise.all(clients.map((c) => c.dispose()));
    }
  });
});

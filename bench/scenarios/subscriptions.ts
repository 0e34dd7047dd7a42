// Live events fan-out: 1,000 graphql-ws subscribers (one WebSocket each) on one server, then one
// points change at a time over REST; for each event, how long until every subscriber has it.
// Runs on the in-memory bus, and again on the Redis bus when BENCH_REDIS_URL / TEST_REDIS_URL is set.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Client, createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { openDatabase } from '../../src/db/database.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { processCpuSeconds } from '../lib/cpu.js';
import { percentile } from '../lib/load.js';
import { createIsolatedSchema } from '../lib/postgres.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';
import { startServer } from '../lib/server.js';
import { fmt, formatTable } from '../lib/table.js';

const SUBSCRIBERS = 1_000;
const EVENTS = 100;
const TARGET_ALL_MS = 250;
const OPEN_BATCH = 50;

type Round = { sentAt: number; ackAt: number; receipts: number[] };

async function seed(url: string): Promise<{ apiKey: string }> {
  const { db, close } = await openDatabase({ url, poolSize: 2 });
  try {
    const { shop, apiKey } = await createShop(db, 'Bench live events shop');
    await upsertCustomer(db, shop.id, { shopifyCustomerId: 'live-1', email: 'live-1@bench.example' });
    return { apiKey };
  } finally {
    await close();
  }
}

/** Opens the sockets and subscriptions; `onEvent(i, seq)` fires when subscriber i gets event seq. */
async function subscribe(baseUrl: string, apiKey: string, onEvent: (subscriber: number, newPoints: number) => void): Promise<Client[]> {
  const clients: Client[] = [];
  for (let i = 0; i < SUBSCRIBERS; i += OPEN_BATCH) {
    await Promise.all(
      Array.from({ length: Math.min(OPEN_BATCH, SUBSCRIBERS - i) }, async (_, j) => {
        const index = i + j;
        const client = createClient({
          url: `${baseUrl.replace(/^http/, 'ws')}/graphql`,
          webSocketImpl: WebSocket,
          connectionParams: { Authorization: `Bearer ${apiKey}` },
          lazy: false,
          retryAttempts: 0,
          onNonLazyError: (err) => process.stderr.write(`subscriber ${index}: ${String(err)}\n`),
        });
        clients[index] = client;
        await new Promise<void>((resolve, reject) => {
          const off = client.on('connected', () => {
            off();
            resolve();
          });
          client.on('closed', (e) => reject(new Error(`subscriber ${index} closed: ${(e as { code?: number }).code}`)));
        });
        client.subscribe<{ events: { data: { newPoints: number } } }>(
          { query: 'subscription { events(topics: ["points/added"]) { id data } }' },
          {
            next: (result) => {
              if (result.data) onEvent(index, result.data.events.data.newPoints);
              else process.stderr.write(`subscriber ${index}: ${JSON.stringify(result.errors)}\n`);
            },
            error: (err) => process.stderr.write(`subscriber ${index}: ${String(err)}\n`),
            complete: () => {},
          },
        );
      }),
    );
  }
  return clients;
}

type Result = { label: string; rounds: Round[]; missing: number; serverCpuMs: number | null; clientCpuMs: number | null };

async function runOnce(options: BenchOptions, redisUrl: string | undefined): Promise<Result> {
  const schema = await createIsolatedSchema(options.databaseUrl);
  const env: Record<string, string> = { SUBSCRIPTIONS_PER_SHOP: String(SUBSCRIBERS) };
  if (redisUrl) Object.assign(env, { REDIS_URL: redisUrl, REDIS_KEY_PREFIX: `bench:${randomBytes(4).toString('hex')}:` });
  const nodeArgs = options.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`] : [];
  const server = await startServer({ databaseUrl: schema.url, env, nodeArgs });
  let clients: Client[] = [];
  try {
    const { apiKey } = await seed(schema.url);
    // receivedAt[newPoints][subscriber]: each event is told apart by the balance it set.
    const receivedAt = new Map<number, number[]>();
    clients = await subscribe(server.url, apiKey, (subscriber, newPoints) => {
      let times = receivedAt.get(newPoints);
      if (!times) receivedAt.set(newPoints, (times = []));
      times[subscriber] = performance.now();
    });
    let balance = 0;
    const add = async () => {
      balance += 1;
      const sentAt = performance.now();
      const res = await fetch(`${server.url}/rest-api/v1/points/add`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ customerIdentifier: 'live-1', amount: 1 }),
      });
      if (res.status !== 200) throw new Error(`points/add answered ${res.status}: ${await res.text()}`);
      return { sentAt, ackAt: performance.now(), balance };
    };
    const everyoneHas = (b: number) => (receivedAt.get(b)?.filter((t) => t !== undefined).length ?? 0) === SUBSCRIBERS;
    // Warm-up, which also proves every subscription is live: events until all 1,000 have one.
    for (let tries = 0; ; tries++) {
      const { balance: b } = await add();
      await sleep(500);
      if (everyoneHas(b)) break;
      if (tries >= 20) throw new Error(`only ${receivedAt.get(b)?.length ?? 0} of ${SUBSCRIBERS} subscribers are receiving`);
    }
    const rounds: Round[] = [];
    let missing = 0;
    const cpuBefore = { server: processCpuSeconds(server.pid), client: processCpuSeconds('self') };
    for (let i = 0; i < EVENTS; i++) {
      const { sentAt, ackAt, balance: b } = await add();
      const deadline = performance.now() + 5_000;
      while (!everyoneHas(b) && performance.now() < deadline) await sleep(2);
      const times = (receivedAt.get(b) ?? []).filter((t) => t !== undefined);
      missing += SUBSCRIBERS - times.length;
      rounds.push({ sentAt, ackAt, receipts: times });
      await sleep(50); // one event at a time
    }
    // CPU per event: the server's (relay, fan-out, 1,000 socket writes) and this process's (1,000 clients).
    const perEvent = (after: number | null, before: number | null) => (after === null || before === null ? null : ((after - before) * 1000) / EVENTS);
    return {
      label: redisUrl ? 'Redis bus' : 'in-memory bus',
      rounds,
      missing,
      serverCpuMs: perEvent(processCpuSeconds(server.pid), cpuBefore.server),
      clientCpuMs: perEvent(processCpuSeconds('self'), cpuBefore.client),
    };
  } finally {
    await Promise.all(clients.map((c) => c?.dispose()));
    await server.stop();
    await schema.drop();
  }
}

async function run(options: BenchOptions): Promise<boolean> {
  const redisUrl = process.env.BENCH_REDIS_URL || process.env.TEST_REDIS_URL;
  const results = [await runOnce(options, undefined), ...(redisUrl ? [await runOnce(options, redisUrl)] : [])];
  const rows = results.map(({ label, rounds, missing, serverCpuMs, clientCpuMs }) => {
    // Per event: from the REST request being sent until the last subscriber has it, and from
    // its response (the commit acknowledged) until then; per delivery: from the request.
    const all = rounds.map((r) => Math.max(...r.receipts) - r.sentAt).sort((a, b) => a - b);
    const afterAck = rounds.map((r) => Math.max(...r.receipts) - r.ackAt).sort((a, b) => a - b);
    const first = rounds.map((r) => Math.min(...r.receipts) - r.sentAt).sort((a, b) => a - b);
    const each = rounds.flatMap((r) => r.receipts.map((t) => t - r.sentAt)).sort((a, b) => a - b);
    return {
      label,
      missing,
      cells: [
        label,
        fmt.ms(percentile(first, 50)),
        fmt.ms(percentile(each, 50)),
        fmt.ms(percentile(each, 99)),
        fmt.ms(percentile(all, 50)),
        fmt.ms(percentile(all, 90)),
        fmt.ms(percentile(all, 99)),
        fmt.ms(percentile(afterAck, 50)),
        serverCpuMs === null ? '-' : fmt.ms(serverCpuMs),
        clientCpuMs === null ? '-' : fmt.ms(clientCpuMs),
        missing,
        percentile(all, 99) < TARGET_ALL_MS ? 'met' : 'MISSED',
      ],
    };
  });
  process.stdout.write(
    [
      '',
      `subscriptions: ${SUBSCRIBERS} graphql-ws subscribers (one WebSocket each) on one server, ${EVENTS} events one at a time`,
      '(REST points/add; the server relays the committed event to the bus, the bus to every subscriber);',
      'times from sending the REST request, measured in this process, which also runs all 1,000 clients',
      '',
      formatTable(
        ['bus', 'first has it p50', 'each p50', 'each p99', 'all have it p50', 'all p90', 'all p99', 'all p50 from the reply', 'server CPU/event', 'clients CPU/event', 'missed', `all p99 < ${TARGET_ALL_MS} ms`],
        rows.map((r) => r.cells),
      ),
      '',
    ].join('\n'),
  );
  return rows.every((r) => r.missing === 0);
}

export const subscriptions: Scenario = {
  name: 'subscriptions',
  summary: '1,000 graphql-ws subscribers on one server: time until all have an event (p50/p99)',
  run,
};

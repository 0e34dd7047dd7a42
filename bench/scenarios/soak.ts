// Soak: mixed traffic for a while (60 s unless --duration says otherwise) with webhook
// subscriptions sending to a local HTTPS receiver and a live graphql-ws subscriber listening,
// sampling the server's own /metrics every couple of seconds. Prints throughput, p99, RSS at the
// start, peak and end, event-loop lag, and whether RSS kept growing in the second half; then
// checks the ledger, that every webhook was delivered and that the subscriber heard every event.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import autocannon from 'autocannon';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { openDatabase } from '../../src/db/database.js';
import { changePoints } from '../../src/domain/ledger/points.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createPointsRedemption } from '../../src/domain/rewards/redemptions.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { connect, createIsolatedSchema } from '../lib/postgres.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';
import { startServer } from '../lib/server.js';
import { fmt, formatTable } from '../lib/table.js';
import { certificate, startReceiver } from './webhooks.js';

const DEFAULT_DURATION_SEC = 60;
const SAMPLE_EVERY_MS = 2_000;
/** RSS may rise by at most this share between the two quarters of the second half (peak to peak). */
const MAX_SECOND_HALF_GROWTH = 0.05;
const OPENING_BALANCE = 1_000_000;
const FIRST_CUSTOMER = 300_001;
const WEBHOOK_TOPICS = ['points/*', 'points/added', 'redemptions/created'];

type Sample = { at: number; rss: number; heapUsed: number; lagP99: number };

/** One sample of a Prometheus text exposition: the first line of `name` without labels. */
function gauge(text: string, name: string): number {
  const match = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return match ? Number(match[1]) : Number.NaN;
}

async function sample(url: string, started: number): Promise<Sample> {
  const text = await (await fetch(`${url}/metrics`)).text();
  return {
    at: (performance.now() - started) / 1000,
    rss: gauge(text, 'process_resident_memory_bytes'),
    heapUsed: gauge(text, 'nodejs_heap_size_used_bytes'),
    // prom-client resets the event-loop histogram at each scrape: this is the lag since the last sample.
    lagP99: gauge(text, 'nodejs_eventloop_lag_p99_seconds') * 1000,
  };
}

async function seed(url: string, customers: number) {
  const { db, close } = await openDatabase({ url, poolSize: 8 });
  try {
    const { shop, apiKey } = await createShop(db, 'Bench soak shop');
    for (let i = 0; i < 10; i++) {
      await createPointsRedemption(db, shop.id, { name: `$${i + 1} off`, type: 'amount', discountPrefix: `S${i}-`, rewardValue: 100 * (i + 1), discountValue: i + 1 });
    }
    const ids = Array.from({ length: customers }, (_, i) => String(FIRST_CUSTOMER + i));
    for (let i = 0; i < ids.length; i += 8) {
      await Promise.all(
        ids.slice(i, i + 8).map(async (id) => {
          await upsertCustomer(db, shop.id, { shopifyCustomerId: id, email: `s${id}@bench.example` });
          await changePoints(db, shop.id, 'set', { customerIdentifier: id, amount: OPENING_BALANCE });
        }),
      );
    }
    return { apiKey, shopId: shop.id };
  } finally {
    await close();
  }
}

/** Waits until the relay has published everything committed so far (the seed's events, say). */
async function untilRelayed(url: string, timeoutMs: number): Promise<boolean> {
  const client = await connect(url);
  try {
    const deadline = Date.now() + timeoutMs;
    while (Number((await client.query('select count(*) from outbox_events where relayed_at is null')).rows[0].count) > 0) {
      if (Date.now() > deadline) return false;
      await sleep(100);
    }
    return true;
  } finally {
    await client.end();
  }
}

/** Least-squares slope of RSS over time, in MiB per minute. */
function slopeMiBPerMin(samples: Sample[]): number {
  const n = samples.length;
  if (n < 2) return Number.NaN;
  const mx = samples.reduce((a, s) => a + s.at, 0) / n;
  const my = samples.reduce((a, s) => a + s.rss, 0) / n;
  const num = samples.reduce((a, s) => a + (s.at - mx) * (s.rss - my), 0);
  const den = samples.reduce((a, s) => a + (s.at - mx) ** 2, 0);
  return ((num / den) * 60) / 2 ** 20;
}

const mib = (bytes: number) => `${(bytes / 2 ** 20).toFixed(1)} MiB`;

async function run(options: BenchOptions): Promise<boolean> {
  const durationSec = options.durationGiven ? options.durationSec : DEFAULT_DURATION_SEC;
  const schema = await createIsolatedSchema(options.databaseUrl);
  const tls = certificate();
  const receiver = await startReceiver(tls, () => '');
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  let subscriber: ReturnType<typeof createClient> | undefined;
  try {
    server = await startServer({
      databaseUrl: schema.url,
      env: { WEBHOOK_ALLOWED_HOSTS: 'localhost', NODE_EXTRA_CA_CERTS: tls.certPath, SECRETS_KEY: randomBytes(32).toString('hex') },
    });
    const { apiKey, shopId } = await seed(schema.url, options.customers);
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` };
    for (const topic of WEBHOOK_TOPICS) {
      const res = await fetch(`${server.url}/rest-api/v1/webhooks/subscriptions`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ topic, callbackUrl: `https://localhost:${receiver.port}/soak` }),
      });
      if (res.status !== 201) throw new Error(`subscription: ${res.status} ${await res.text()}`);
    }
    if (!(await untilRelayed(schema.url, 30_000))) throw new Error('the seed events were not relayed within 30 s');

    // The live subscriber, connected before the load starts.
    const heard = new Set<string>();
    subscriber = createClient({ url: `${server.url.replace(/^http/, 'ws')}/graphql`, webSocketImpl: WebSocket, connectionParams: { Authorization: `Bearer ${apiKey}` }, retryAttempts: 0 });
    await new Promise<void>((resolve, reject) => {
      subscriber!.subscribe<{ events: { id: string } }>(
        { query: 'subscription { events(topics: ["points/*", "redemptions/created"]) { id } }' },
        { next: (r) => r.data && heard.add(r.data.events.id), error: reject, complete: () => {} },
      );
      subscriber!.on('connected', () => setTimeout(resolve, 200)); // the subscribe message is in by then
    });
    const subscribedAt = new Date();

    const customer = () => String(FIRST_CUSTOMER + Math.floor(Math.random() * options.customers));
    const json = (body: unknown) => JSON.stringify(body);
    const post = (path: string, body: () => unknown): autocannon.Request => ({ method: 'POST', path, setupRequest: (r) => ({ ...r, body: json(body()) }) });
    const requests: autocannon.Request[] = [
      post('/rest-api/v1/points/add', () => ({ customerIdentifier: customer(), amount: 3, description: 'soak' })),
      post('/rest-api/v1/points/substract', () => ({ customerIdentifier: customer(), amount: 1 })),
      post('/graphql', () => ({
        query: 'query($id: String!) { customer(identifier: $id) { email points activities(first: 5) { edges { node { _id newPoints } } } } }',
        variables: { id: customer() },
      })),
      { method: 'GET', path: '/', setupRequest: (r) => ({ ...r, path: `/rest-api/v1/pointsRedemptions?customerIdentifier=${customer()}&page=1&pageSize=10` }) },
      post('/graphql', () => ({
        query: 'mutation($id: String!) { pointsAdd(input: { customerIdentifier: $id, amount: 2 }) { customer { points } userErrors { code } } }',
        variables: { id: customer() },
      })),
      { method: 'GET', path: '/', setupRequest: (r) => ({ ...r, path: `/rest-api/v1/referral?customerIdentifier=${customer()}` }) },
    ];

    const samples: Sample[] = [];
    const started = performance.now();
    samples.push(await sample(server.url, started));
    const sampler = setInterval(() => {
      sample(server!.url, started).then((s) => samples.push(s), () => {});
    }, SAMPLE_EVERY_MS);
    let result: autocannon.Result;
    try {
      result = await new Promise<autocannon.Result>((resolve, reject) => {
        autocannon({ url: server!.url, connections: options.connections, duration: durationSec, headers, requests }, (err, res) => (err ? reject(err) : resolve(res)));
      });
    } finally {
      clearInterval(sampler);
    }
    samples.push(await sample(server.url, started));

    // Let the deliveries and live events catch up, then check.
    const drainDeadline = Date.now() + 120_000;
    const client = await connect(schema.url);
    let checks: Array<{ name: string; ok: boolean; detail: string }>;
    try {
      const count = async (text: string, params: unknown[] = []) => Number(Object.values((await client.query(text, params)).rows[0])[0]);
      while ((await count(`select count(*) from webhook_deliveries where status <> 'succeeded'`)) > 0 && Date.now() < drainDeadline) await sleep(250);
      await untilRelayed(schema.url, 30_000);
      await sleep(500);
      const wrongLast = await count(`
        select count(*) from customers c
        left join lateral (select new_points from activities a where a.customer_id = c.id order by seq desc limit 1) last on true
        where c.shop_id = $1 and c.points <> coalesce(last.new_points, 0)`, [shopId]);
      const wrongSum = await count(`
        select count(*) from customers c
        left join (select customer_id, sum(new_points - old_points) as delta from activities group by customer_id) l on l.customer_id = c.id
        where c.shop_id = $1 and c.points <> coalesce(l.delta, 0)`, [shopId]);
      const deliveries = await count('select count(*) from webhook_deliveries');
      const events = await count('select count(distinct event_id) from webhook_deliveries');
      const unsettled = await count(`select count(*) from webhook_deliveries where status <> 'succeeded'`);
      // webhook-id is the event's id, the same for each subscription it goes to.
      const arrivedEvents = new Set(receiver.arrivals.map((a) => a.id)).size;
      const live = (await client.query(`select id from outbox_events where shop_id = $1 and type in ('points/added', 'points/subtracted', 'redemptions/created') and created_at > $2`, [shopId, subscribedAt])).rows as Array<{ id: string }>;
      const missed = live.filter((e) => !heard.has(e.id)).length;
      checks = [
        { name: 'balance = last ledger entry', ok: wrongLast === 0, detail: `${wrongLast} customers differ` },
        { name: 'balance = sum of ledger changes', ok: wrongSum === 0, detail: `${wrongSum} customers differ` },
        {
          name: 'every webhook delivered',
          ok: unsettled === 0 && receiver.arrivals.length >= deliveries && arrivedEvents === events,
          detail: `${receiver.arrivals.length} requests for ${deliveries} deliveries of ${arrivedEvents}/${events} events, ${unsettled} not succeeded`,
        },
        { name: 'live subscriber heard every event', ok: missed === 0 && live.length > 0, detail: `${live.length - missed} of ${live.length}` },
      ];
    } finally {
      await client.end();
    }

    const secondHalf = samples.filter((s) => s.at >= durationSec / 2);
    const mid = secondHalf.length >> 1;
    const peak = (xs: Sample[]) => Math.max(...xs.map((s) => s.rss));
    const growth = secondHalf.length >= 2 ? peak(secondHalf.slice(mid)) / peak(secondHalf.slice(0, mid)) - 1 : Number.NaN;
    const bounded = growth < MAX_SECOND_HALF_GROWTH;
    const lags = samples.slice(1).map((s) => s.lagP99).filter(Number.isFinite);
    const ok = result['2xx'];
    const failed = result.non2xx + result.errors + result.timeouts;
    process.stdout.write(
      [
        '',
        `soak: ${durationSec} s of mixed traffic over ${options.connections} connections (points add/subtract, GraphQL query and pointsAdd,`,
        `redemption list, referral code lookup; ${options.customers} customers at random), ${WEBHOOK_TOPICS.length} webhook subscriptions to a local`,
        `HTTPS receiver, 1 live graphql-ws subscriber; server figures from its /metrics every ${SAMPLE_EVERY_MS / 1000} s (${samples.length} samples)`,
        '',
        formatTable(
          ['throughput (req/s)', 'p50', 'p99', 'ok', 'failed', 'webhooks', 'live events'],
          [[fmt.rate(ok / durationSec), fmt.ms(result.latency.p50), fmt.ms(result.latency.p99), ok, failed, receiver.arrivals.length, heard.size]],
        ),
        '',
        formatTable(
          ['RSS start', 'RSS peak', 'RSS end', 'heap used end', 'event-loop lag p99 (median / worst sample)'],
          [[mib(samples[0]!.rss), mib(Math.max(...samples.map((s) => s.rss))), mib(samples.at(-1)!.rss), mib(samples.at(-1)!.heapUsed),
            `${fmt.ms(median(lags))} / ${fmt.ms(Math.max(...lags))}`]],
        ),
        '',
        `RSS in the second half: peak-to-peak growth ${(growth * 100).toFixed(1)} % (limit ${MAX_SECOND_HALF_GROWTH * 100} %), ` +
          `slope ${slopeMiBPerMin(secondHalf).toFixed(1)} MiB/min: ${bounded ? 'bounded' : 'STILL GROWING'}`,
        ...(failed ? [`failures: ${Object.entries(result.statusCodeStats ?? {}).filter(([s]) => !s.startsWith('2')).map(([s, { count }]) => `${s} ×${count}`).join(', ')}`] : []),
        ...(server.logged().length ? ['server log (last lines):', ...server.logged()] : []),
        '',
        formatTable(['correctness check', 'result', 'detail'], checks.map((c) => [c.name, c.ok ? 'ok' : 'FAILED', c.detail])),
        '',
      ].join('\n'),
    );
    // Growth is reported, like missed speed targets; failed checks and failed requests fail the run.
    return checks.every((c) => c.ok) && failed === 0;
  } finally {
    await subscriber?.dispose();
    await server?.stop();
    await receiver.close();
    tls.dispose();
    await schema.drop();
  }
}

function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted.length ? sorted[sorted.length >> 1]! : Number.NaN;
}

export const soak: Scenario = {
  name: 'soak',
  summary: 'mixed traffic with webhooks and a live subscriber for 60 s (--duration): throughput, p99, RSS growth, event-loop lag',
  run,
};

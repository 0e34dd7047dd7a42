// Tenant isolation (DESIGN.md "Tenant isolation"): one shop must not degrade the others. A sequence
// of parts, each printing its figures and its pass/fail:
//   webhooks: shop B's event-to-delivery p50/p99 on its own, then beside shop A's hung receiver
//             (accepts, never answers) with a backlog queued for it; and shop A's second, healthy
//             endpoint beside its own hung one. Target: p99 < 1 s for each.
//   graphql:  shop B's POST /points/add p99 alone and while shop A sends alias bombs and wide nested
//             lists at its whole rate limit (isolation-graphql.ts). Target: within 1.5x, no 503.
import { randomBytes } from 'node:crypto';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { openDatabase } from '../../src/db/database.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { percentile } from '../lib/load.js';
import { connect, createIsolatedSchema } from '../lib/postgres.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';
import { startServer } from '../lib/server.js';
import { fmt, formatTable } from '../lib/table.js';
import { waitFor } from '../lib/wait.js';
import { graphqlIsolation } from './isolation-graphql.js';
import { certificate } from './webhooks.js';

const TARGET_P99_MS = 1_000;
/** Events queued for shop A's hung endpoint (and its healthy one) before the measurement. */
const BACKLOG = 2_000;
/** The pace of each shop's changes while measuring: one every this many ms. */
const INTERVAL_MS = 50;

type Arrival = { path: string; at: number; eventAt: number };

/** An HTTPS receiver: paths starting with /hung accept the request and never answer; the rest get 204. */
async function startReceiver(tls: { key: string; cert: string }) {
  const arrivals: Arrival[] = [];
  const server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '';
      arrivals.push({ path, at: Date.now(), eventAt: Date.parse(JSON.parse(Buffer.concat(chunks).toString('utf8')).timestamp) });
      if (!path.startsWith('/hung')) res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    arrivals,
    count: (path: string) => arrivals.filter((a) => a.path === path).length,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type Figure = { name: string; p50: number; p99: number; n: number; expected: number };

/** The webhook part: see the header. Resolves to whether every figure met the target. */
export async function webhookIsolation(options: BenchOptions): Promise<boolean> {
  const schema = await createIsolatedSchema(options.databaseUrl);
  const tls = certificate();
  const receiver = await startReceiver(tls);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    const env = { WEBHOOK_ALLOWED_HOSTS: 'localhost', NODE_EXTRA_CA_CERTS: tls.certPath, SECRETS_KEY: randomBytes(32).toString('hex') };
    server = await startServer({ databaseUrl: schema.url, env });
    const { db, close } = await openDatabase({ url: schema.url, poolSize: 2 });
    const a = await createShop(db, 'Bench isolation shop A (hung receiver)');
    const b = await createShop(db, 'Bench isolation shop B');
    await upsertCustomer(db, a.shop.id, { shopifyCustomerId: 'a-1', email: 'a-1@bench.example' });
    await upsertCustomer(db, b.shop.id, { shopifyCustomerId: 'b-1', email: 'b-1@bench.example' });
    await close();
    const url = server.url;
    const headers = (apiKey: string) => ({ 'content-type': 'application/json', authorization: `Bearer ${apiKey}` });
    for (const [apiKey, path] of [[a.apiKey, '/hung'], [a.apiKey, '/a-ok'], [b.apiKey, '/b']] as const) {
      const res = await fetch(`${url}/rest-api/v1/webhooks/subscriptions`, {
        method: 'POST',
        headers: headers(apiKey),
        body: JSON.stringify({ topic: 'points/*', callbackUrl: `https://localhost:${receiver.port}${path}` }),
      });
      if (res.status !== 201) throw new Error(`subscription: ${res.status} ${await res.text()}`);
    }

    /** Paced points/add calls of the given shops; then each path's event-to-delivery figures for events from now on. */
    const measure = async (shops: Array<{ apiKey: string; customer: string; path: string; name: string }>): Promise<Figure[]> => {
      const from = Date.now();
      const events = Math.max(10, Math.round((options.durationSec * 1000) / INTERVAL_MS));
      for (let i = 0; i < events; i++) {
        for (const shop of shops) {
          const res = await fetch(`${url}/rest-api/v1/points/add`, { method: 'POST', headers: headers(shop.apiKey), body: JSON.stringify({ customerIdentifier: shop.customer, amount: 1 }) });
          if (!res.ok) throw new Error(`points/add: ${res.status} ${await res.text()}`);
        }
        await sleep(INTERVAL_MS);
      }
      const of = (path: string) => receiver.arrivals.filter((r) => r.path === path && r.eventAt >= from);
      await waitFor(() => shops.every((s) => of(s.path).length >= events), 30_000);
      return shops.map((shop) => {
        const latencies = of(shop.path).map((r) => r.at - r.eventAt).sort((x, y) => x - y);
        return { name: shop.name, p50: percentile(latencies, 50), p99: percentile(latencies, 99), n: latencies.length, expected: events };
      });
    };
    const shopB = { apiKey: b.apiKey, customer: 'b-1', path: '/b', name: 'shop B' };

    const alone = await measure([shopB]);
    process.stdout.write(`  shop B alone: p50 ${fmt.ms(alone[0]!.p50)}, p99 ${fmt.ms(alone[0]!.p99)}\n`);

    // Shop A's backlog: committed at once, for its hung endpoint and its healthy one.
    const client = await connect(schema.url);
    await client.query(
      `insert into outbox_events (id, shop_id, type, data)
       select 'evt_isolation' || lpad(i::text, 8, '0'), $1, 'points/added', jsonb_build_object('_id', md5(i::text), 'newPoints', i)
       from generate_series(1, $2) as i`,
      [a.shop.id, BACKLOG],
    );
    await client.end();
    // Measure once the hung endpoint holds its slots and the healthy one has its share of the backlog.
    const underWay = await waitFor(() => receiver.count('/hung') >= 16 && receiver.count('/a-ok') >= BACKLOG, 60_000);
    // Measured anyway: a worker the hung endpoint blocks shows it in the figures (and misses the target).
    if (!underWay) process.stdout.write(`  after 60 s only ${receiver.count('/a-ok')} of the ${BACKLOG} backlog deliveries reached A's healthy endpoint (${receiver.count('/hung')} attempts to the hung one)\n`);
    const beside = await measure([
      { ...shopB, name: 'shop B, beside A\'s hung endpoint' },
      { apiKey: a.apiKey, customer: 'a-1', path: '/a-ok', name: 'shop A\'s healthy endpoint, beside its hung one' },
    ]);
    const check = await connect(schema.url);
    const waiting = Number((await check.query(`select count(*)::int as n from webhook_deliveries d join webhook_subscriptions s on s.id = d.subscription_id
      where s.callback_url like '%/hung' and d.status in ('pending', 'retrying', 'sending')`)).rows[0].n);
    await check.end();

    const figures = [{ ...alone[0]!, name: 'shop B alone' }, ...beside];
    const met = (f: Figure) => f.n >= f.expected && f.p99 < TARGET_P99_MS;
    process.stdout.write(
      [
        '',
        `webhook isolation: shop A's receiver hangs (accepts, never answers) with ${BACKLOG} events queued for it (${waiting} still waiting at the end, ${receiver.count('/hung')} attempts made); the server's worker at its defaults`,
        '',
        formatTable(
          ['event to delivery', 'p50', 'p99', 'events', 'target'],
          figures.map((f) => [f.name, fmt.ms(f.p50), fmt.ms(f.p99), `${f.n}/${f.expected}`, met(f) ? `p99 < ${TARGET_P99_MS} ms met` : `p99 < ${TARGET_P99_MS} ms MISSED`]),
        ),
        '',
      ].join('\n'),
    );
    return figures.every(met);
  } finally {
    await receiver.close(); // ends the hung requests, so the server stops without waiting for them
    await server?.stop();
    tls.dispose();
    await schema.drop();
  }
}

async function run(options: BenchOptions): Promise<boolean> {
  let ok = true;
  ok = (await webhookIsolation(options)) && ok;
  process.stdout.write('\n-- graphql: shop B\'s points/add beside shop A\'s alias bombs and wide nested lists\n');
  ok = (await graphqlIsolation(options)) && ok;
  return ok;
}

export const isolation: Scenario = {
  name: 'isolation',
  summary: 'one shop never degrades another: webhooks beside a hung receiver with a backlog, points/add beside GraphQL bombs and wide lists',
  run,
};

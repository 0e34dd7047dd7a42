// Webhook deliveries: the server (relay and delivery worker inside) sending to a local HTTPS
// receiver. Three measurements:
//   latency:    points/add one at a time, paced, on an otherwise idle server: event (outbox
//               commit timestamp) to the receiver having the request, p50/p99
//   throughput: a backlog of events committed to the outbox at once, drained: deliveries/s
//   latency, split: the same as the first with WORKER=off and `npm run worker` beside the server
//               (the worker learns of new events by polling the outbox, not from a local commit)
// then a check that every event arrived exactly once, signed, and every delivery is `succeeded`.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';
import { openDatabase } from '../../src/db/database.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { percentile } from '../lib/load.js';
import { connect, createIsolatedSchema } from '../lib/postgres.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';
import { startServer, startWorkerProcess } from '../lib/server.js';
import { fmt, formatTable } from '../lib/table.js';
import { waitFor } from '../lib/wait.js';

const TARGETS = { deliveriesPerSec: 1_000, p50Ms: 100 };
/** Events in the throughput backlog. */
const BACKLOG = 20_000;
/** The latency phase's pace: one event every this many ms. */
const LATENCY_INTERVAL_MS = 20;
/** One request in this many has its signature verified by the receiver (verifying costs the receiver CPU the server needs). */
const VERIFY_EVERY = 50;

type Arrival = { id: string; at: number; eventAt: number };

/** A self-signed certificate for localhost; the server trusts it through NODE_EXTRA_CA_CERTS. */
export function certificate(): { key: string; cert: string; certPath: string; dispose(): void } {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'bench-tls-'));
  const keyPath = path.join(dir, 'key.pem');
  const certPath = path.join(dir, 'cert.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-sha256', '-days', '1', '-keyout', keyPath, '-out', certPath,
    '-subj', '/CN=localhost', '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1', '-addext', 'basicConstraints=critical,CA:TRUE',
  ], { stdio: 'ignore' });
  return { key: readFileSync(keyPath, 'utf8'), cert: readFileSync(certPath, 'utf8'), certPath, dispose: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The receiver: records every arrival, verifies a sample, answers 204. */
export async function startReceiver(tls: { key: string; cert: string }, secret: () => string) {
  const arrivals: Arrival[] = [];
  let badSignatures = 0;
  let verified = 0;
  const server = https.createServer({ key: tls.key, cert: tls.cert }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const at = Date.now();
      const body = Buffer.concat(chunks).toString('utf8');
      const id = String(req.headers['webhook-id']);
      if (arrivals.length % VERIFY_EVERY === 0) {
        try {
          new Webhook(secret(), { format: 'raw' }).verify(body, req.headers as Record<string, string>);
          verified++;
        } catch {
          badSignatures++;
        }
      }
      arrivals.push({ id, at, eventAt: Date.parse(JSON.parse(body).timestamp) });
      res.writeHead(204).end();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    arrivals,
    stats: () => ({ verified, badSignatures }),
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
}

/**
 * points/add one at a time, paced, measuring from each event's outbox timestamp to its arrival at
 * the receiver. The first `warmupSec` worth of events are not counted.
 */
async function measureLatency(url: string, headers: Record<string, string>, arrivals: Arrival[], options: BenchOptions) {
  const events = Math.max(10, Math.round(((options.warmupSec + options.durationSec) * 1000) / LATENCY_INTERVAL_MS));
  const warmup = Math.round((options.warmupSec * 1000) / LATENCY_INTERVAL_MS);
  const before = arrivals.length;
  for (let i = 0; i < events; i++) {
    const res = await fetch(`${url}/rest-api/v1/points/add`, { method: 'POST', headers, body: JSON.stringify({ customerIdentifier: 'wh-1', amount: 1 }) });
    if (!res.ok) throw new Error(`points/add: ${res.status} ${await res.text()}`);
    await sleep(LATENCY_INTERVAL_MS);
  }
  await waitFor(() => arrivals.length >= before + events, 30_000);
  const latencies = arrivals.slice(before + warmup, before + events).map((a) => a.at - a.eventAt).sort((x, y) => x - y);
  return { p50: percentile(latencies, 50), p99: percentile(latencies, 99), n: latencies.length, events };
}

async function run(options: BenchOptions): Promise<boolean> {
  const schema = await createIsolatedSchema(options.databaseUrl);
  const tls = certificate();
  let secret = '';
  const receiver = await startReceiver(tls, () => secret);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    const serverEnv = { WEBHOOK_ALLOWED_HOSTS: 'localhost', NODE_EXTRA_CA_CERTS: tls.certPath, SECRETS_KEY: randomBytes(32).toString('hex') };
    const nodeArgs = options.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`] : [];
    server = await startServer({ databaseUrl: schema.url, env: serverEnv, nodeArgs });
    const { db, close } = await openDatabase({ url: schema.url, poolSize: 2 });
    const { shop, apiKey } = await createShop(db, 'Bench webhooks shop');
    await upsertCustomer(db, shop.id, { shopifyCustomerId: 'wh-1', email: 'wh-1@bench.example' });
    await close();
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` };
    const created = await fetch(`${server.url}/rest-api/v1/webhooks/subscriptions`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ topic: 'points/*', callbackUrl: `https://localhost:${receiver.port}/bench` }),
    });
    if (created.status !== 201) throw new Error(`subscription: ${created.status} ${await created.text()}`);
    secret = ((await created.json()) as { subscription: { signingSecret: string } }).subscription.signingSecret;

    const latency = await measureLatency(server.url, headers, receiver.arrivals, options);
    process.stdout.write(`  latency: ${latency.n} events, event to delivery p50 ${fmt.ms(latency.p50)}, p99 ${fmt.ms(latency.p99)}\n`);

    // Throughput: a backlog committed in one transaction, drained by the server's relay and worker.
    const before = receiver.arrivals.length;
    const client = await connect(schema.url);
    const committedAt = Date.now();
    await client.query(
      `insert into outbox_events (id, shop_id, type, data)
       select 'evt_bench' || lpad(i::text, 8, '0'), $1, 'points/added',
              jsonb_build_object('_id', md5(i::text), 'type', 'add_points', 'oldPoints', i, 'newPoints', i + 1, 'customer', 'wh-1')
       from generate_series(1, $2) as i`,
      [shop.id, BACKLOG],
    );
    await client.end();
    const drained = await waitFor(() => receiver.arrivals.length >= before + BACKLOG, 300_000);
    const backlog = receiver.arrivals.slice(before);
    const firstAt = Math.min(...backlog.map((a) => a.at));
    const lastAt = Math.max(...backlog.map((a) => a.at));
    const throughput = {
      // From the first arrival: the relay's poll (up to 250 ms, no in-process commit signal for an
      // outside insert) is not the delivery rate.
      rate: backlog.length / ((lastAt - firstAt) / 1000),
      total: (lastAt - committedAt) / 1000,
      n: backlog.length,
    };
    process.stdout.write(`  throughput: ${throughput.n} backlog deliveries at ${fmt.rate(throughput.rate)}/s (${throughput.total.toFixed(1)} s from commit to last)\n`);
    await server.stop();
    server = undefined;

    // The split deployment: a server that only serves, and a worker process beside it.
    server = await startServer({ databaseUrl: schema.url, env: { ...serverEnv, WORKER: 'off' } });
    const worker = await startWorkerProcess(schema.url, serverEnv);
    let split: Awaited<ReturnType<typeof measureLatency>>;
    try {
      split = await measureLatency(server.url, headers, receiver.arrivals, options);
      process.stdout.write(`  latency with a separate worker: p50 ${fmt.ms(split.p50)}, p99 ${fmt.ms(split.p99)}\n`);
      await sleep(1_000); // a duplicate would have arrived by now
    } finally {
      await worker.stop();
    }
    await server.stop();
    server = undefined;

    const expected = 2 * latency.events + BACKLOG;
    const ids = receiver.arrivals.map((a) => a.id);
    const check = await connect(schema.url);
    const statuses = (await check.query(`select status, count(*)::int as n from webhook_deliveries group by status order by status`)).rows as Array<{ status: string; n: number }>;
    await check.end();
    const { verified, badSignatures } = receiver.stats();
    const checks = [
      { name: 'every event delivered', ok: drained && ids.length >= expected, detail: `${ids.length} arrivals for ${expected} events` },
      { name: 'exactly once (distinct webhook-id)', ok: new Set(ids).size === ids.length, detail: `${new Set(ids).size} distinct of ${ids.length}` },
      { name: 'signatures verify (sampled)', ok: badSignatures === 0 && verified > 0, detail: `${verified} verified, ${badSignatures} bad` },
      {
        name: 'deliveries recorded as succeeded',
        ok: statuses.length === 1 && statuses[0]!.status === 'succeeded' && statuses[0]!.n === expected,
        detail: statuses.map((s) => `${s.status} ${s.n}`).join(', '),
      },
    ];
    process.stdout.write(
      [
        '',
        `webhooks: one subscription, a local HTTPS receiver (self-signed, trusted via NODE_EXTRA_CA_CERTS), server on PostgreSQL`,
        '',
        formatTable(
          ['', 'deliveries/s', 'p50', 'p99', 'events', 'target'],
          [
            [`latency (1 event / ${LATENCY_INTERVAL_MS} ms, idle)`, '-', fmt.ms(latency.p50), fmt.ms(latency.p99), latency.n, latency.p50 < TARGETS.p50Ms ? `p50 < ${TARGETS.p50Ms} ms met` : `p50 < ${TARGETS.p50Ms} ms MISSED`],
            ['latency, WORKER=off + npm run worker', '-', fmt.ms(split.p50), fmt.ms(split.p99), split.n, split.p50 < TARGETS.p50Ms ? `p50 < ${TARGETS.p50Ms} ms met` : `p50 < ${TARGETS.p50Ms} ms MISSED`],
            [`throughput (${BACKLOG} backlog)`, fmt.rate(throughput.rate), '-', '-', throughput.n, throughput.rate >= TARGETS.deliveriesPerSec ? `>= ${TARGETS.deliveriesPerSec}/s met` : `>= ${TARGETS.deliveriesPerSec}/s MISSED`],
          ],
        ),
        '',
        formatTable(['correctness check', 'result', 'detail'], checks.map((c) => [c.name, c.ok ? 'ok' : 'FAILED', c.detail])),
        '',
      ].join('\n'),
    );
    return checks.every((c) => c.ok);
  } finally {
    await server?.stop();
    await receiver.close();
    tls.dispose();
    await schema.drop();
  }
}

export const webhooks: Scenario = {
  name: 'webhooks',
  summary: 'webhook deliveries to a local HTTPS receiver: event-to-delivery p50/p99 and deliveries/s',
  run,
};

import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { onPostgres, startTestApp, type TestApp } from './helpers.js';
import { collect, sse, wsClient } from './live-helpers.js';
import { mailingShop, redeem } from './mail-helpers.js';
import { startHungSmtp, startSmtp } from './smtp-server.js';
import { type Receiver, startReceiver } from './webhook-receiver.js';

type Sample = { name: string; labels: Record<string, string>; value: number };

/** The text exposition format, one sample per line (comments skipped). */
function parseExposition(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!match) throw new Error(`not an exposition line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[key!] = value!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

/** The value of the one sample with this name and (at least) these labels; 0 when there is none. */
function valueOf(samples: Sample[], name: string, labels: Record<string, string> = {}): number {
  const found = samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value ?? 0;
}

describe(`GET /metrics (${onPostgres ? 'PostgreSQL' : 'PGlite'})`, () => {
  let t: TestApp;
  let receiver: Receiver;
  let shop: { shopId: string; apiKey: string };

  const scrape = async () => {
    const res = await fetch(`${t.url}/metrics`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await res.text();
    return { text, samples: parseExposition(text) };
  };
  const until = async (check: (samples: Sample[]) => boolean) => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const { samples } = await scrape();
      if (check(samples)) return samples;
      if (Date.now() > deadline) throw new Error('metrics did not reach the expected values');
      await sleep(50);
    }
  };
  const restCall = (path: string, body: unknown) => t.post(`/rest-api/v1${path}`, body, shop.apiKey);

  beforeAll(async () => {
    // The receiver refuses with 503 and Retry-After of an hour: each delivery is attempted once
    // and then waits, queued as `retrying`, for the rest of the test.
    receiver = await startReceiver((_req, res) => res.writeHead(503, { 'retry-after': '3600' }).end());
    t = await startTestApp({ RATE_LIMIT_PER_MINUTE: '5', WEBHOOK_ALLOWED_HOSTS: 'localhost', MAIL_TIMEOUT_MS: '500' });
    shop = await t.shop();
    await t.customer(shop.shopId, 'm-1', 10);
  });
  afterAll(async () => {
    await t?.stop();
    await receiver?.close();
  });

  it('counts requests by route pattern and status, 429s by operation, and webhook attempts by outcome', async () => {
    const before = (await scrape()).samples;
    const created = await restCall('/webhooks/subscriptions', { topic: 'points/added', callbackUrl: receiver.url });
    expect(created.status).toBe(201);

    // points_add allows 5 a minute: four adds and a 404 fill it, the sixth call is refused.
    for (let i = 0; i < 4; i++) expect((await restCall('/points/add', { customerIdentifier: 'm-1', amount: 1 })).status).toBe(200);
    expect((await restCall('/points/add', { customerIdentifier: 'nobody-42', amount: 1 })).status).toBe(404);
    const refused = await restCall('/points/add', { customerIdentifier: 'm-1', amount: 1 });
    expect(refused.status).toBe(429);
    // A route that does not exist, with an id in its path.
    expect((await fetch(`${t.url}/rest-api/v1/customers/secret-id-123`, { headers: { authorization: `Bearer ${shop.apiKey}` } })).status).toBe(404);
    for (let i = 0; i < 2; i++) {
      const result = await t.graphql(shop.apiKey, 'query { customer(identifier: "m-1") { points } }');
      expect(result.data.customer.points).toBe(14);
    }

    // Each of the four events is attempted once; the 503 is recorded after the receiver has it.
    await receiver.waitFor(4);
    const rejected = { outcome: 'rejected', status: '503' };
    const after = await until(
      (s) =>
        valueOf(s, 'loyalty_webhook_delivery_attempts_total', rejected) - valueOf(before, 'loyalty_webhook_delivery_attempts_total', rejected) === 4 &&
        valueOf(s, 'loyalty_webhook_deliveries_queued', { status: 'retrying' }) === 4,
    );
    const delta = (name: string, labels: Record<string, string>) => valueOf(after, name, labels) - valueOf(before, name, labels);

    const points = { method: 'POST', route: '/rest-api/v1/points/add' };
    expect(delta('loyalty_http_requests_total', { ...points, status: '200' })).toBe(4);
    expect(delta('loyalty_http_requests_total', { ...points, status: '404' })).toBe(1);
    expect(delta('loyalty_http_requests_total', { ...points, status: '429' })).toBe(1);
    expect(delta('loyalty_http_requests_total', { method: 'POST', route: '/rest-api/v1/webhooks/subscriptions', status: '201' })).toBe(1);
    expect(delta('loyalty_http_requests_total', { method: 'GET', route: 'unmatched', status: '404' })).toBe(1);
    expect(delta('loyalty_http_requests_total', { method: 'POST', route: '/graphql', status: '200' })).toBe(2);
    expect(delta('loyalty_http_request_duration_seconds_count', points)).toBe(6);
    expect(delta('loyalty_http_request_duration_seconds_bucket', { ...points, le: '+Inf' })).toBe(6);
    expect(delta('loyalty_http_request_duration_seconds_sum', points)).toBeGreaterThan(0);
    expect(delta('loyalty_rate_limit_rejections_total', { operation: 'points_add' })).toBe(1);
    expect(valueOf(after, 'loyalty_webhook_deliveries_queued', { status: 'pending' })).toBe(0);
    expect(delta('loyalty_webhook_delivery_attempts_total', { outcome: 'delivered' })).toBe(0);

    // Only patterns, operation names and statuses: no ids, keys or raw paths.
    const { text } = await scrape();
    for (const secret of [shop.shopId, shop.apiKey, 'secret-id-123', 'nobody-42', 'm-1', receiver.url]) expect(text).not.toContain(secret);
    const routes = new Set(after.filter((s) => s.name === 'loyalty_http_requests_total').map((s) => s.labels.route));
    expect([...routes].sort()).toEqual(['/graphql', '/metrics', '/rest-api/v1/points/add', '/rest-api/v1/webhooks/subscriptions', 'unmatched']);
  });

  it('reports live subscriptions (graphql-ws and SSE), the pool on PostgreSQL, and process figures', async () => {
    const client = wsClient(t.url, shop.apiKey);
    const ws = collect(client, 'subscription { events(topics: ["points/*"]) { id } }');
    const stream = await sse(t.url, shop.apiKey, 'subscription { events(topics: ["points/*"]) { id } }');
    try {
      expect(stream.status).toBe(200);
      await until((s) => valueOf(s, 'loyalty_live_subscriptions') === 2);
    } finally {
      ws.stop();
      stream.close();
      await client.dispose();
    }
    const samples = await until((s) => valueOf(s, 'loyalty_live_subscriptions') === 0);

    const pool = ['loyalty_db_pool_connections', 'loyalty_db_pool_idle_connections', 'loyalty_db_pool_waiting_requests'];
    if (onPostgres) {
      const [total, idle, waiting] = pool.map((name) => valueOf(samples, name));
      expect(total).toBeGreaterThanOrEqual(1);
      expect(idle).toBeLessThanOrEqual(total!);
      expect(waiting).toBe(0);
    } else {
      // PGlite has no pool: the gauges are absent rather than made up.
      expect(samples.filter((s) => pool.includes(s.name))).toEqual([]);
    }
    expect(valueOf(samples, 'process_resident_memory_bytes')).toBeGreaterThan(10 * 1024 * 1024);
    expect(samples.some((s) => s.name === 'nodejs_eventloop_lag_p99_seconds')).toBe(true);
  });

  it('counts e-mails by outcome and shows the mail queue', async () => {
    const smtp = await startSmtp();
    const hung = await startHungSmtp();
    try {
      const healthy = await mailingShop(t, smtp.port, 'Mailing');
      const stuck = await mailingShop(t, hung.port, 'Mailing to a hung server');
      for (const shop of [healthy, stuck]) {
        await t.customer(shop.shopId, 'mail-1', 1000);
        await redeem(t, shop, 'mail-1');
      }
      // The healthy shop's e-mail is sent; the hung one's waits out its time-out and stays queued for its next try.
      const samples = await until((s) => valueOf(s, 'loyalty_mail_sends_total', { outcome: 'sent' }) >= 1 && valueOf(s, 'loyalty_mail_sends_total', { outcome: 'retry' }) >= 1);
      expect(smtp.received).toHaveLength(1);
      expect(valueOf(samples, 'loyalty_mail_queued')).toBe(1);
      expect(valueOf(samples, 'loyalty_mail_queue_lag_seconds')).toBe(0);
    } finally {
      await hung.close();
      await smtp.close();
    }
  });

  it('needs no API key, and two apps in one process keep their own counts', async () => {
    const other = await startTestApp();
    try {
      const before = parseExposition(await (await fetch(`${other.url}/metrics`)).text());
      await fetch(`${other.url}/healthz`);
      const after = parseExposition(await (await fetch(`${other.url}/metrics`)).text());
      const healthz = { method: 'GET', route: '/healthz', status: '200' };
      expect(valueOf(after, 'loyalty_http_requests_total', healthz) - valueOf(before, 'loyalty_http_requests_total', healthz)).toBe(1);
      // The first app's points calls are not counted here.
      expect(valueOf(after, 'loyalty_http_requests_total', { route: '/rest-api/v1/points/add', status: '200' })).toBe(0);
    } finally {
      await other.stop();
    }
  });
});

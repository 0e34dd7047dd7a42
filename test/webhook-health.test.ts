import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { inTransaction } from '../src/db/transaction.js';
import { recordEvents } from '../src/domain/kernel/events.js';
import { createOutboxRelay } from '../src/events/outbox-relay.js';
import { createLogger } from '../src/logger.js';
import { createDeliveryWorker, type DeliveryWorker } from '../src/webhooks/delivery-worker.js';
import { createSecretBox } from '../src/webhooks/secret-box.js';
import { type Resolver, UrlPolicy } from '../src/webhooks/url-policy.js';
import { startTestApp, type TestApp } from './helpers.js';
import { type Receiver, startReceiver } from './webhook-receiver.js';

// Endpoint health (DESIGN.md "Tenant isolation", docs/webhooks.md): 5 consecutive failures put an
// endpoint on probing (one attempt in flight, over all workers) until a success; 5 days without a
// success disable it (deliveries kept, not attempted; a webhook_subscriptions/disabled event);
// re-enabling it or updating its URL resumes it. A real server serves REST and GraphQL (its own
// worker off); the workers here run beside it on the same database with a clock the test moves.

const V1 = '/rest-api/v1';
const DAY = 24 * 60 * 60 * 1000;
const SECRETS_KEY = randomBytes(32).toString('hex');
const REDIS_URL = process.env.TEST_REDIS_URL;
const logger = createLogger('silent');
const resolveHost: Resolver = async (hostname) => {
  if (hostname === 'localhost') return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};

let t: TestApp;
let receiver: Receiver;
let now = Date.now();
let downAnswer: 'fail' | 'hang' | 'ok' = 'fail';
const hanging: Array<() => void> = [];
const workers: DeliveryWorker[] = [];

function worker(): DeliveryWorker {
  const w = createDeliveryWorker({
    db: t.app.database.db,
    logger,
    urlPolicy: new UrlPolicy({ allowedHosts: ['localhost'], resolve: resolveHost }),
    secrets: createSecretBox(Buffer.from(SECRETS_KEY, 'hex')),
    clock: () => now,
    random: () => 0.5,
    timeoutMs: 5_000,
    pollMs: 50,
  });
  workers.push(w);
  return w;
}

beforeAll(async () => {
  receiver = await startReceiver((_req, res, received) => {
    if (!received.path.startsWith('/down')) return void res.writeHead(204).end();
    if (downAnswer === 'ok') return void res.writeHead(204).end();
    if (downAnswer === 'hang') return void hanging.push(() => res.writeHead(503).end());
    res.writeHead(503).end('down');
  });
  t = await startTestApp(
    {
      WEBHOOK_ALLOWED_HOSTS: 'localhost',
      WORKER: 'off',
      SECRETS_KEY,
      ...(REDIS_URL ? { REDIS_URL, REDIS_KEY_PREFIX: `test:${randomBytes(4).toString('hex')}:` } : {}),
    },
    { resolveHost },
  );
});
afterAll(async () => {
  for (const answer of hanging.splice(0)) answer();
  await Promise.all(workers.map((w) => w.stop()));
  await t?.stop();
  await receiver?.close();
});

async function call(method: string, path: string, apiKey: string, body?: unknown) {
  const res = await fetch(`${t.url}${V1}${path}`, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as any };
}

async function until(check: () => boolean | Promise<boolean>, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('endpoint health', () => {
  it('probing after 5 failures (one attempt in flight across two workers), disabled after 5 days (across a worker restart), resumed by enable and by a URL update', async () => {
    const db = t.app.database.db;
    const shop = await t.shop('Health shop');
    const subscribe = async (topic: string, path: string) =>
      (await call('POST', '/webhooks/subscriptions', shop.apiKey, { topic, callbackUrl: `https://localhost:${receiver.port}${path}` })).body.subscription.id as string;
    const down = await subscribe('points/*', '/down');
    await subscribe('webhook_subscriptions/*', '/watch');
    const withRelay = async (w: DeliveryWorker) => ({ w, relay: createOutboxRelay({ db, logger, handlers: [w.outboxHandler, t.app.bus.outboxHandler] }) });
    const emit = async (relay: ReturnType<typeof createOutboxRelay>, count: number) => {
      await inTransaction(db, (trx) => recordEvents(trx, shop.shopId, Array.from({ length: count }, (_, i) => ({ type: 'points/added' as const, data: { i } }))));
      while ((await relay.relayBatch()) > 0);
    };
    const status = async (id: string) => (await call('GET', '/webhooks/subscriptions', shop.apiKey)).body.subscriptions.find((s: { id: string }) => s.id === id);
    const toDown = () => receiver.requests.filter((r) => r.path.startsWith('/down')).length;

    // Worker 1: four failures leave it enabled; the fifth in a row puts it on probing.
    const first = await withRelay(worker());
    const firstFailureAt = now;
    await emit(first.relay, 4);
    expect(await first.w.drain()).toBe(4);
    expect(await status(down)).toMatchObject({ status: 'enabled', disabledReason: null });
    now += 1_000;
    await emit(first.relay, 1);
    await first.w.drain();
    expect(await status(down)).toMatchObject({ status: 'probing', disabledReason: null });

    // Probing, over two workers: six deliveries due, one attempt in flight at a time.
    now += 60_000; // every retry (5 s) is due
    await emit(first.relay, 1);
    downAnswer = 'hang';
    const second = worker();
    const before = toDown();
    first.w.start();
    second.start();
    await until(() => toDown() > before, 5_000, 'a probe');
    await new Promise((r) => setTimeout(r, 500)); // both workers poll every 50 ms meanwhile
    expect(toDown()).toBe(before + 1);
    const sending = await db.selectFrom('webhook_deliveries').select('id').where('subscription_id', '=', down).where('status', '=', 'sending').execute();
    expect(sending).toHaveLength(1);
    // The probe fails: the next one goes out, still one at a time.
    hanging.shift()!();
    await until(() => toDown() === before + 2, 5_000, 'the next probe');
    await new Promise((r) => setTimeout(r, 300));
    expect(toDown()).toBe(before + 2);
    downAnswer = 'fail';
    for (const answer of hanging.splice(0)) answer();
    await Promise.all([first.w.stop(), second.stop()]);
    expect(await status(down)).toMatchObject({ status: 'probing' });

    // A worker restart (a new worker over the same database): 5 days after the first failure
    // without a success, its next failed attempt disables the endpoint, announced by an event.
    const restarted = await withRelay(worker());
    const { id: apiKeyId } = await t.app.database.db.selectFrom('api_keys').select('id').where('shop_id', '=', shop.shopId).executeTakeFirstOrThrow();
    const live = await t.app.bus.subscribe({ shopId: shop.shopId, apiKeyId }, (event) => event.type === 'webhook_subscriptions/disabled');
    now = firstFailureAt + 5 * DAY - 60_000;
    await emit(restarted.relay, 1);
    await restarted.w.drain();
    expect(await status(down)).toMatchObject({ status: 'probing' });
    now = firstFailureAt + 5 * DAY + 60_000;
    await emit(restarted.relay, 1);
    await restarted.w.drain();
    const disabled = await status(down);
    expect(disabled).toMatchObject({ status: 'disabled', disabledReason: expect.stringMatching(/no successful attempt since .* 5 days without a success/) });
    const events = await db.selectFrom('outbox_events').selectAll().where('shop_id', '=', shop.shopId).where('type', '=', 'webhook_subscriptions/disabled').execute();
    expect(events).toHaveLength(1);
    while ((await restarted.relay.relayBatch()) > 0);
    const announced = await live.next();
    expect(announced.value).toMatchObject({ type: 'webhook_subscriptions/disabled', data: { id: down, status: 'disabled' } });
    await live.return?.();
    await restarted.w.drain();
    const watched = receiver.requests.filter((r) => r.path === '/watch').map((r) => JSON.parse(r.body));
    expect(watched).toEqual([expect.objectContaining({ type: 'webhook_subscriptions/disabled', data: expect.objectContaining({ id: down, disabledReason: disabled.disabledReason }) })]);

    // Disabled: new deliveries are kept, not attempted; a replay is refused.
    const sentWhileDisabled = toDown();
    now += DAY;
    await emit(restarted.relay, 3);
    await restarted.w.drain();
    expect(toDown()).toBe(sentWhileDisabled);
    const held = await db.selectFrom('webhook_deliveries').select(['id', 'status']).where('subscription_id', '=', down).where('status', 'in', ['pending', 'retrying']).execute();
    expect(held.length).toBeGreaterThanOrEqual(3);
    const replay = await call('POST', `/webhooks/deliveries/${held[0]!.id}/replay`, shop.apiKey);
    expect(replay).toMatchObject({ status: 422, body: { success: false, error: 'subscription_disabled' } });

    // Re-enabled through GraphQL: everything held is sent at once.
    downAnswer = 'ok';
    const enabled = await t.graphql(
      shop.apiKey,
      'mutation($id: ID!) { webhookSubscriptionEnable(input: { id: $id }) { webhookSubscription { id status disabledReason } userErrors { code field } } }',
      { id: down },
    );
    expect(enabled.data.webhookSubscriptionEnable).toEqual({ webhookSubscription: { id: down, status: 'enabled', disabledReason: null }, userErrors: [] });
    await restarted.w.drain();
    expect(toDown()).toBe(sentWhileDisabled + held.length);
    const left = await db.selectFrom('webhook_deliveries').select('id').where('subscription_id', '=', down).where('status', 'in', ['pending', 'retrying', 'sending']).execute();
    expect(left).toEqual([]);
    const foreign = await t.graphql(shop.apiKey, 'mutation { webhookSubscriptionEnable(input: { id: "aaaaaaaaaaaaaaaaaaaaaaaa" }) { webhookSubscription { id } userErrors { code field } } }');
    expect(foreign.data.webhookSubscriptionEnable).toEqual({ webhookSubscription: null, userErrors: [{ code: 'subscription_not_found', field: ['input', 'id'] }] });

    // Failing again puts it back on probing; a URL update (REST) resumes it, its retries due at once.
    downAnswer = 'fail';
    await emit(restarted.relay, 5);
    await restarted.w.drain();
    expect(await status(down)).toMatchObject({ status: 'probing' });
    downAnswer = 'ok';
    const updated = await call('PUT', `/webhooks/subscriptions/${down}`, shop.apiKey, { callbackUrl: `https://localhost:${receiver.port}/down/v2` });
    expect(updated).toMatchObject({ status: 200, body: { subscription: { status: 'enabled', disabledReason: null } } });
    await restarted.w.drain();
    expect(receiver.requests.filter((r) => r.path === '/down/v2')).toHaveLength(5);

    // The REST twin: POST …/enable, 200 with the record; 404 for another shop's, 400 for a malformed id.
    const other = await t.shop('Other shop');
    expect(await call('POST', `/webhooks/subscriptions/${down}/enable`, shop.apiKey)).toMatchObject({ status: 200, body: { success: true, subscription: { id: down, status: 'enabled' } } });
    expect(await call('POST', `/webhooks/subscriptions/${down}/enable`, other.apiKey)).toMatchObject({ status: 404, body: { error: 'subscription_not_found' } });
    expect((await call('POST', '/webhooks/subscriptions/nope/enable', shop.apiKey)).status).toBe(400);
  }, 60_000);
});

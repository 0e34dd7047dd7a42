import { randomBytes } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cancelDiscountCode, codeExpiry, codeWarnings } from '../src/domain/codes/index.js';
import { inTransaction } from '../src/db/transaction.js';
import { answerShopifyCompliance, eraseCustomer } from '../src/domain/data-rights/index.js';
import { EVENT_TOPICS } from '../src/domain/kernel/events.js';
import { newId } from '../src/domain/kernel/ids.js';
import { pendingRelease } from '../src/domain/ledger/pending-release.js';
import { changePoints } from '../src/domain/ledger/points.js';
import { upsertOrder } from '../src/domain/orders/order-writes.js';
import { createEarningRule } from '../src/domain/program/earning-rules.js';
import { expiryWarnings, pointExpiry } from '../src/domain/program/expiry.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { createTier } from '../src/domain/program/tiers.js';
import { createPointsRedemption, redeemPoints } from '../src/domain/rewards/redemptions.js';
import { getReferralCode, registerReferral } from '../src/domain/rewards/referrals.js';
import { updateShopSettings } from '../src/domain/settings/shop-settings.js';
import { createShop } from '../src/domain/shops/shops.js';
import { getDelivery } from '../src/domain/webhooks/webhook-deliveries.js';
import { createSubscription } from '../src/domain/webhooks/webhook-subscriptions.js';
import { createOutboxRelay } from '../src/events/outbox-relay.js';
import { createLogger } from '../src/logger.js';
import { claimDueDeliveries, purgeDeliveries } from '../src/webhooks/delivery-queue.js';
import { createDeliveryWorker, type DeliveryWorker } from '../src/webhooks/delivery-worker.js';
import { MAX_RETRY_AFTER_MS, nextRetryDelay, RETRY_DELAYS_MS } from '../src/webhooks/retry-schedule.js';
import { createSecretBox } from '../src/webhooks/secret-box.js';
import { type Resolver, UrlPolicy } from '../src/webhooks/url-policy.js';
import { openTestDatabase } from './helpers.js';
import { type Receiver, startReceiver } from './webhook-receiver.js';

// The worker on its own, with a clock the tests move: the whole ten-attempt schedule runs in
// milliseconds, and every failure mode of a receiver is checked attempt by attempt.
const logger = createLogger('silent');
const secrets = createSecretBox(randomBytes(32));
const SECOND = 1000;
const HOUR = 3_600_000;

let handle: Awaited<ReturnType<typeof openTestDatabase>>;
let receiver: Receiver;
let now = Date.parse('2026-11-22T12:00:00.000Z');
const clock = () => now;

/** DNS as the tests want it: `rebind.example.com` answers whatever `rebindAnswers` says next. */
let rebindAnswers: string[] = [];
const resolver: Resolver = async (hostname) => {
  if (hostname === 'rebind.example.com') {
    const address = rebindAnswers.length > 1 ? rebindAnswers.shift()! : rebindAnswers[0]!;
    return [{ address, family: 4 }];
  }
  if (hostname === 'localhost') return [{ address: '127.0.0.1', family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};
const urlPolicy = new UrlPolicy({ allowedHosts: ['localhost'], resolve: resolver });
const deps = () => ({ db: handle.db, urlPolicy, secrets });

const workers: DeliveryWorker[] = [];
function worker(options: { timeoutMs?: number; random?: () => number; stopGraceMs?: number } = {}): DeliveryWorker {
  // random 0.5 means no jitter, so next-attempt times are exact.
  const w = createDeliveryWorker({ ...deps(), logger, clock, random: () => 0.5, timeoutMs: 1_000, ...options });
  workers.push(w);
  return w;
}

beforeAll(async () => {
  handle = await openTestDatabase();
  receiver = await startReceiver();
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
  // Tests share the database and the clock: what one leaves due must not land in the next one's drain.
  await handle.db.updateTable('webhook_deliveries').set({ due_at: null }).execute();
  receiver.handle((_req, res) => res.writeHead(204).end());
});
afterAll(async () => {
  await receiver?.close();
  await handle?.close();
});

/** A shop with one customer and one subscription to points/added at a path of its own. */
async function setup(callbackUrl?: string) {
  const { shop } = await createShop(handle.db, 'Retry shop');
  await upsertCustomer(handle.db, shop.id, { shopifyCustomerId: 'c-1', email: 'c-1@example.com' });
  const path = `/hook/${newId()}`;
  const subscription = await createSubscription(deps(), shop.id, { topic: 'points/added', callbackUrl: callbackUrl ?? `https://localhost:${receiver.port}${path}` });
  const relay = createOutboxRelay({ db: handle.db, logger, handlers: [worker().outboxHandler] });
  // The customer's own events (customers/created) match no subscription; relay them out of the way.
  while ((await relay.relayBatch()) > 0);
  const emit = async () => {
    await changePoints(handle.db, shop.id, 'add', { customerIdentifier: 'c-1', amount: 1 });
    while ((await relay.relayBatch()) > 0);
    const row = await handle.db.selectFrom('webhook_deliveries').select('id').where('shop_id', '=', shop.id).orderBy('created_at', 'desc').orderBy('id', 'desc').executeTakeFirstOrThrow();
    return row.id;
  };
  return { shopId: shop.id, subscription, path, emit, requests: () => receiver.requests.filter((r) => r.path === path) };
}

describe('retry schedule', () => {
  it('is DESIGN\'s: 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h, with ±20 % jitter', () => {
    expect(RETRY_DELAYS_MS).toEqual([0, 5e3, 3e5, 18e5, 2 * HOUR, 5 * HOUR, 10 * HOUR, 14 * HOUR, 20 * HOUR, 24 * HOUR]);
    expect(nextRetryDelay(1, null, () => 0)).toBe(4_000);
    expect(nextRetryDelay(1, null, () => 0.999999)).toBeCloseTo(6_000, -1);
    expect(nextRetryDelay(9, null, () => 0.5)).toBe(24 * HOUR);
    expect(nextRetryDelay(10, null)).toBeNull();
    // Retry-After only ever pushes later, and at most 24 h.
    expect(nextRetryDelay(1, 600 * SECOND, () => 0.5)).toBe(600 * SECOND);
    expect(nextRetryDelay(2, 1 * SECOND, () => 0.5)).toBe(300 * SECOND);
    expect(nextRetryDelay(1, 3 * 24 * HOUR, () => 0.5)).toBe(MAX_RETRY_AFTER_MS);
  });

  it('walks all ten attempts against a receiver answering 500, never early, then fails', async () => {
    const s = await setup();
    receiver.handle((_req, res) => res.writeHead(500).end('boom'));
    const w = worker();
    const id = await s.emit();
    for (let attempt = 1; attempt <= 10; attempt++) {
      expect(await w.drain()).toBe(1);
      const d = await getDelivery(handle.db, s.shopId, id);
      expect(d.attemptCount).toBe(attempt);
      expect(d.attempts.at(-1)).toMatchObject({ trigger: 'scheduled', responseStatus: 500, error: 'HTTP 500', responseBody: 'boom', attemptedAt: new Date(now) });
      if (attempt === 10) {
        expect(d).toMatchObject({ status: 'failed', nextAttemptAt: null });
        break;
      }
      expect(d.status).toBe('retrying');
      expect(d.nextAttemptAt!.getTime() - now).toBe(RETRY_DELAYS_MS[attempt]);
      now = d.nextAttemptAt!.getTime() - 1;
      expect(await w.drain()).toBe(0); // not a millisecond early
      now += 1;
    }
    now += 48 * HOUR;
    expect(await w.drain()).toBe(0);
    expect(s.requests()).toHaveLength(10);
    // Every attempt carried the same webhook-id, and its own timestamp's signature (the fake clock's
    // timestamps are far from now, so standardwebhooks' 5-minute tolerance rules out verify()).
    expect(new Set(s.requests().map((r) => r.headers['webhook-id'])).size).toBe(1);
    const timestamps = s.requests().map((r) => Number(r.headers['webhook-timestamp']));
    expect(timestamps).toEqual([...timestamps].sort((x, y) => x - y));
    for (const r of s.requests()) {
      const expected = new Webhook(s.subscription.signingSecret, { format: 'raw' }).sign(r.headers['webhook-id']!, new Date(Number(r.headers['webhook-timestamp']) * 1000), r.body);
      expect(r.headers['webhook-signature']).toBe(expected);
    }
  });

  it('jitters each delay within ±20 %', async () => {
    const s = await setup();
    receiver.handle((_req, res) => res.writeHead(503).end());
    const low = worker({ random: () => 0 });
    const id = await s.emit();
    await low.drain(); // first attempt: immediate
    now = (await getDelivery(handle.db, s.shopId, id)).nextAttemptAt!.getTime();
    await low.drain();
    const d = await getDelivery(handle.db, s.shopId, id);
    expect(d.nextAttemptAt!.getTime() - now).toBe(0.8 * RETRY_DELAYS_MS[2]);
  });
});

describe('receiver failures: status, attempt record, next attempt', () => {
  it('a timeout', async () => {
    const s = await setup();
    receiver.handle(() => {}); // never answers
    const w = worker({ timeoutMs: 300 });
    const id = await s.emit();
    await w.drain();
    const d = await getDelivery(handle.db, s.shopId, id);
    expect(d).toMatchObject({ status: 'retrying', lastResponseStatus: null, lastError: 'timed out after 300 ms', nextAttemptAt: new Date(now + 5 * SECOND) });
    expect(d.attempts[0]!.durationMs).toBeGreaterThanOrEqual(250);
  });

  it('a connection reset', async () => {
    const s = await setup();
    receiver.handle((req) => req.socket.destroy());
    const w = worker();
    const id = await s.emit();
    await w.drain();
    const d = await getDelivery(handle.db, s.shopId, id);
    expect(d).toMatchObject({ status: 'retrying', lastResponseStatus: null, nextAttemptAt: new Date(now + 5 * SECOND) });
    expect(d.lastError).toMatch(/socket|closed|ECONNRESET/i);
  });

  it('410 Gone fails the delivery at once', async () => {
    const s = await setup();
    receiver.handle((_req, res) => res.writeHead(410).end('unsubscribed'));
    const w = worker();
    const id = await s.emit();
    await w.drain();
    expect(await getDelivery(handle.db, s.shopId, id)).toMatchObject({ status: 'failed', attemptCount: 1, lastResponseStatus: 410, nextAttemptAt: null });
    now += 48 * HOUR;
    await w.drain();
    expect((await getDelivery(handle.db, s.shopId, id)).attemptCount).toBe(1);
  });

  it('429 with Retry-After is honoured (later than the schedule), and clamped to 24 h', async () => {
    const s = await setup();
    receiver.handle((_req, res) => res.writeHead(429, { 'retry-after': '600' }).end());
    const w = worker();
    const id = await s.emit();
    await w.drain();
    expect(await getDelivery(handle.db, s.shopId, id)).toMatchObject({ status: 'retrying', lastResponseStatus: 429, nextAttemptAt: new Date(now + 600 * SECOND) });
    now += 600 * SECOND;
    receiver.handle((_req, res) => res.writeHead(503, { 'retry-after': String(7 * 24 * 3600) }).end());
    await w.drain();
    expect((await getDelivery(handle.db, s.shopId, id)).nextAttemptAt).toEqual(new Date(now + 24 * HOUR));
    now += 24 * HOUR;
    receiver.handle((_req, res) => res.writeHead(200).end('ok'));
    await w.drain();
    expect(await getDelivery(handle.db, s.shopId, id)).toMatchObject({ status: 'succeeded', attemptCount: 3, nextAttemptAt: null });
  });

  it('a redirect to the metadata address is not followed: one request, recorded as a failure', async () => {
    const s = await setup();
    receiver.handle((_req, res) => res.writeHead(302, { location: 'http://169.254.169.254/latest/meta-data/' }).end());
    const w = worker();
    const id = await s.emit();
    await w.drain();
    const d = await getDelivery(handle.db, s.shopId, id);
    expect(d).toMatchObject({ status: 'retrying', lastResponseStatus: 302, lastError: 'HTTP 302', nextAttemptAt: new Date(now + 5 * SECOND) });
    expect(d.attempts).toHaveLength(1);
    expect(s.requests()).toHaveLength(1);
  });
});

describe('SSRF at send time', () => {
  it('DNS rebinding: public when saved, private when sent: blocked and recorded, nothing reaches the address', async () => {
    rebindAnswers = ['93.184.216.34'];
    const s = await setup(`https://rebind.example.com:${receiver.port}/hook/rebind`);
    rebindAnswers = ['127.0.0.1'];
    const w = worker();
    const id = await s.emit();
    await w.drain();
    const d = await getDelivery(handle.db, s.shopId, id);
    expect(d).toMatchObject({ status: 'retrying', lastResponseStatus: null });
    expect(d.lastError).toMatch(/^blocked: .*private, loopback/);
    expect(receiver.requests.some((r) => r.path === '/hook/rebind')).toBe(false);
  });

  it('rebinding between the check and the connection is caught by the connect-time lookup', async () => {
    rebindAnswers = ['93.184.216.34'];
    const s = await setup(`https://rebind.example.com:${receiver.port}/hook/rebind-late`);
    // The pre-attempt URL check still sees the public address; the socket's lookup then sees loopback.
    rebindAnswers = ['93.184.216.34', '127.0.0.1'];
    const w = worker();
    const id = await s.emit();
    await w.drain();
    const d = await getDelivery(handle.db, s.shopId, id);
    expect(d.lastError).toMatch(/^blocked: .*rebind\.example\.com/);
    expect(d.lastResponseStatus).toBeNull();
    expect(receiver.requests.some((r) => r.path === '/hook/rebind-late')).toBe(false);
  });
});

describe('leases', () => {
  it('a claim whose worker died is resent after the lease, with the same webhook-id', async () => {
    const s = await setup();
    const id = await s.emit();
    // A worker claims it and dies before sending or recording anything.
    const [claimed] = await claimDueDeliveries(handle.db, { limit: 10, now: new Date(now), leaseMs: 32_000, token: 'dead-worker', maxInFlight: 32 });
    expect(claimed!.id).toBe(id);
    const w = worker();
    expect(await w.drain()).toBe(0); // still leased
    expect((await getDelivery(handle.db, s.shopId, id)).status).toBe('sending');
    now += 32_001;
    expect(await w.drain()).toBe(1);
    const d = await getDelivery(handle.db, s.shopId, id);
    expect(d).toMatchObject({ status: 'succeeded', attemptCount: 1 });
    expect(s.requests()).toHaveLength(1);
    expect(s.requests()[0]!.headers['webhook-id']).toBe(d.eventId);
  });

  it('a stopping worker hands unsent claims back: due again at once, as before, no attempt recorded', async () => {
    const s = await setup();
    receiver.handle(() => {}); // hangs: the attempt is still in flight when the worker stops
    const w = worker({ timeoutMs: 10_000, stopGraceMs: 100 });
    const id = await s.emit();
    w.start();
    await receiver.waitFor(receiver.requests.length + 1).catch(() => {});
    while (s.requests().length === 0) await new Promise((r) => setTimeout(r, 10));
    await w.stop();
    const row = await handle.db.selectFrom('webhook_deliveries').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    expect(row).toMatchObject({ status: 'pending', lease_token: null, attempt_count: 0 });
    expect(row.due_at!.getTime()).toBeLessThanOrEqual(now);
    receiver.handle((_req, res) => res.writeHead(204).end());
    await worker().drain();
    expect((await getDelivery(handle.db, s.shopId, id)).status).toBe('succeeded');
  });
});

describe('every topic is delivered, data being the resource after the change', () => {
  it('customers, points, orders, redemptions, referrals', async () => {
    const { shop } = await createShop(handle.db, 'All topics');
    // Every credit expires 10 days on, with a warning 3 days before (points/expiring, points/expired).
    await updateShopSettings(handle.db, shop.id, { expiry: { mode: 'per_earn', days: 10, warningDays: 3 } });
    const path = `/hook/${newId()}`;
    const subscriptions = await Promise.all(
      ['customers/*', 'points/*', 'orders/*', 'redemptions/*', 'referrals/*', 'tiers/*'].map((topic) =>
        createSubscription(deps(), shop.id, { topic, callbackUrl: `https://localhost:${receiver.port}${path}` }).catch(async () =>
          createSubscription(deps(), shop.id, { topic, callbackUrl: `https://localhost:${receiver.port}${path}?${topic}` }),
        ),
      ),
    );
    expect(subscriptions).toHaveLength(6);
    // A generous timeout: on a loaded machine a 1-s one failed a send, which then waited for its retry.
    const w = worker({ timeoutMs: 10_000 });
    const relay = createOutboxRelay({ db: handle.db, logger, handlers: [w.outboxHandler] });

    await upsertCustomer(handle.db, shop.id, { shopifyCustomerId: 'ref-1', email: 'ref-1@example.com' });
    await upsertCustomer(handle.db, shop.id, { shopifyCustomerId: 'ref-1', email: 'ref-1b@example.com' });
    await changePoints(handle.db, shop.id, 'add', { customerIdentifier: 'ref-1', amount: 500 });
    await changePoints(handle.db, shop.id, 'subtract', { customerIdentifier: 'ref-1', amount: 100 });
    await changePoints(handle.db, shop.id, 'set', { customerIdentifier: 'ref-1', amount: 300 });
    const { pointsRedemption } = await createPointsRedemption(handle.db, shop.id, { name: '$5 off', type: 'amount', discountPrefix: 'T-', rewardValue: 100, discountValue: 5 });
    const redeemed = await redeemPoints(handle.db, shop.id, { customerIdentifier: 'ref-1', pointsAmount: 100, rewardId: pointsRedemption._id });
    // The engine: a sign-up rule (points/earned), an order held as pending (orders/created,
    // points/pending), released (points/available), then refunded (orders/updated, points/clawed_back).
    await createEarningRule(handle.db, shop.id, { type: 'sign_up', name: 'Welcome', earnPoint: 10 });
    await createEarningRule(handle.db, shop.id, { type: 'place_order', name: '1 pt per $1', earnPoint: 1, spent: '1.00' });
    await updateShopSettings(handle.db, shop.id, { pendingDays: 1 });
    // The order used the code just redeemed (redemptions/used).
    const order = {
      customerIdentifier: 'ref-1', currency: 'USD', subtotal: '20.00', total: '20.00', status: 'paid', lineItems: [{ productId: 'p', quantity: 1, price: '20.00' }],
      discountCodes: [{ code: redeemed.discountCode.code, amount: '5.00' }],
    };
    await upsertOrder(handle.db, shop.id, 'O-1', order);
    expect(await pendingRelease.runDue(handle.db, new Date(Date.now() + 2 * 86_400_000), 10)).toBe(1);
    await upsertOrder(handle.db, shop.id, 'O-1', { ...order, status: 'refunded', refunded: '20.00' });
    const code = await getReferralCode(handle.db, shop.id, { customerIdentifier: 'ref-1' });
    await registerReferral(handle.db, shop.id, { referralCode: code, customer: { shopifyCustomerId: 'ref-2', email: 'ref-2@example.com' } });
    expect(await expiryWarnings.runDue(handle.db, new Date(Date.now() + 9 * 86_400_000), 100)).toBeGreaterThan(0);
    expect(await pointExpiry.runDue(handle.db, new Date(Date.now() + 14 * 86_400_000), 100)).toBeGreaterThan(0);
    // A tier, then a customer whose points reach it (tiers/changed).
    await createTier(handle.db, shop.id, { name: 'Gold', threshold: '5000', multiplier: '2' });
    await upsertCustomer(handle.db, shop.id, { shopifyCustomerId: 'vip', email: 'vip@example.com' });
    await changePoints(handle.db, shop.id, 'add', { customerIdentifier: 'vip', amount: 5000 });
    // Codes that end otherwise: one cancelled with its points back (redemptions/cancelled,
    // points/refunded), one of a reward expiring in 5 days, warned 2 days before (redemptions/expiring, redemptions/expired).
    const cancelled = await redeemPoints(handle.db, shop.id, { customerIdentifier: 'vip', pointsAmount: 100, rewardId: pointsRedemption._id });
    await cancelDiscountCode(handle.db, shop.id, cancelled.discountCode.code, { returnPoints: true });
    const { pointsRedemption: fiveDays } = await createPointsRedemption(handle.db, shop.id, {
      name: '$5 off for 5 days', type: 'amount', discountPrefix: 'E-', rewardValue: 100, discountValue: 5, expireDateType: 'days', expireDays: 5,
    });
    const expiring = await redeemPoints(handle.db, shop.id, { customerIdentifier: 'vip', pointsAmount: 100, rewardId: fiveDays._id });
    await updateShopSettings(handle.db, shop.id, { codeWarningDays: 2 });
    expect(await codeWarnings.runDue(handle.db, new Date(Date.now() + 4 * 86_400_000), 100)).toBe(1);
    expect(await codeExpiry.runDue(handle.db, new Date(Date.now() + 6 * 86_400_000), 100)).toBe(1);
    // A customer erased on request (customers/erased).
    await upsertCustomer(handle.db, shop.id, { shopifyCustomerId: 'gone', email: 'gone@example.com' });
    const { customer: gone } = await eraseCustomer(handle.db, shop.id, { customerIdentifier: 'gone' });
    // Shopify asking for a customer's data (customers/data_requested).
    const dataRequest = { topic: 'customers/data_request' as const, customer: { id: 'vip', email: null }, orders: [], dataRequestId: '9999' };
    await inTransaction(handle.db, (trx) => answerShopifyCompliance(trx, shop.id, dataRequest, new Date(), 7));
    while ((await relay.relayBatch()) > 0);
    await w.drain();

    const received = receiver.requests.filter((r) => r.path.startsWith(path)).map((r) => JSON.parse(r.body));
    const byType = new Map(received.map((e) => [e.type, e]));
    // webhook_subscriptions/disabled comes from the worker itself: test/webhook-health.test.ts.
    const changeTopics = Object.keys(EVENT_TOPICS).filter((topic) => !topic.startsWith('webhook_subscriptions/'));
    expect([...byType.keys()].sort()).toEqual(changeTopics.sort());
    for (const e of received) expect(e).toMatchObject({ id: expect.stringMatching(/^evt_/), shopId: shop.id, timestamp: expect.any(String) });
    expect(byType.get('customers/updated').data).toMatchObject({ shopifyCustomerId: 'ref-1', email: 'ref-1b@example.com' });
    expect(byType.get('points/subtracted').data).toMatchObject({ type: 'subtract_points', oldPoints: 500, newPoints: 400 });
    expect(byType.get('customers/erased').data).toEqual({ customer: gone._id, erasedAt: expect.any(String) });
    expect(byType.get('customers/data_requested').data).toEqual({ customer: expect.any(String), complianceRequest: expect.any(String), shopifyDataRequestId: '9999' });
    expect(byType.get('points/updated').data).toMatchObject({ newPoints: 300 });
    // Deliveries run concurrently: they arrive in any order.
    const codeEvents = (type: string) => received.filter((e) => e.type === type).map((e) => [e.data.code, e.data.status]);
    expect(codeEvents('redemptions/created').sort()).toEqual([redeemed, cancelled, expiring].map((r) => [r.discountCode.code, 'issued']).sort());
    expect(codeEvents('redemptions/used')).toEqual([[redeemed.discountCode.code, 'used']]);
    expect(codeEvents('redemptions/cancelled')).toEqual([[cancelled.discountCode.code, 'cancelled']]);
    expect(codeEvents('redemptions/expiring')).toEqual([[expiring.discountCode.code, 'issued']]);
    expect(codeEvents('redemptions/expired')).toEqual([[expiring.discountCode.code, 'expired']]);
    expect(byType.get('points/refunded').data).toMatchObject({ type: 'refund_redemption', settingType: 'redemption', oldPoints: 4910, newPoints: 5010 });
    expect(byType.get('referrals/code_created').data).toMatchObject({ referralCode: code, shopifyCustomerId: 'ref-1' });
    expect(byType.get('referrals/referee_created').data).toMatchObject({ referralCode: code });
    expect(byType.get('points/pending').data).toMatchObject({ points: 20 });
    expect(byType.get('points/available').data).toMatchObject({ type: 'earn_points', settingType: 'order', newPoints: 220 });
    expect(byType.get('points/clawed_back').data).toMatchObject({ type: 'clawback_points', oldPoints: 220, newPoints: 200 });
    expect(byType.get('orders/updated').data).toMatchObject({ orderId: 'O-1', status: 'refunded', pointsEarned: 0, pointsClawedBack: 20 });
    expect(byType.get('points/earned').data).toMatchObject({ type: 'earn_points', settingType: 'rule', newPoints: 10 });
    expect(byType.get('points/expiring').data).toMatchObject({ points: expect.any(Number), expiresAt: expect.any(String) });
    expect(byType.get('points/expired').data).toMatchObject({ type: 'expire_points', settingType: 'expiry', newPoints: 0 });
    expect(byType.get('tiers/changed').data).toMatchObject({ previousTier: null, tier: { name: 'Gold', multiplier: '2' }, reason: 'upgrade' });
  });
});

describe('retention', () => {
  it('purges finished deliveries older than the retention age, with their attempts, in batches; keeps the rest', async () => {
    const s = await setup();
    const w = worker();
    const ids = [];
    for (let i = 0; i < 5; i++) ids.push(await s.emit());
    await w.drain();
    const old = new Date(now - 31 * 24 * HOUR);
    await handle.db.updateTable('webhook_deliveries').set({ created_at: old }).where('id', 'in', ids.slice(0, 4)).execute();
    // One old delivery still has work to do: it stays.
    await handle.db.updateTable('webhook_deliveries').set({ due_at: new Date(now + HOUR), status: 'retrying' }).where('id', '=', ids[0]!).execute();
    expect(await purgeDeliveries(handle.db, new Date(now - 30 * 24 * HOUR), { batchSize: 2 })).toBe(3);
    const left = await handle.db.selectFrom('webhook_deliveries').select('id').where('id', 'in', ids).execute();
    expect(left.map((r) => r.id).sort()).toEqual([ids[0]!, ids[4]!].sort());
    const orphanAttempts = await handle.db.selectFrom('webhook_delivery_attempts').select('id').where('delivery_id', 'in', ids.slice(1, 4)).execute();
    expect(orphanAttempts).toEqual([]);
    expect(await w.purge()).toBe(0); // the worker's own purge (30 days by default) finds nothing more
  });
});

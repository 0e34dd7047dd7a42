import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/domain/kernel/ids.js';
import { startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';
import { type Receiver, startReceiver, verifyDelivery } from './webhook-receiver.js';

// End to end: the server (relay and delivery worker inside) sends to a real HTTPS receiver on
// loopback, whose self-signed certificate it trusts through NODE_EXTRA_CA_CERTS.
const V1 = '/rest-api/v1';

let t: TestApp;
let receiver: Receiver;
let a: { shopId: string; apiKey: string };
let b: { shopId: string; apiKey: string };

beforeAll(async () => {
  receiver = await startReceiver();
  t = await startTestApp({ WEBHOOK_ALLOWED_HOSTS: 'localhost' });
  a = await t.shop('Deliveries A');
  b = await t.shop('Deliveries B');
  await t.customer(a.shopId, 'd-1', 100);
  // A subscription gets the events relayed after it exists: let the relay take the set-up's first,
  // so the tests' subscriptions see only the tests' own events.
  await until(async () => (await t.app.database.db.selectFrom('outbox_events').select('id').where('relayed_at', 'is', null).execute()).length === 0, 10_000, 'the set-up\'s events relayed');
});
afterAll(async () => {
  await t?.stop();
  await receiver?.close();
});

async function call(method: string, path: string, apiKey: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${t.url}${V1}${path}`, {
    method,
    headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function subscribe(apiKey: string, topic: string, path = `/hook/${newId()}`) {
  const res = await call('POST', '/webhooks/subscriptions', apiKey, { topic, callbackUrl: `${receiver.url.replace('/hook', '')}${path}` });
  expect(res.status).toBe(201);
  return res.body.subscription as { id: string; callbackUrl: string; signingSecret: string };
}

/** The requests that reached `subscription`'s URL so far. */
function requestsFor(subscription: { callbackUrl: string }) {
  return receiver.requests.filter((r) => subscription.callbackUrl.endsWith(r.path));
}

async function waitForRequests(subscription: { callbackUrl: string }, count: number, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  while (requestsFor(subscription).length < count) {
    if (Date.now() > deadline) throw new Error(`${requestsFor(subscription).length} of ${count} requests arrived`);
    await new Promise((r) => setTimeout(r, 10));
  }
  return requestsFor(subscription);
}

async function waitForDelivery(apiKey: string, id: string, until: (d: any) => boolean, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await call('GET', `/webhooks/deliveries/${id}`, apiKey);
    if (until(res.body.delivery)) return res.body.delivery;
    if (Date.now() > deadline) throw new Error(`delivery ${id} stayed ${JSON.stringify(res.body.delivery)}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('delivering committed events to a real HTTPS receiver', () => {
  it('signs every delivery so that standardwebhooks verifies it, with the DESIGN headers and envelope, promptly', async () => {
    const sub = await subscribe(a.apiKey, 'points/*');
    const started = Date.now();
    const res = await t.post(`${V1}/points/add`, { customerIdentifier: 'd-1', amount: 7 }, a.apiKey);
    expect(res.status).toBe(200);
    const { activity } = (await res.json()) as { activity: { _id: string } };
    const [request] = await waitForRequests(sub, 1);
    // Woken by the commit, not by a poll; a loose bound so a loaded CI box passes (the bench measures p50/p99).
    expect(request!.receivedAt - started).toBeLessThan(5_000);

    const envelope = verifyDelivery(sub.signingSecret, request!) as any;
    expect(envelope).toEqual({
      id: expect.stringMatching(/^evt_/),
      type: 'points/added',
      timestamp: expect.stringMatching(/Z$/),
      shopId: a.shopId,
      data: expect.objectContaining({ _id: activity._id, oldPoints: 100, newPoints: 107 }),
    });
    // Minified JSON, signed byte for byte.
    expect(request!.body).toBe(JSON.stringify(JSON.parse(request!.body)));
    expect(request!.headers).toMatchObject({
      'webhook-id': envelope.id,
      'webhook-topic': 'points/added',
      'webhook-delivery-id': expect.stringMatching(/^[0-9a-f]{24}$/),
      'content-type': 'application/json',
      'user-agent': expect.stringContaining('loyalty-service-webhooks'),
    });
    expect(Math.abs(Number(request!.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(5);
    expect(request!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/=]+$/);

    const delivery = await waitForDelivery(a.apiKey, request!.headers['webhook-delivery-id']!, (d) => d.status === 'succeeded');
    expect(delivery).toMatchObject({
      subscriptionId: sub.id,
      eventId: envelope.id,
      topic: 'points/added',
      attemptCount: 1,
      lastResponseStatus: 204,
      lastError: null,
      nextAttemptAt: null,
      payload: envelope,
      attempts: [expect.objectContaining({ trigger: 'scheduled', url: sub.callbackUrl, responseStatus: 204, error: null })],
    });
  });

  it('signs with every valid secret, newest first, during a rotation grace period; after grace 0 only the new one', async () => {
    const sub = await subscribe(a.apiKey, 'points/added');
    const rotated = await call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, a.apiKey, { graceHours: 1 });
    const second = rotated.body.subscription.signingSecret as string;
    await t.post(`${V1}/points/add`, { customerIdentifier: 'd-1', amount: 1 }, a.apiKey);
    const [during] = await waitForRequests(sub, 1);
    expect(during!.headers['webhook-signature']!.split(' ')).toHaveLength(2);
    // Each secret alone verifies: a receiver on the old one keeps working through the grace period.
    expect(verifyDelivery(sub.signingSecret, during!)).toBeTruthy();
    expect(verifyDelivery(second, during!)).toBeTruthy();
    const [newest] = during!.headers['webhook-signature']!.split(' ');
    expect(verifyDelivery(second, { ...during!, headers: { ...during!.headers, 'webhook-signature': newest! } })).toBeTruthy();

    const third = (await call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, a.apiKey, { graceHours: 0 })).body.subscription.signingSecret;
    await t.post(`${V1}/points/add`, { customerIdentifier: 'd-1', amount: 1 }, a.apiKey);
    const after = (await waitForRequests(sub, 2))[1]!;
    expect(after.headers['webhook-signature']!.split(' ')).toHaveLength(1);
    expect(verifyDelivery(third, after)).toBeTruthy();
    expect(() => verifyDelivery(second, after)).toThrow();
    expect(() => verifyDelivery(sub.signingSecret, after)).toThrow();
  });

  it('delivers only to matching subscriptions of the event\'s own shop: exact topic or group/*', async () => {
    const exact = await subscribe(a.apiKey, 'customers/created');
    const group = await subscribe(a.apiKey, 'customers/*');
    const other = await subscribe(a.apiKey, 'redemptions/created');
    const foreign = await subscribe(b.apiKey, 'customers/*');
    await t.customer(a.shopId, 'match-1');
    await waitForRequests(exact, 1);
    await waitForRequests(group, 1);
    await new Promise((r) => setTimeout(r, 300));
    expect(requestsFor(other)).toHaveLength(0);
    expect(requestsFor(foreign)).toHaveLength(0);
    expect(JSON.parse(requestsFor(group)[0]!.body)).toMatchObject({ type: 'customers/created', data: { shopifyCustomerId: 'match-1' } });
  });
});

describe('deliveries over REST and GraphQL', () => {
  it('lists newest first with filters and pages; a delivery with attempts and payload; 404 for another shop\'s', async () => {
    const sub = await subscribe(a.apiKey, 'points/subtracted');
    for (let i = 0; i < 3; i++) await t.post(`${V1}/points/substract`, { customerIdentifier: 'd-1', amount: 1 }, a.apiKey);
    await waitForRequests(sub, 3);
    const list = await call('GET', `/webhooks/deliveries?subscriptionId=${sub.id}&pageSize=2&page=1`, a.apiKey);
    expect(list.status).toBe(200);
    expect(list.body.deliveries).toHaveLength(2);
    const page2 = await call('GET', `/webhooks/deliveries?subscriptionId=${sub.id}&pageSize=2&page=2`, a.apiKey);
    expect(page2.body.deliveries).toHaveLength(1);
    expect(page2.body.nextCursor).toBeNull();
    // The cursor of page 1 leads to the same last delivery; other shops' keys see nothing past it.
    const after = await call('GET', `/webhooks/deliveries?subscriptionId=${sub.id}&pageSize=2&after=${list.body.nextCursor}`, a.apiKey);
    expect(after.body).toMatchObject({ deliveries: page2.body.deliveries, nextCursor: null });
    expect((await call('GET', `/webhooks/deliveries?after=${list.body.nextCursor}`, b.apiKey)).body.deliveries).toEqual([]);
    const all = [...list.body.deliveries, ...page2.body.deliveries];
    expect(all.map((d) => d.createdAt)).toEqual([...all.map((d) => d.createdAt)].sort().reverse());
    expect(Object.keys(all[0]).sort()).toEqual(
      ['id', 'subscriptionId', 'eventId', 'topic', 'status', 'attemptCount', 'lastAttemptAt', 'nextAttemptAt', 'lastResponseStatus', 'lastError', 'createdAt', 'updatedAt'].sort(),
    );
    expect((await call('GET', '/webhooks/deliveries?topic=points/subtracted', a.apiKey)).body.deliveries.every((d: any) => d.topic === 'points/subtracted')).toBe(true);
    expect((await call('GET', '/webhooks/deliveries?topic=points/*&pageSize=250', a.apiKey)).body.deliveries.every((d: any) => d.topic.startsWith('points/'))).toBe(true);
    expect((await call('GET', '/webhooks/deliveries?status=failed', a.apiKey)).body.deliveries).toEqual([]);
    expect((await call('GET', '/webhooks/deliveries?status=nope', a.apiKey)).status).toBe(400);
    expect((await call('GET', '/webhooks/deliveries?pageSize=251', a.apiKey)).status).toBe(400);
    // Numbered pages stop at the newest 10,000; deeper reads follow nextCursor.
    expect((await call('GET', '/webhooks/deliveries?pageSize=250&page=40', a.apiKey)).status).toBe(200);
    const deep = await call('GET', '/webhooks/deliveries?pageSize=250&page=41', a.apiKey);
    expect(deep.status).toBe(400);
    expect(deep.body).toMatchObject({ success: false, details: [expect.objectContaining({ path: 'page', message: expect.stringContaining('after=<nextCursor>') })] });
    expect((await call('GET', `/webhooks/deliveries?page=2&after=${list.body.nextCursor}`, a.apiKey)).status).toBe(400);
    expect((await call('GET', '/webhooks/deliveries?after=not-a-cursor', a.apiKey)).body).toMatchObject({ details: [expect.objectContaining({ path: 'after' })] });
    expect((await call('GET', '/webhooks/deliveries?subscriptionId=xyz', a.apiKey)).status).toBe(400);
    expect((await call('GET', `/webhooks/deliveries?subscriptionId=${sub.id}`, b.apiKey)).body.deliveries).toEqual([]);

    const one = await call('GET', `/webhooks/deliveries/${all[0].id}`, a.apiKey);
    expect(one.body.delivery).toMatchObject({ id: all[0].id, attempts: [expect.objectContaining({ responseStatus: 204 })], payload: { type: 'points/subtracted' } });
    expect((await call('GET', `/webhooks/deliveries/${all[0].id}`, b.apiKey)).status).toBe(404);
    expect((await call('GET', '/webhooks/deliveries/abc', a.apiKey)).status).toBe(400);

    const gql = await t.graphql(
      a.apiKey,
      `query($sub: ID) { webhookDeliveries(first: 2, subscriptionId: $sub, status: succeeded) {
          edges { node { id status attemptCount topic } } pageInfo { hasNextPage endCursor } } }`,
      { sub: sub.id },
    );
    expect(gql.data.webhookDeliveries.edges.map((e: any) => e.node.id)).toEqual(list.body.deliveries.map((d: any) => d.id));
    expect(gql.data.webhookDeliveries.pageInfo.hasNextPage).toBe(true);
    const next = await t.graphql(a.apiKey, `query($sub: ID, $after: String) { webhookDeliveries(first: 2, subscriptionId: $sub, after: $after) { edges { node { id } } } }`, {
      sub: sub.id,
      after: gql.data.webhookDeliveries.pageInfo.endCursor,
    });
    expect(next.data.webhookDeliveries.edges.map((e: any) => e.node.id)).toEqual(page2.body.deliveries.map((d: any) => d.id));
    const single = await t.graphql(a.apiKey, `query($id: ID!) { webhookDelivery(id: $id) { id payload attempts { trigger responseStatus durationMs } } }`, { id: all[0].id });
    expect(JSON.parse(single.data.webhookDelivery.payload)).toMatchObject({ type: 'points/subtracted' });
    expect(single.data.webhookDelivery.attempts).toEqual([expect.objectContaining({ trigger: 'scheduled', responseStatus: 204 })]);
    expect((await t.graphql(b.apiKey, `query($id: ID!) { webhookDelivery(id: $id) { id } }`, { id: all[0].id })).data.webhookDelivery).toBeNull();
  });

  it('replays: 202, a manual attempt with the same webhook-id, a fresh timestamp and the current URL and secrets', async () => {
    const sub = await subscribe(a.apiKey, 'points/updated');
    await t.post(`${V1}/points/update`, { customerIdentifier: 'd-1', amount: 50 }, a.apiKey);
    const [first] = await waitForRequests(sub, 1);
    const deliveryId = first!.headers['webhook-delivery-id']!;
    await waitForDelivery(a.apiKey, deliveryId, (d) => d.status === 'succeeded');

    // Move the endpoint and rotate the secret (grace 0): the replay must use both.
    const moved = `${receiver.url.replace('/hook', '')}/hook/${newId()}`;
    expect((await call('PUT', `/webhooks/subscriptions/${sub.id}`, a.apiKey, { callbackUrl: moved })).status).toBe(200);
    const secret = (await call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, a.apiKey, { graceHours: 0 })).body.subscription.signingSecret;
    await new Promise((r) => setTimeout(r, 1_100)); // so the fresh timestamp is visibly fresh

    expect((await call('POST', `/webhooks/deliveries/${deliveryId}/replay`, b.apiKey)).status).toBe(404);
    const replay = await call('POST', `/webhooks/deliveries/${deliveryId}/replay`, a.apiKey);
    expect(replay.status).toBe(202);
    expect(replay.body).toMatchObject({ success: true, delivery: { id: deliveryId } });
    const [again] = await waitForRequests({ callbackUrl: moved }, 1);
    expect(again!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(Number(again!.headers['webhook-timestamp'])).toBeGreaterThan(Number(first!.headers['webhook-timestamp']));
    expect(again!.body).toBe(first!.body);
    expect(verifyDelivery(secret, again!)).toBeTruthy();

    const delivery = await waitForDelivery(a.apiKey, deliveryId, (d) => d.attemptCount === 2);
    expect(delivery).toMatchObject({ status: 'succeeded', nextAttemptAt: null });
    expect(delivery.attempts.map((x: any) => [x.trigger, x.url])).toEqual([
      ['scheduled', sub.callbackUrl],
      ['manual', moved],
    ]);

    // The GraphQL twin.
    const gql = await t.graphql(a.apiKey, `mutation($id: ID!) { webhookDeliveryReplay(input: { id: $id }) { webhookDelivery { id } userErrors { code } } }`, { id: deliveryId });
    expect(gql.data.webhookDeliveryReplay).toEqual({ webhookDelivery: { id: deliveryId }, userErrors: [] });
    await waitForRequests({ callbackUrl: moved }, 2);
    const foreign = await t.graphql(b.apiKey, `mutation($id: ID!) { webhookDeliveryReplay(input: { id: $id }) { webhookDelivery { id } userErrors { code } } }`, { id: deliveryId });
    expect(foreign.data.webhookDeliveryReplay).toEqual({ webhookDelivery: null, userErrors: [expect.objectContaining({ code: 'delivery_not_found' })] });
  });

  it('deleting a subscription mid-retry cancels its deliveries; their records stay queryable', async () => {
    const failing = `/hook/fail-${newId()}`;
    receiver.handle((req, res) => (req.url === failing ? res.writeHead(500).end('down') : res.writeHead(204).end()));
    try {
      const sub = await subscribe(a.apiKey, 'points/added', failing);
      await t.post(`${V1}/points/add`, { customerIdentifier: 'd-1', amount: 2 }, a.apiKey);
      const [request] = await waitForRequests(sub, 1);
      const deliveryId = request!.headers['webhook-delivery-id']!;
      const retrying = await waitForDelivery(a.apiKey, deliveryId, (d) => d.status === 'retrying');
      expect(retrying).toMatchObject({ attemptCount: 1, lastResponseStatus: 500, lastError: 'HTTP 500' });
      expect(new Date(retrying.nextAttemptAt).getTime() - new Date(retrying.lastAttemptAt).getTime()).toBeGreaterThanOrEqual(4_000);
      expect(retrying.attempts[0].responseBody).toBe('down');

      expect((await call('DELETE', `/webhooks/subscriptions/${sub.id}`, a.apiKey)).status).toBe(200);
      const cancelled = (await call('GET', `/webhooks/deliveries/${deliveryId}`, a.apiKey)).body.delivery;
      expect(cancelled).toMatchObject({ status: 'cancelled', nextAttemptAt: null, attemptCount: 1 });
      expect((await call('GET', `/webhooks/deliveries?subscriptionId=${sub.id}&status=cancelled`, a.apiKey)).body.deliveries).toHaveLength(1);
      expect((await call('POST', `/webhooks/deliveries/${deliveryId}/replay`, a.apiKey)).body).toMatchObject({ error: 'subscription_deleted' });
      await new Promise((r) => setTimeout(r, 5_500)); // past the 5 s retry: nothing more is sent
      expect(requestsFor(sub)).toHaveLength(1);
    } finally {
      receiver.handle((_req, res) => res.writeHead(204).end());
    }
  });
});

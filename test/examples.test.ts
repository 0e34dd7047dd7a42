import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort, startTestApp, type TestApp } from './helpers.js';
import { until } from './live-helpers.js';

// Each example in examples/ runs as its own process (`node --import tsx examples/x.ts`), as its
// header says, against a real server; we read what it prints.

const ROOT = fileURLToPath(new URL('..', import.meta.url));

type Example = { child: ChildProcess; stdout: string[]; stderr: string[]; exited: Promise<number | null> };
const running: Example[] = [];

function runExample(file: string, args: string[], env: Record<string, string>): Example {
  const child = spawn(process.execPath, ['--import', 'tsx', `examples/${file}`, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const example: Example = { child, stdout: [], stderr: [], exited: once(child, 'exit').then(([code]) => code as number | null) };
  const lines = (target: string[]) => {
    let rest = '';
    return (chunk: Buffer) => {
      const parts = (rest + chunk.toString('utf8')).split('\n');
      rest = parts.pop()!;
      target.push(...parts);
    };
  };
  child.stdout!.on('data', lines(example.stdout));
  child.stderr!.on('data', lines(example.stderr));
  running.push(example);
  return example;
}

let t: TestApp;
let shop: { shopId: string; apiKey: string };

beforeAll(async () => {
  const redis = process.env.TEST_REDIS_URL;
  t = await startTestApp({
    WEBHOOK_ALLOWED_HOSTS: 'localhost',
    ...(redis ? { REDIS_URL: redis, REDIS_KEY_PREFIX: `test:${randomBytes(4).toString('hex')}:` } : {}),
  });
  shop = await t.shop('Examples');
});
afterEach(async () => {
  for (const example of running.splice(0)) {
    if (example.child.exitCode === null && example.child.signalCode === null) example.child.kill('SIGTERM');
    await example.exited;
  }
});
afterAll(() => t?.stop());

const env = () => ({ LOYALTY_URL: t.url, LOYALTY_API_KEY: shop.apiKey });

async function addPoints(customerIdentifier: string, amount: number): Promise<{ _id: string }> {
  const res = await t.post('/rest-api/v1/points/add', { customerIdentifier, amount }, shop.apiKey);
  expect(res.status).toBe(200);
  return (await res.json()).activity;
}

describe('examples/storefront.ts', () => {
  it('looks the customer up, lists redeemable rewards, redeems one and prints a code that is in the database', async () => {
    await t.customer(shop.shopId, 'store-1', 250);
    const created = await t.graphql(
      shop.apiKey,
      'mutation($input: PointsRedemptionInput!) { pointsRedemptionCreate(input: $input) { pointsRedemption { _id } userErrors { code } } }',
      { input: { name: '$5 off', type: 'amount', discountPrefix: 'EX-', rewardValue: 100, discountValue: 5 } },
    );
    const rewardId = created.data.pointsRedemptionCreate.pointsRedemption._id;
    await t.graphql(shop.apiKey, 'mutation($input: PointsRedemptionInput!) { pointsRedemptionCreate(input: $input) { userErrors { code } } }', {
      input: { name: 'Too dear', type: 'amount', discountPrefix: 'NO-', rewardValue: 10_000, discountValue: 500 },
    });

    const example = runExample('storefront.ts', ['store-1@example.com'], env());
    expect(await example.exited, example.stderr.join('\n')).toBe(0);
    const out = example.stdout.join('\n');
    expect(out).toContain('Customer store-1@example.com: 250 points');
    expect(out).toContain(`${rewardId}  $5 off (100 points, amount 5)`);
    expect(out).not.toContain('Too dear');
    const code = /^Discount code: (\S+)/m.exec(out)?.[1];
    expect(code).toMatch(/^EX-[A-Z0-9]{10}$/);

    const row = await t.app.database.db
      .selectFrom('discount_codes')
      .innerJoin('customers', 'customers.id', 'discount_codes.customer_id')
      .select(['discount_codes.shop_id', 'discount_codes.reward_id', 'discount_codes.points_amount', 'customers.shopify_customer_id', 'customers.points'])
      .where('discount_codes.code', '=', code!)
      .executeTakeFirst();
    expect(row).toEqual({ shop_id: shop.shopId, reward_id: rewardId, points_amount: 100, shopify_customer_id: 'store-1', points: 150 });
  });

  it('says so and exits 1 for an unknown customer', async () => {
    const example = runExample('storefront.ts', ['nobody@example.com'], env());
    expect(await example.exited).toBe(1);
    expect(example.stderr.join('\n')).toContain('No customer "nobody@example.com"');
  });
});

describe('examples/shopify-replay.ts', () => {
  it('signs and sends the sample webhooks, waits until they are applied and prints what the order earned; a replay is all duplicates', async () => {
    const connector = await t.shop('Shopify replay');
    await t.graphql(connector.apiKey, 'mutation { earningRuleCreate(input: { type: place_order, name: "1 point per $1", earnPoint: 1, spent: "1.00" }) { userErrors { message } } }');
    const secret = randomBytes(16).toString('hex');
    const shopDomain = `replay-${randomBytes(4).toString('hex')}.myshopify.com`;
    const connected = await t.graphql(connector.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { userErrors { code } } }', { i: { shopDomain, webhookSecret: secret } });
    expect(connected.data.shopifySettingsUpdate.userErrors).toEqual([]);
    const replayEnv = { LOYALTY_URL: t.url, LOYALTY_API_KEY: connector.apiKey, SHOPIFY_SHOP_DOMAIN: shopDomain, SHOPIFY_WEBHOOK_SECRET: secret };

    const first = runExample('shopify-replay.ts', ['examples/shopify-sample.ndjson'], replayEnv);
    expect(await first.exited, first.stderr.join('\n')).toBe(0);
    expect(first.stdout).toContain('Sent 4 webhook(s): 4 accepted, 0 duplicate, 0 rejected.');
    const res = await fetch(`${t.url}/rest-api/v1/orders/5550001001`, { headers: { authorization: `Bearer ${connector.apiKey}` } });
    const { order } = await res.json();
    // $83.00 of lines after discounts; the tote ($18.00) returned leaves $65.00, and the $1.44 of its
    // tax refunded beyond the units shrinks that in proportion, 65 × 77.19 / 78.63: 63 points. Taken
    // back from 83 if the refund was applied after the payment, never credited if they came together.
    expect(order).toMatchObject({ total: '96.63', refunded: '19.44', pointsEarned: 63 });
    expect([0, 20]).toContain(order.pointsClawedBack);
    expect(first.stdout).toContain(`Order 5550001001: ${order.status}, total 96.63, refunded 19.44: ${order.pointsEarned} points (0 pending, ${order.pointsClawedBack} clawed back)`);
    const customer = await t.app.database.db.selectFrom('customers').select(['email', 'points']).where('shop_id', '=', connector.shopId).where('shopify_customer_id', '=', '7301234567890').executeTakeFirst();
    expect(customer).toEqual({ email: 'ada@example.com', points: order.pointsEarned });

    const again = runExample('shopify-replay.ts', ['examples/shopify-sample.ndjson'], replayEnv);
    expect(await again.exited, again.stderr.join('\n')).toBe(0);
    expect(again.stdout).toContain('Sent 4 webhook(s): 0 accepted, 4 duplicate, 0 rejected.');
    expect((await t.app.database.db.selectFrom('customers').select('points').where('shop_id', '=', connector.shopId).executeTakeFirstOrThrow()).points).toBe(order.pointsEarned);
  });
});

describe('examples/webhook-receiver.ts', () => {
  it('verifies signatures and prints each event once, also when a delivery is replayed', async () => {
    await t.customer(shop.shopId, 'hook-1', 0);
    const port = await freePort();
    const created = await t.graphql(
      shop.apiKey,
      'mutation($input: WebhookSubscriptionCreateInput!) { webhookSubscriptionCreate(input: $input) { webhookSubscription { id } signingSecret userErrors { code message } } }',
      { input: { topic: 'points/*', callbackUrl: `https://localhost:${port}/hook` } },
    );
    const { webhookSubscription, signingSecret, userErrors } = created.data.webhookSubscriptionCreate;
    expect(userErrors).toEqual([]);

    const receiver = runExample('webhook-receiver.ts', [], {
      LOYALTY_WEBHOOK_SECRET: signingSecret,
      PORT: String(port),
      TLS_KEY: process.env.TEST_TLS_KEY!,
      TLS_CERT: process.env.TEST_TLS_CERT!,
    });
    await until(() => receiver.stderr.some((l) => l.startsWith('listening on https://')), 30_000, 'the receiver to listen');

    const activities = [await addPoints('hook-1', 5), await addPoints('hook-1', 7)];
    await until(() => receiver.stdout.length >= 2, 15_000, 'two events printed');

    // Replay the first delivery: the same webhook-id arrives again and is acknowledged, not printed.
    const DELIVERIES = `query($sub: ID) { webhookDeliveries(subscriptionId: $sub, first: 10) { edges { node { id eventId status attemptCount } } } }`;
    const deliveries = async () =>
      (await t.graphql(shop.apiKey, DELIVERIES, { sub: webhookSubscription.id })).data.webhookDeliveries.edges.map((e: any) => e.node);
    const [first] = (await deliveries()).slice(-1);
    const replay = await t.graphql(shop.apiKey, 'mutation($input: WebhookDeliveryReplayInput!) { webhookDeliveryReplay(input: $input) { userErrors { code } } }', {
      input: { id: first.id },
    });
    expect(replay.data.webhookDeliveryReplay.userErrors).toEqual([]);
    await until(() => receiver.stderr.includes(`duplicate ${first.eventId} ignored`), 15_000, 'the replay to arrive');
    await until(async () => (await deliveries()).every((d: any) => d.status === 'succeeded'), 10_000, 'the replay to succeed');
    expect((await deliveries()).find((d: any) => d.id === first.id).attemptCount).toBe(2);

    // A forged request is refused and printed nowhere but stderr.
    const forged = await new Promise<number>((resolve, reject) => {
      const req = https.request(
        { host: 'localhost', port, path: '/hook', method: 'POST', ca: readFileSync(process.env.TEST_TLS_CERT!) },
        (res) => {
          res.resume();
          resolve(res.statusCode!);
        },
      );
      req.on('error', reject);
      req.setHeader('webhook-id', 'evt_forged');
      req.setHeader('webhook-timestamp', String(Math.floor(Date.now() / 1000)));
      req.setHeader('webhook-signature', `v1,${Buffer.alloc(32).toString('base64')}`);
      req.end(JSON.stringify({ id: 'evt_forged', type: 'points/added', data: {} }));
    });
    expect(forged).toBe(400);

    const printed = receiver.stdout.map((line) => line.split(' ') as [string, string, ...string[]]);
    expect(printed).toHaveLength(2);
    const eventIds = printed.map(([, id]) => id);
    expect(new Set(eventIds).size).toBe(2);
    expect(eventIds).toContain(first.eventId);
    expect(eventIds).not.toContain('evt_forged');
    expect(printed.map(([topic]) => topic)).toEqual(['points/added', 'points/added']);
    expect(printed.map((p) => JSON.parse(p.slice(2).join(' '))._id).sort()).toEqual(activities.map((a) => a._id).sort());
    await until(() => receiver.stderr.some((l) => l.startsWith('refused:')), 5_000, 'the refusal on stderr');
  });
});

describe('examples/dashboard-client.ts', () => {
  it('prints an event caused by a write, as it commits', async () => {
    await t.customer(shop.shopId, 'live-1', 0);
    const client = runExample('dashboard-client.ts', [], env());
    await until(() => client.stderr.some((l) => l.startsWith('following ')), 30_000, 'the client to subscribe');
    expect(client.stderr.find((l) => l.startsWith('following '))).toContain('points/*');

    // The subscription starts a moment after the line above; write until one of ours shows up.
    const ours = new Set<string>();
    const printedOurs = () => client.stdout.find((line) => [...ours].some((id) => line.includes(`"_id":"${id}"`)));
    for (let i = 0; i < 50 && !printedOurs(); i++) {
      ours.add((await addPoints('live-1', 1))._id);
      await until(() => Boolean(printedOurs()), 300, 'an event').catch(() => {});
    }
    const line = printedOurs();
    expect(line).toMatch(/^\d{4}-\d\d-\d\dT\S+Z points\/added evt_\S+ \{/);
    expect(JSON.parse(line!.split(' ').slice(3).join(' '))).toMatchObject({ type: 'add_points', shop: shop.shopId });
  });

  it('ends with an error for a refused key', async () => {
    const client = runExample('dashboard-client.ts', [], { LOYALTY_URL: t.url, LOYALTY_API_KEY: 'lk_aaaaaaaaaa_not-a-real-key' });
    expect(await client.exited).toBe(1);
  });
});

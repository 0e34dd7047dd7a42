import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EVENT_TOPICS } from '../src/domain/kernel/events.js';
import { newId } from '../src/domain/kernel/ids.js';
import { validSigningSecrets } from '../src/domain/webhooks/webhook-subscriptions.js';
import { createSecretBox } from '../src/webhooks/secret-box.js';
import { type Resolver, UrlPolicy } from '../src/webhooks/url-policy.js';
import { startTestApp, type TestApp } from './helpers.js';

/** DNS for these tests: a few names with fixed answers, everything else does not exist. */
const DNS: Record<string, string[]> = {
  'hooks.example.com': ['93.184.216.34'],
  'v6.example.com': ['2606:2800:220:1:248:1893:25c8:1946'],
  'rebind.example.com': ['127.0.0.1'],
  'mixed.example.com': ['93.184.216.34', '10.0.0.7'],
  'ula.example.com': ['fd00::1'],
  'mapped.example.com': ['::ffff:169.254.169.254'],
  'compat.example.com': ['::7f00:1'],
};
const testResolver: Resolver = async (hostname) => {
  const addresses = DNS[hostname];
  if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
  return addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
};

const SECRETS_KEY = randomBytes(32).toString('hex');
const V1 = '/rest-api/v1';
const SUBSCRIPTION_FIELDS = ['id', 'topic', 'callbackUrl', 'previousSecretValidUntil', 'status', 'disabledReason', 'createdAt', 'updatedAt'];
const ISO_MS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;
const HOUR = 3_600_000;

// The rate limiter's clock moves 13 s per request, so no test here trips a limit (5 per minute is
// the lowest) unless it stops the clock on purpose (`clockStep = 0`).
let now = Date.now();
let clockStep = 13_000;
const clock = () => (now += clockStep);

let t: TestApp;
let a: { shopId: string; apiKey: string };
let b: { shopId: string; apiKey: string };

beforeAll(async () => {
  t = await startTestApp({ SECRETS_KEY }, { resolveHost: testResolver, clock });
  a = await t.shop('Shop A');
  b = await t.shop('Shop B');
});
afterAll(() => t?.stop());

type Reply = { status: number; body: any; headers: Headers };

async function call(method: string, path: string, apiKey: string | undefined, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const res = await fetch(`${t.url}${V1}${path}`, {
    method,
    headers: {
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
      ...headers,
    },
    body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json(), headers: res.headers };
}

let urlCounter = 0;
const freshUrl = () => `https://hooks.example.com/hooks/${++urlCounter}`;

async function create(apiKey: string, topic = 'points/added', callbackUrl = freshUrl()) {
  const res = await call('POST', '/webhooks/subscriptions', apiKey, { topic, callbackUrl });
  expect(res.status).toBe(201);
  return res.body.subscription;
}

function withoutSecret({ signingSecret: _secret, ...subscription }: Record<string, unknown>) {
  return subscription;
}

function expectValidationError(res: Reply, path: string) {
  expect(res.status).toBe(400);
  expect(res.body).toMatchObject({ success: false, statusCode: 400, error: 'validation_error' });
  expect(res.body.details.map((d: { path: string }) => d.path)).toContain(path);
}

function expectError(res: Reply, status: number, error: string) {
  expect(res.status).toBe(status);
  expect(res.body).toMatchObject({ success: false, statusCode: status, error });
  expect(typeof res.body.message).toBe('string');
}

describe('GET /webhooks/topics', () => {
  it('lists the catalog, each topic with a one-line description', async () => {
    const res = await call('GET', '/webhooks/topics', a.apiKey);
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(typeof res.body.message).toBe('string');
    expect(res.body.topics.map((x: { topic: string }) => x.topic)).toEqual([
      'customers/created',
      'customers/updated',
      'customers/erased',
      'customers/data_requested',
      'points/added',
      'points/subtracted',
      'points/updated',
      'points/earned',
      'points/pending',
      'points/available',
      'points/clawed_back',
      'points/expiring',
      'points/expired',
      'points/refunded',
      'tiers/changed',
      'orders/created',
      'orders/updated',
      'redemptions/created',
      'redemptions/used',
      'redemptions/expiring',
      'redemptions/expired',
      'redemptions/cancelled',
      'referrals/code_created',
      'referrals/referee_created',
      'webhook_subscriptions/disabled',
    ]);
    for (const topic of res.body.topics) expect(topic.description).toMatch(/^[^\n]{10,}$/);
  });

  it('needs an API key', async () => {
    const res = await call('GET', '/webhooks/topics', undefined);
    expectError(res, 401, 'unauthorized');
    expect(res.headers.get('www-authenticate')).toBe('Bearer');
  });
});

describe('POST /webhooks/subscriptions', () => {
  it('creates a subscription: 201, the contract fields and the secret, once', async () => {
    const res = await call('POST', '/webhooks/subscriptions', a.apiKey, { topic: 'points/added', callbackUrl: 'https://hooks.example.com/loyalty' });
    expect(res.status).toBe(201);
    expect(res.body.success).toBe(true);
    expect(typeof res.body.message).toBe('string');
    const sub = res.body.subscription;
    expect(Object.keys(sub).sort()).toEqual([...SUBSCRIPTION_FIELDS, 'signingSecret'].sort());
    expect(sub).toMatchObject({ topic: 'points/added', callbackUrl: 'https://hooks.example.com/loyalty', previousSecretValidUntil: null });
    expect(sub.id).toMatch(/^[0-9a-f]{24}$/);
    expect(sub.signingSecret).toMatch(/^[0-9a-f]{64}$/);
    expect(sub.createdAt).toMatch(ISO_MS);
    expect(sub.updatedAt).toBe(sub.createdAt);
  });

  it('accepts the singular path of the reference heading, and group wildcards', async () => {
    const res = await call('POST', '/webhooks/subscription', a.apiKey, { topic: 'points/*', callbackUrl: freshUrl() });
    expect(res.status).toBe(201);
    expect(res.body.subscription.topic).toBe('points/*');
    expect(res.body.subscription.signingSecret).toMatch(/^[0-9a-f]{64}$/);
    for (const topic of ['customers/*', 'referrals/referee_created', 'redemptions/*']) await create(a.apiKey, topic);
  });

  it('stores the secret encrypted, not as it was handed out', async () => {
    const sub = await create(a.apiKey);
    const rows = await t.app.database.db.selectFrom('webhook_secrets').selectAll().where('subscription_id', '=', sub.id).execute();
    expect(rows).toHaveLength(1);
    expect(rows[0]!.sealed_secret).toMatch(/^v1:/);
    expect(rows[0]!.sealed_secret).not.toContain(sub.signingSecret);
    expect(Buffer.from(rows[0]!.sealed_secret.slice(3), 'base64url').toString('hex')).not.toContain(sub.signingSecret);
    const secrets = { db: t.app.database.db, secrets: createSecretBox(Buffer.from(SECRETS_KEY, 'hex')) };
    expect(await validSigningSecrets(secrets, sub.id)).toEqual([sub.signingSecret]);
  });

  it('answers 409 for a topic and callbackUrl pair the shop has, spelled the same or not', async () => {
    const url = freshUrl();
    await create(a.apiKey, 'points/subtracted', url);
    const same = await call('POST', '/webhooks/subscriptions', a.apiKey, { topic: 'points/subtracted', callbackUrl: url });
    expectError(same, 409, 'subscription_exists');
    const respelled = url.replace('https://hooks.example.com', 'HTTPS://HOOKS.EXAMPLE.COM:443');
    expectError(await call('POST', '/webhooks/subscriptions', a.apiKey, { topic: 'points/subtracted', callbackUrl: respelled }), 409, 'subscription_exists');
    // Another topic, or another shop, may use the URL.
    await create(a.apiKey, 'points/updated', url);
    await create(b.apiKey, 'points/subtracted', url);
  });

  const badBodies: Array<[string, unknown, string]> = [
    ['an unknown topic', { topic: 'points/exploded', callbackUrl: 'https://hooks.example.com/x' }, 'topic'],
    ['a wildcard of an unknown group', { topic: 'invoices/*', callbackUrl: 'https://hooks.example.com/x' }, 'topic'],
    ['a bare wildcard', { topic: '*', callbackUrl: 'https://hooks.example.com/x' }, 'topic'],
    ['an empty topic', { topic: '', callbackUrl: 'https://hooks.example.com/x' }, 'topic'],
    ['a topic of another case', { topic: 'Points/Added', callbackUrl: 'https://hooks.example.com/x' }, 'topic'],
    ['a missing topic', { callbackUrl: 'https://hooks.example.com/x' }, 'topic'],
    ['a missing callbackUrl', { topic: 'points/added' }, 'callbackUrl'],
    ['a callbackUrl that is no URL', { topic: 'points/added', callbackUrl: 'hooks.example.com/x' }, 'callbackUrl'],
    ['a callbackUrl of the wrong type', { topic: 'points/added', callbackUrl: 42 }, 'callbackUrl'],
    ['an oversized callbackUrl', { topic: 'points/added', callbackUrl: `https://hooks.example.com/${'x'.repeat(2100)}` }, 'callbackUrl'],
    ['an unknown field', { topic: 'points/added', callbackUrl: 'https://hooks.example.com/x', secret: 'mine' }, ''],
  ];
  it.each(badBodies)('refuses %s with 400', async (_name, body, path) => {
    expectValidationError(await call('POST', '/webhooks/subscriptions', a.apiKey, body), path);
  });

  it('refuses malformed JSON, a non-object body and a missing key', async () => {
    expectError(await call('POST', '/webhooks/subscriptions', a.apiKey, '{"topic":'), 400, 'malformed_json');
    expect((await call('POST', '/webhooks/subscriptions', a.apiKey, [])).status).toBe(400);
    expectError(await call('POST', '/webhooks/subscriptions', undefined, { topic: 'points/added', callbackUrl: freshUrl() }), 401, 'unauthorized');
  });
});

describe('SSRF: callback URLs that point inside are refused with 400', () => {
  const refused: Array<[string, string]> = [
    ['http://', 'http://hooks.example.com/x'],
    ['127.0.0.1', 'https://127.0.0.1/x'],
    ['localhost', 'https://localhost/x'],
    ['localhost.', 'https://localhost./x'],
    ['a.localhost', 'https://a.localhost/x'],
    ['[::1]', 'https://[::1]/x'],
    ['10/8', 'https://10.1.2.3/x'],
    ['172.16/12', 'https://172.16.0.1/x'],
    ['172.16/12, top end', 'https://172.31.255.254/x'],
    ['192.168/16', 'https://192.168.1.1/x'],
    ['100.64/10', 'https://100.64.0.1/x'],
    ['169.254.169.254', 'https://169.254.169.254/latest/meta-data/'],
    ['0.0.0.0', 'https://0.0.0.0/x'],
    ['0x7f000001', 'https://0x7f000001/x'],
    ['2130706433', 'https://2130706433/x'],
    ['127.1', 'https://127.1/x'],
    ['[::ffff:127.0.0.1]', 'https://[::ffff:127.0.0.1]/x'],
    ['[::ffff:a9fe:a9fe]', 'https://[::ffff:a9fe:a9fe]/x'],
    ['[fd00:ec2::254]', 'https://[fd00:ec2::254]/x'],
    ['[fe80::1]', 'https://[fe80::1]/x'],
    ['[64:ff9b::a00:1] (NAT64 of 10.0.0.1)', 'https://[64:ff9b::a00:1]/x'],
    ['[64:ff9b::808:808] (NAT64 of a public address: it still reaches whatever the NAT64 gateway can)', 'https://[64:ff9b::808:808]/x'],
    ['[64:ff9b:1::a00:1] (local-use NAT64)', 'https://[64:ff9b:1::a00:1]/x'],
    ['[::127.0.0.1] (IPv4-compatible loopback)', 'https://[::127.0.0.1]/x'],
    ['[::7f00:1] (the same, as URLs normalise it)', 'https://[::7f00:1]/x'],
    ['[::10.0.0.1] (IPv4-compatible private)', 'https://[::10.0.0.1]/x'],
    ['[::169.254.169.254] (IPv4-compatible metadata)', 'https://[::169.254.169.254]/x'],
    ['[::8.8.8.8] (IPv4-compatible, even of a public address: deprecated, never a real endpoint)', 'https://[::8.8.8.8]/x'],
    ['[0:0:0:0:0:0:7f00:1] (IPv4-compatible, spelt out)', 'https://[0:0:0:0:0:0:7f00:1]/x'],
    ['a name resolving to an IPv4-compatible address', 'https://compat.example.com/x'],
    ['user:password in the URL', 'https://user:secret@hooks.example.com/x'],
    ['a user name in the URL', 'https://user@hooks.example.com/x'],
    ['*.internal', 'https://metadata.google.internal/x'],
    ['a name resolving to 127.0.0.1', 'https://rebind.example.com/x'],
    ['a name resolving to a public and a private address', 'https://mixed.example.com/x'],
    ['a name resolving to unique-local IPv6', 'https://ula.example.com/x'],
    ['a name resolving to IPv4-mapped metadata', 'https://mapped.example.com/x'],
    ['ftp:', 'ftp://hooks.example.com/x'],
    ['javascript:', 'javascript:alert(1)'],
  ];
  it.each(refused)('refuses %s', async (_name, callbackUrl) => {
    const res = await call('POST', '/webhooks/subscriptions', a.apiKey, { topic: 'points/added', callbackUrl });
    expectValidationError(res, 'callbackUrl');
    // What a name resolves to inside our network is not the caller's business.
    expect(JSON.stringify(res.body)).not.toMatch(/127\.0\.0\.1|10\.0\.0\.7|fd00::1/);
  });

  it('names the setting that allows localhost, and refuses credentials in the URL with a clear message', async () => {
    const local = await call('POST', '/webhooks/subscriptions', a.apiKey, { topic: 'points/added', callbackUrl: 'https://localhost/hooks' });
    expectValidationError(local, 'callbackUrl');
    expect(local.body.message).toMatch(/WEBHOOK_ALLOWED_HOSTS/);
    const withPassword = await call('POST', '/webhooks/subscriptions', a.apiKey, { topic: 'points/added', callbackUrl: 'https://u:p@hooks.example.com/x' });
    expectValidationError(withPassword, 'callbackUrl');
    expect(withPassword.body.message).toMatch(/user name or password/);
    expect(JSON.stringify(withPassword.body)).not.toMatch(/u:p@/);
  });

  it('the same check guards PUT', async () => {
    const sub = await create(a.apiKey);
    for (const callbackUrl of ['http://hooks.example.com/x', 'https://rebind.example.com/x', 'https://[::1]/x']) {
      expectValidationError(await call('PUT', `/webhooks/subscriptions/${sub.id}`, a.apiKey, { callbackUrl }), 'callbackUrl');
    }
  });

  const accepted: Array<[string, string]> = [
    ['a name resolving to a public address', 'https://hooks.example.com/ok'],
    ['a name resolving to a public IPv6 address', 'https://v6.example.com/ok'],
    ['a name that does not resolve (yet)', 'https://not-yet.example.org/ok'],
    ['a public IP literal with a port', 'https://93.184.216.34:8443/ok'],
    ['172.32.0.1, just outside 172.16/12', 'https://172.32.0.1/ok'],
  ];
  it.each(accepted)('accepts %s', async (_name, callbackUrl) => {
    const sub = await create(a.apiKey, 'customers/created', callbackUrl);
    expect(sub.callbackUrl).toBe(callbackUrl);
  });

  it('WEBHOOK_ALLOWED_HOSTS opens named hosts, IPs and CIDRs, and nothing else', async () => {
    const local = await startTestApp({ WEBHOOK_ALLOWED_HOSTS: 'localhost, 127.0.0.1,10.0.0.0/8' }, { resolveHost: testResolver });
    try {
      const { apiKey } = await local.shop();
      const post = (callbackUrl: string) => local.post(`${V1}/webhooks/subscriptions`, { topic: 'points/added', callbackUrl }, apiKey);
      for (const url of ['https://localhost:8443/h', 'https://127.0.0.1:8443/h', 'https://10.9.8.7/h', 'https://rebind.example.com/h']) {
        expect((await post(url)).status, url).toBe(201);
      }
      for (const url of ['http://127.0.0.1:8443/h', 'https://192.168.1.1/h', 'https://[::1]/h', 'https://a.localhost/h']) {
        expect((await post(url)).status, url).toBe(400);
      }
    } finally {
      await local.stop();
    }
  });
});

describe('the same policy at connect time (for the delivery worker)', () => {
  /** Dials `host` on a local server with the policy's lookup; says whether the server saw a connection. */
  async function dial(policy: UrlPolicy, host: string): Promise<{ error?: string; reached: boolean }> {
    let reached = false;
    const server = net.createServer((socket) => {
      reached = true;
      socket.destroy();
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as net.AddressInfo;
    try {
      const socket = net.connect({ host, port, lookup: policy.lookup });
      const outcome = await new Promise<string | undefined>((resolve) => {
        socket.once('connect', () => resolve(undefined));
        socket.once('error', (err: NodeJS.ErrnoException) => resolve(err.code));
      });
      socket.destroy();
      await new Promise((resolve) => setTimeout(resolve, 20));
      return { error: outcome, reached };
    } finally {
      server.close();
    }
  }

  it('refuses to dial a name that now resolves to a private address (DNS rebinding)', async () => {
    const policy = new UrlPolicy({ resolve: testResolver });
    expect(await dial(policy, 'rebind.example.com')).toEqual({ error: 'EWEBHOOKBLOCKED', reached: false });
    expect(await dial(policy, 'mixed.example.com')).toEqual({ error: 'EWEBHOOKBLOCKED', reached: false });
    expect(await dial(policy, 'compat.example.com')).toEqual({ error: 'EWEBHOOKBLOCKED', reached: false });
    // Node dials IP literals without a lookup: the URL check, run before each attempt, covers them.
    expect(await policy.checkCallbackUrl('https://127.0.0.1/x')).toMatchObject({ ok: false });
    expect(await dial(policy, 'nowhere.example.org')).toEqual({ error: 'ENOTFOUND', reached: false });
  });

  it('dials an allowed host', async () => {
    const policy = new UrlPolicy({ resolve: testResolver, allowedHosts: ['127.0.0.0/8'] });
    expect(await dial(policy, 'rebind.example.com')).toEqual({ error: undefined, reached: true });
  });
});

describe('GET /webhooks/subscriptions', () => {
  it('lists the shop\'s subscriptions newest first, never with a secret', async () => {
    const shop = await t.shop('Lister');
    const first = await create(shop.apiKey, 'points/added');
    const second = await create(shop.apiKey, 'points/*');
    const third = await create(shop.apiKey, 'customers/created');
    const res = await call('GET', '/webhooks/subscriptions', shop.apiKey);
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(typeof res.body.message).toBe('string');
    expect(res.body.subscriptions.map((s: { id: string }) => s.id)).toEqual([third.id, second.id, first.id]);
    for (const sub of res.body.subscriptions) expect(Object.keys(sub).sort()).toEqual([...SUBSCRIPTION_FIELDS].sort());
    expect(JSON.stringify(res.body)).not.toContain(first.signingSecret);
    expect(res.body.subscriptions[2]).toEqual(withoutSecret(first));
  });

  it('shows a shop only its own, and an empty list when it has none', async () => {
    const empty = await t.shop('Empty');
    expect((await call('GET', '/webhooks/subscriptions', empty.apiKey)).body).toMatchObject({ success: true, subscriptions: [] });
    const listB = await call('GET', '/webhooks/subscriptions', b.apiKey);
    const listA = await call('GET', '/webhooks/subscriptions', a.apiKey);
    const idsA = new Set(listA.body.subscriptions.map((s: { id: string }) => s.id));
    expect(listB.body.subscriptions.length).toBeGreaterThan(0);
    for (const sub of listB.body.subscriptions) expect(idsA.has(sub.id)).toBe(false);
  });

  it('needs an API key', async () => {
    expectError(await call('GET', '/webhooks/subscriptions', undefined), 401, 'unauthorized');
  });
});

describe('PUT /webhooks/subscriptions/{id}', () => {
  it('changes the URL only: 200, same topic, no secret', async () => {
    const sub = await create(a.apiKey, 'points/updated');
    await new Promise((resolve) => setTimeout(resolve, 5));
    const res = await call('PUT', `/webhooks/subscriptions/${sub.id}`, a.apiKey, { callbackUrl: 'https://v6.example.com/moved' });
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(typeof res.body.message).toBe('string');
    expect(Object.keys(res.body.subscription).sort()).toEqual([...SUBSCRIPTION_FIELDS].sort());
    expect(res.body.subscription).toMatchObject({ id: sub.id, topic: 'points/updated', callbackUrl: 'https://v6.example.com/moved', createdAt: sub.createdAt });
    expect(res.body.subscription.updatedAt > sub.updatedAt).toBe(true);
    // The secret is unchanged.
    const secrets = { db: t.app.database.db, secrets: createSecretBox(Buffer.from(SECRETS_KEY, 'hex')) };
    expect(await validSigningSecrets(secrets, sub.id)).toEqual([sub.signingSecret]);
  });

  it('refuses a topic change, a malformed id, an unknown or foreign id, a clash and no key', async () => {
    const sub = await create(a.apiKey, 'points/updated');
    expectValidationError(await call('PUT', `/webhooks/subscriptions/${sub.id}`, a.apiKey, { callbackUrl: freshUrl(), topic: 'points/added' }), '');
    expectValidationError(await call('PUT', `/webhooks/subscriptions/${sub.id}`, a.apiKey, {}), 'callbackUrl');
    expectValidationError(await call('PUT', '/webhooks/subscriptions/not-an-id', a.apiKey, { callbackUrl: freshUrl() }), 'id');
    expectValidationError(await call('PUT', `/webhooks/subscriptions/${sub.id.toUpperCase()}`, a.apiKey, { callbackUrl: freshUrl() }), 'id');
    expectError(await call('PUT', `/webhooks/subscriptions/${newId()}`, a.apiKey, { callbackUrl: freshUrl() }), 404, 'subscription_not_found');
    expectError(await call('PUT', `/webhooks/subscriptions/${sub.id}`, b.apiKey, { callbackUrl: freshUrl() }), 404, 'subscription_not_found');
    const other = await create(a.apiKey, 'points/updated');
    expectError(await call('PUT', `/webhooks/subscriptions/${sub.id}`, a.apiKey, { callbackUrl: other.callbackUrl }), 409, 'subscription_exists');
    expectError(await call('PUT', `/webhooks/subscriptions/${sub.id}`, undefined, { callbackUrl: freshUrl() }), 401, 'unauthorized');
  });
});

describe('POST /webhooks/subscriptions/{id}/rotate-secret', () => {
  const box = () => ({ db: t.app.database.db, secrets: createSecretBox(Buffer.from(SECRETS_KEY, 'hex')) });

  it('issues a new secret (201) and keeps the old one for 24 hours by default', async () => {
    const sub = await create(a.apiKey);
    const before = Date.now();
    const res = await call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, a.apiKey);
    expect(res.status).toBe(201);
    expect(res.body.success).toBe(true);
    expect(typeof res.body.message).toBe('string');
    const rotated = res.body.subscription;
    expect(Object.keys(rotated).sort()).toEqual([...SUBSCRIPTION_FIELDS, 'signingSecret'].sort());
    expect(rotated.signingSecret).toMatch(/^[0-9a-f]{64}$/);
    expect(rotated.signingSecret).not.toBe(sub.signingSecret);
    expect(rotated.previousSecretValidUntil).toMatch(ISO_MS);
    const until = Date.parse(rotated.previousSecretValidUntil);
    expect(until).toBeGreaterThanOrEqual(before + 24 * HOUR - 1000);
    expect(until).toBeLessThanOrEqual(Date.now() + 24 * HOUR + 1000);
    expect(await validSigningSecrets(box(), sub.id)).toEqual([rotated.signingSecret, sub.signingSecret]);
    // After the grace period only the new secret signs.
    expect(await validSigningSecrets(box(), sub.id, new Date(until + 1))).toEqual([rotated.signingSecret]);
    // The list shows the rotation but no secret.
    const listed = (await call('GET', '/webhooks/subscriptions', a.apiKey)).body.subscriptions.find((s: { id: string }) => s.id === sub.id);
    expect(listed).toEqual(withoutSecret(rotated));
    expect(rotated).toMatchObject({ id: sub.id, topic: sub.topic, callbackUrl: sub.callbackUrl, createdAt: sub.createdAt });
  });

  it('takes graceHours 0..24; 0 revokes every older secret at once', async () => {
    const sub = await create(a.apiKey);
    const r1 = (await call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, a.apiKey, { graceHours: 2 })).body.subscription;
    expect(Date.parse(r1.previousSecretValidUntil) - Date.parse(r1.updatedAt)).toBe(2 * HOUR);
    // S1 still in grace when S2 is rotated out: both stay accepted, newest first.
    const r2 = (await call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, a.apiKey, { graceHours: 24 })).body.subscription;
    expect(await validSigningSecrets(box(), sub.id)).toEqual([r2.signingSecret, r1.signingSecret, sub.signingSecret]);
    // S1 keeps its own, earlier end.
    expect(await validSigningSecrets(box(), sub.id, new Date(Date.parse(r1.previousSecretValidUntil) + 1))).toEqual([r2.signingSecret, r1.signingSecret]);
    const r3 = await call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, a.apiKey, { graceHours: 0 });
    expect(r3.status).toBe(201);
    expect(Date.parse(r3.body.subscription.previousSecretValidUntil)).toBeLessThanOrEqual(Date.now());
    expect(await validSigningSecrets(box(), sub.id)).toEqual([r3.body.subscription.signingSecret]);
  });

  it('accepts an empty body sent as application/json', async () => {
    const sub = await create(a.apiKey);
    const res = await fetch(`${t.url}${V1}/webhooks/subscriptions/${sub.id}/rotate-secret`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.apiKey}`, 'content-type': 'application/json' },
    });
    expect(res.status).toBe(201);
  });

  it.each([[-1], [25], [1.5], ['3'], [null]])('refuses graceHours %j with 400', async (graceHours) => {
    const sub = await create(a.apiKey);
    expectValidationError(await call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, a.apiKey, { graceHours }), 'graceHours');
  });

  it('answers 400 for a malformed id, 404 for an unknown or foreign one, 401 without a key', async () => {
    const sub = await create(a.apiKey);
    expectValidationError(await call('POST', '/webhooks/subscriptions/123/rotate-secret', a.apiKey, {}), 'id');
    expectError(await call('POST', `/webhooks/subscriptions/${newId()}/rotate-secret`, a.apiKey, {}), 404, 'subscription_not_found');
    expectError(await call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, b.apiKey, {}), 404, 'subscription_not_found');
    expectError(await call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, undefined, {}), 401, 'unauthorized');
    expect(await validSigningSecrets(box(), sub.id)).toEqual([sub.signingSecret]);
  });
});

describe('under concurrency', () => {
  const box = () => ({ db: t.app.database.db, secrets: createSecretBox(Buffer.from(SECRETS_KEY, 'hex')) });

  it('creates a topic and URL pair once, however many ask at the same time', async () => {
    const shop = await t.shop('Racer');
    const body = { topic: 'points/added', callbackUrl: freshUrl() };
    const results = await Promise.all(Array.from({ length: 12 }, () => call('POST', '/webhooks/subscriptions', shop.apiKey, body)));
    expect(results.map((r) => r.status).sort()).toEqual([201, ...Array(11).fill(409)]);
    expect((await call('GET', '/webhooks/subscriptions', shop.apiKey)).body.subscriptions).toHaveLength(1);
  });

  it('serialises concurrent rotations: every secret handed out stays valid, up to ten', async () => {
    const sub = await create(a.apiKey);
    const results = await Promise.all(Array.from({ length: 6 }, () => call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, a.apiKey, {})));
    expect(results.map((r) => r.status)).toEqual(Array(6).fill(201));
    const handedOut = [sub.signingSecret, ...results.map((r) => r.body.subscription.signingSecret)];
    const valid = await validSigningSecrets(box(), sub.id);
    expect(new Set(valid)).toEqual(new Set(handedOut));
    expect(valid).toHaveLength(7);
    // First comes the current secret: the one the last rotation to commit returned.
    const rotations = results.map((r) => r.body.subscription);
    const current = rotations.find((r) => r.signingSecret === valid[0]);
    expect(current.updatedAt).toBe(rotations.map((r) => r.updatedAt).sort().at(-1));

    for (let i = 0; i < 5; i++) await call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, a.apiKey, {});
    expect(await validSigningSecrets(box(), sub.id)).toHaveLength(10);
  });
});

describe('DELETE /webhooks/subscriptions/{id}', () => {
  it('deletes (200, success and message only), keeping delivery records', async () => {
    const sub = await create(a.apiKey);
    const db = t.app.database.db;
    const deliveryId = newId();
    await db
      .insertInto('webhook_deliveries')
      .values({ id: deliveryId, shop_id: a.shopId, subscription_id: sub.id, event_id: 'evt_test', topic: 'points/added', status: 'succeeded' })
      .execute();
    const res = await call('DELETE', `/webhooks/subscriptions/${sub.id}`, a.apiKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, message: expect.any(String) });
    const listed = (await call('GET', '/webhooks/subscriptions', a.apiKey)).body.subscriptions;
    expect(listed.some((s: { id: string }) => s.id === sub.id)).toBe(false);
    expect(await db.selectFrom('webhook_secrets').select('id').where('subscription_id', '=', sub.id).execute()).toEqual([]);
    const deliveries = (await call('GET', '/webhooks/deliveries', a.apiKey)).body.deliveries;
    expect(deliveries).toEqual([expect.objectContaining({ id: deliveryId, subscriptionId: sub.id, status: 'succeeded' })]);
    expectError(await call('DELETE', `/webhooks/subscriptions/${sub.id}`, a.apiKey), 404, 'subscription_not_found');
  });

  it('answers 400 for a malformed id, 404 for an unknown or foreign one, 401 without a key', async () => {
    const sub = await create(a.apiKey);
    expectValidationError(await call('DELETE', '/webhooks/subscriptions/abc', a.apiKey), 'id');
    expectError(await call('DELETE', `/webhooks/subscriptions/${newId()}`, a.apiKey), 404, 'subscription_not_found');
    expectError(await call('DELETE', `/webhooks/subscriptions/${sub.id}`, b.apiKey), 404, 'subscription_not_found');
    expectError(await call('DELETE', `/webhooks/subscriptions/${sub.id}`, undefined), 401, 'unauthorized');
    // An empty JSON-labelled body is fine on DELETE.
    const res = await fetch(`${t.url}${V1}/webhooks/subscriptions/${sub.id}`, {
      method: 'DELETE',
      headers: { authorization: `Bearer ${a.apiKey}`, 'content-type': 'application/json' },
    });
    expect(res.status).toBe(200);
  });
});

describe('webhook deliveries routes (records are written by the delivery worker)', () => {
  it('GET lists the shop\'s deliveries from the table: none yet, and never another shop\'s', async () => {
    const res = await call('GET', '/webhooks/deliveries', b.apiKey);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ success: true, message: expect.any(String), deliveries: [], nextCursor: null });
    expectError(await call('GET', '/webhooks/deliveries', undefined), 401, 'unauthorized');
  });

  it('replay: 400 malformed id, 404 unknown or foreign, 422 once its subscription is gone', async () => {
    expectValidationError(await call('POST', '/webhooks/deliveries/nope/replay', a.apiKey), 'id');
    expectError(await call('POST', `/webhooks/deliveries/${newId()}/replay`, a.apiKey), 404, 'delivery_not_found');
    const id = newId();
    await t.app.database.db
      .insertInto('webhook_deliveries')
      .values({ id, shop_id: a.shopId, subscription_id: newId(), event_id: 'evt_x', topic: 'points/added', status: 'failed' })
      .execute();
    expectError(await call('POST', `/webhooks/deliveries/${id}/replay`, b.apiKey), 404, 'delivery_not_found');
    expectError(await call('POST', `/webhooks/deliveries/${id}/replay`, a.apiKey), 422, 'subscription_deleted');
    expectError(await call('POST', `/webhooks/deliveries/${id}/replay`, undefined), 401, 'unauthorized');
  });
});

describe('429 on every endpoint, with the contract\'s limits', () => {
  // A frozen clock: every request below falls in one window.
  const frozen = async (run: () => Promise<void>) => {
    clockStep = 0;
    try {
      await run();
    } finally {
      clockStep = 13_000;
      now += 61_000;
    }
  };

  async function expect429(res: Reply, limit: number) {
    expectError(res, 429, 'rate_limited');
    expect(res.headers.get('ratelimit-limit')).toBe(String(limit));
    expect(res.headers.get('ratelimit-remaining')).toBe('0');
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(Number(res.headers.get('retry-after'))).toBeLessThanOrEqual(60);
  }

  it('30 per minute shared by GET, POST, PUT and DELETE on /webhooks/subscriptions', async () => {
    const shop = await t.shop('Busy');
    await frozen(async () => {
      // In the window too: with the clock running, background work reading it between the create and
      // the calls could move them a minute apart (seen once under CI's load).
      const sub = await create(shop.apiKey);
      const remaining: string[] = [];
      for (let i = 0; i < 29; i++) {
        const res = await call('GET', '/webhooks/subscriptions', shop.apiKey);
        expect(res.status).toBe(200);
        expect(res.headers.get('ratelimit-limit')).toBe('30');
        remaining.push(res.headers.get('ratelimit-remaining')!);
      }
      expect(remaining.slice(0, 3)).toEqual(['28', '27', '26']);
      expect(remaining.at(-1)).toBe('0');
      await expect429(await call('GET', '/webhooks/subscriptions', shop.apiKey), 30);
      await expect429(await call('POST', '/webhooks/subscriptions', shop.apiKey, { topic: 'points/added', callbackUrl: freshUrl() }), 30);
      await expect429(await call('POST', '/webhooks/subscription', shop.apiKey, { topic: 'points/added', callbackUrl: freshUrl() }), 30);
      await expect429(await call('PUT', `/webhooks/subscriptions/${sub.id}`, shop.apiKey, { callbackUrl: freshUrl() }), 30);
      await expect429(await call('DELETE', `/webhooks/subscriptions/${sub.id}`, shop.apiKey), 30);
      // Another shop is not affected.
      expect((await call('GET', '/webhooks/subscriptions', a.apiKey)).status).toBe(200);
      // Nothing refused was done.
      expect((await t.app.database.db.selectFrom('webhook_subscriptions').select('id').where('shop_id', '=', shop.shopId).execute()).length).toBe(1);
    });
  });

  it('5 per minute on rotate-secret, 60 on GET /webhooks/deliveries, 10 on replay', async () => {
    const shop = await t.shop('Rotator');
    const sub = await create(shop.apiKey);
    await frozen(async () => {
      for (let i = 0; i < 5; i++) expect((await call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, shop.apiKey, {})).status).toBe(201);
      await expect429(await call('POST', `/webhooks/subscriptions/${sub.id}/rotate-secret`, shop.apiKey, {}), 5);
      // Its own bucket: the subscriptions one still has room.
      expect((await call('GET', '/webhooks/subscriptions', shop.apiKey)).status).toBe(200);

      for (let i = 0; i < 60; i++) expect((await call('GET', '/webhooks/deliveries', shop.apiKey)).status).toBe(200);
      await expect429(await call('GET', '/webhooks/deliveries', shop.apiKey), 60);

      for (let i = 0; i < 10; i++) expect((await call('POST', `/webhooks/deliveries/${newId()}/replay`, shop.apiKey)).status).toBe(404);
      await expect429(await call('POST', `/webhooks/deliveries/${newId()}/replay`, shop.apiKey), 10);
    });
  });

  it('the topic catalog has the configurable limit, here a shop override of 3', async () => {
    const shop = await t.shop('Slow');
    await t.app.database.db.updateTable('shops').set({ rate_limit_per_minute: 3 }).where('id', '=', shop.shopId).execute();
    await frozen(async () => {
      for (let i = 0; i < 3; i++) expect((await call('GET', '/webhooks/topics', shop.apiKey)).status).toBe(200);
      await expect429(await call('GET', '/webhooks/topics', shop.apiKey), 3);
    });
  });
});

describe('GraphQL over the same services', () => {
  const CREATE = `mutation($input: WebhookSubscriptionCreateInput!) {
    webhookSubscriptionCreate(input: $input) {
      signingSecret
      webhookSubscription { id topic callbackUrl previousSecretValidUntil status disabledReason createdAt updatedAt }
      userErrors { code field message }
    }
  }`;

  it('lists topics and creates, lists, updates, rotates and deletes a subscription', async () => {
    const shop = await t.shop('GraphQL');
    const topics = await t.graphql(shop.apiKey, '{ webhookTopics { topic description } }');
    expect(topics.data.webhookTopics).toHaveLength(Object.keys(EVENT_TOPICS).length);

    const created = (await t.graphql(shop.apiKey, CREATE, { input: { topic: 'referrals/*', callbackUrl: 'https://hooks.example.com/gql' } })).data.webhookSubscriptionCreate;
    expect(created.userErrors).toEqual([]);
    expect(created.signingSecret).toMatch(/^[0-9a-f]{64}$/);
    expect(created.webhookSubscription).toMatchObject({ topic: 'referrals/*', callbackUrl: 'https://hooks.example.com/gql', previousSecretValidUntil: null, status: 'enabled', disabledReason: null });
    const id = created.webhookSubscription.id;

    // REST sees what GraphQL made, and the other way round.
    const rest = await create(shop.apiKey, 'points/added');
    const listed = await t.graphql(shop.apiKey, '{ webhookSubscriptions(first: 10) { edges { node { id topic } } pageInfo { hasNextPage } } }');
    expect(listed.data.webhookSubscriptions.edges.map((e: any) => e.node.id)).toEqual([rest.id, id]);
    const page = await t.graphql(shop.apiKey, '{ webhookSubscriptions(first: 1) { edges { cursor node { id } } pageInfo { hasNextPage endCursor } } }');
    expect(page.data.webhookSubscriptions.pageInfo.hasNextPage).toBe(true);
    const next = await t.graphql(shop.apiKey, 'query($after: String) { webhookSubscriptions(first: 1, after: $after) { edges { node { id } } pageInfo { hasNextPage } } }', {
      after: page.data.webhookSubscriptions.pageInfo.endCursor,
    });
    expect(next.data.webhookSubscriptions.edges.map((e: any) => e.node.id)).toEqual([id]);
    expect(next.data.webhookSubscriptions.pageInfo.hasNextPage).toBe(false);

    const updated = (
      await t.graphql(shop.apiKey, 'mutation($input: WebhookSubscriptionUpdateInput!) { webhookSubscriptionUpdate(input: $input) { webhookSubscription { id callbackUrl topic } userErrors { code field } } }', {
        input: { id, callbackUrl: 'https://v6.example.com/gql' },
      })
    ).data.webhookSubscriptionUpdate;
    expect(updated).toEqual({ webhookSubscription: { id, callbackUrl: 'https://v6.example.com/gql', topic: 'referrals/*' }, userErrors: [] });

    const rotated = (
      await t.graphql(shop.apiKey, 'mutation($input: WebhookSubscriptionRotateSecretInput!) { webhookSubscriptionRotateSecret(input: $input) { signingSecret webhookSubscription { previousSecretValidUntil } userErrors { code } } }', {
        input: { id, graceHours: 0 },
      })
    ).data.webhookSubscriptionRotateSecret;
    expect(rotated.signingSecret).toMatch(/^[0-9a-f]{64}$/);
    expect(rotated.signingSecret).not.toBe(created.signingSecret);
    const box = { db: t.app.database.db, secrets: createSecretBox(Buffer.from(SECRETS_KEY, 'hex')) };
    expect(await validSigningSecrets(box, id)).toEqual([rotated.signingSecret]);

    const deleted = (await t.graphql(shop.apiKey, 'mutation($id: ID!) { webhookSubscriptionDelete(input: { id: $id }) { deletedWebhookSubscriptionId userErrors { code } } }', { id })).data
      .webhookSubscriptionDelete;
    expect(deleted).toEqual({ deletedWebhookSubscriptionId: id, userErrors: [] });
    expect((await call('GET', '/webhooks/subscriptions', shop.apiKey)).body.subscriptions.map((s: any) => s.id)).toEqual([rest.id]);
  });

  it('reports the REST errors as userErrors with the same codes', async () => {
    const shop = await t.shop('GraphQL errors');
    const errorsOf = async (query: string, variables: Record<string, unknown>) => {
      const res = await t.graphql(shop.apiKey, query, variables);
      expect(res.errors).toBeUndefined();
      return (Object.values(res.data)[0] as { userErrors: unknown[] }).userErrors;
    };
    expect(await errorsOf(CREATE, { input: { topic: 'points/nope', callbackUrl: 'https://hooks.example.com/x' } })).toEqual([
      expect.objectContaining({ code: 'validation_error', field: ['input', 'topic'] }),
    ]);
    expect(await errorsOf(CREATE, { input: { topic: 'points/added', callbackUrl: 'https://rebind.example.com/x' } })).toEqual([
      expect.objectContaining({ code: 'validation_error', field: ['input', 'callbackUrl'] }),
    ]);
    await errorsOf(CREATE, { input: { topic: 'points/added', callbackUrl: 'https://hooks.example.com/dup' } });
    expect(await errorsOf(CREATE, { input: { topic: 'points/added', callbackUrl: 'https://hooks.example.com/dup' } })).toEqual([
      expect.objectContaining({ code: 'subscription_exists' }),
    ]);
    const rotate = 'mutation($input: WebhookSubscriptionRotateSecretInput!) { webhookSubscriptionRotateSecret(input: $input) { signingSecret userErrors { code field } } }';
    expect(await errorsOf(rotate, { input: { id: newId() } })).toEqual([{ code: 'subscription_not_found', field: ['input', 'id'] }]);
    expect(await errorsOf(rotate, { input: { id: 'x' } })).toEqual([{ code: 'validation_error', field: ['input', 'id'] }]);
    const foreign = await create(a.apiKey);
    expect(await errorsOf(rotate, { input: { id: foreign.id, graceHours: 99 } })).toEqual([{ code: 'validation_error', field: ['input', 'graceHours'] }]);
    expect(await errorsOf(rotate, { input: { id: foreign.id } })).toEqual([{ code: 'subscription_not_found', field: ['input', 'id'] }]);
  });

  it('has no way to read a secret outside the create and rotate payloads', async () => {
    const res = await t.graphql(a.apiKey, '{ __type(name: "WebhookSubscription") { fields { name } } }');
    expect(res.data.__type.fields.map((f: { name: string }) => f.name).sort()).toEqual([...SUBSCRIPTION_FIELDS].sort());
    const update = await t.graphql(a.apiKey, '{ __type(name: "WebhookSubscriptionUpdatePayload") { fields { name } } }');
    expect(update.data.__type.fields.map((f: { name: string }) => f.name)).not.toContain('signingSecret');
  });
});

import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../src/domain/kernel/ids.js';
import { changePoints } from '../src/domain/ledger/points.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { createShop } from '../src/domain/shops/shops.js';
import { createSubscription } from '../src/domain/webhooks/webhook-subscriptions.js';
import { createSecretBox } from '../src/webhooks/secret-box.js';
import { UrlPolicy } from '../src/webhooks/url-policy.js';
import { onPostgres, openTestDatabase } from './helpers.js';
import { type Receiver, startReceiver, verifyDelivery } from './webhook-receiver.js';

// Real `npm run worker` processes (src/worker.ts) sharing one PostgreSQL database, as in a
// scaled-out deployment. They trust the receiver's certificate through NODE_EXTRA_CA_CERTS,
// which they inherit from the test run (test/global-setup.ts).
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const SECRETS_KEY = randomBytes(32).toString('hex');
const secrets = createSecretBox(Buffer.from(SECRETS_KEY, 'hex'));

let handle: Awaited<ReturnType<typeof openTestDatabase>>;
let receiver: Receiver;
const children: ChildProcess[] = [];

/** Starts `src/worker.ts`; resolves once it says it is running. */
async function startWorker(env: Record<string, string> = {}): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/worker.ts'], {
    cwd: ROOT,
    env: {
      ...process.env,
      DATABASE_URL: handle.url!,
      SECRETS_KEY,
      WEBHOOK_ALLOWED_HOSTS: 'localhost',
      LOG_LEVEL: 'info',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('webhook worker running')) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => reject(new Error(`worker exited with ${code}: ${output}`)));
  });
  return child;
}

async function stopWorker(child: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
  const exited = once(child, 'exit');
  child.kill(signal);
  const [code] = await exited;
  return code as number | null;
}

async function until(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function subscribedShop(customers: number) {
  const { shop } = await createShop(handle.db, 'Workers shop');
  const ids = Array.from({ length: customers }, (_, i) => `w-${i}`);
  for (const id of ids) await upsertCustomer(handle.db, shop.id, { shopifyCustomerId: id, email: `${id}@example.com` });
  const hookPath = `/hook/${newId()}`;
  const subscription = await createSubscription(
    { db: handle.db, urlPolicy: new UrlPolicy({ allowedHosts: ['localhost'] }), secrets },
    shop.id,
    { topic: 'points/added', callbackUrl: `https://localhost:${receiver.port}${hookPath}` },
  );
  return { shopId: shop.id, ids, subscription, requests: () => receiver.requests.filter((r) => r.path === hookPath) };
}

describe.skipIf(!onPostgres)('delivery workers in separate processes on one PostgreSQL database', () => {
  beforeAll(async () => {
    handle = await openTestDatabase();
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await Promise.all(children.splice(0).map((c) => stopWorker(c, 'SIGKILL')));
    receiver.handle((_req, res) => res.writeHead(204).end());
  });
  afterAll(async () => {
    await receiver?.close();
    await handle?.close();
  });

  it('two workers, 1,000 events: each delivered exactly once, every one verifying', async () => {
    const workers = await Promise.all([startWorker(), startWorker()]);
    const shop = await subscribedShop(10);
    // 1,000 committed changes from this process, while both workers relay and deliver.
    for (let round = 0; round < 100; round++) {
      await Promise.all(shop.ids.map((id) => changePoints(handle.db, shop.shopId, 'add', { customerIdentifier: id, amount: 1 })));
    }
    await until(() => shop.requests().length >= 1000, 60_000, '1,000 deliveries');
    await until(
      async () =>
        Number((await handle.db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll().as('n')).where('shop_id', '=', shop.shopId).where('status', '=', 'succeeded').executeTakeFirstOrThrow()).n) === 1000,
      10_000,
      'every delivery recorded as succeeded',
    );
    await new Promise((r) => setTimeout(r, 1_000)); // anything sent twice would have arrived by now

    const requests = shop.requests();
    expect(requests).toHaveLength(1000);
    expect(new Set(requests.map((r) => r.headers['webhook-id'])).size).toBe(1000);
    for (const r of requests) verifyDelivery(shop.subscription.signingSecret, r);
    const rows = await handle.db.selectFrom('webhook_deliveries').select(['attempt_count', 'status']).where('shop_id', '=', shop.shopId).execute();
    expect(rows).toHaveLength(1000);
    expect(rows.every((r) => r.attempt_count === 1 && r.status === 'succeeded')).toBe(true);
    // The two processes stop cleanly on SIGTERM.
    expect(await Promise.all(workers.map((w) => stopWorker(w)))).toEqual([0, 0]);
  });

  it('a worker killed mid-send: after its lease another resends with the same webhook-id; nothing is lost', async () => {
    // 1 s timeout, so the lease (2 × timeout + 2 s) runs out after 4 s.
    const env = { WEBHOOK_TIMEOUT_MS: '1000' };
    const first = await startWorker(env);
    const shop = await subscribedShop(1);
    let arrived!: () => void;
    const firstArrival = new Promise<void>((resolve) => (arrived = resolve));
    receiver.handle(() => arrived()); // holds the request open: the send is in flight
    await changePoints(handle.db, shop.shopId, 'add', { customerIdentifier: 'w-0', amount: 5 });
    await firstArrival;
    const killedAt = Date.now();
    await stopWorker(first, 'SIGKILL');
    const [row] = await handle.db.selectFrom('webhook_deliveries').selectAll().where('shop_id', '=', shop.shopId).execute();
    expect(row).toMatchObject({ status: 'sending', attempt_count: 0 });

    receiver.handle((_req, res) => res.writeHead(204).end());
    await startWorker(env);
    // From when the new worker is up (a process start takes seconds on a loaded machine).
    const upAt = Date.now();
    await until(() => shop.requests().length >= 2, 15_000, 'the resend');
    const [sent, resent] = shop.requests();
    expect(resent!.headers['webhook-id']).toBe(sent!.headers['webhook-id']);
    expect(resent!.headers['webhook-delivery-id']).toBe(row!.id);
    expect(resent!.receivedAt).toBeGreaterThanOrEqual(row!.due_at!.getTime() - 50);
    expect(resent!.receivedAt - Math.max(upAt, row!.due_at!.getTime())).toBeLessThan(5_000);
    expect(killedAt).toBeLessThan(row!.due_at!.getTime());
    verifyDelivery(shop.subscription.signingSecret, resent!);
    await until(
      async () => (await handle.db.selectFrom('webhook_deliveries').select('status').where('id', '=', row!.id).executeTakeFirstOrThrow()).status === 'succeeded',
      5_000,
      'the delivery to succeed',
    );
    const attempts = await handle.db.selectFrom('webhook_delivery_attempts').selectAll().where('delivery_id', '=', row!.id).execute();
    expect(attempts).toEqual([expect.objectContaining({ trigger: 'scheduled', response_status: 204 })]);
  });
});

import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freePort, onPostgres } from './helpers.js';
import { bannerPrinted, createShopWithCli, databaseEnv, killNpmRuns, npm as npmWith, type NpmRun } from './npm-start.js';

// `npm start` exactly as an operator, a process manager or a container runs it: a signal to the
// npm process must reach the server (graceful shutdown, data folder released), and the banner
// must say how to get a key without ever printing one again.

let dataDir: string;
let dbEnv: Record<string, string>;

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'loyalty-npm-start-'));
  dbEnv = { ...(await databaseEnv()), REDIS_URL: '' };
});
afterAll(async () => {
  killNpmRuns();
  await rm(dataDir, { recursive: true, force: true });
});

const npm = (args: string[], port: number): NpmRun => npmWith(args, { ...dbEnv, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info' });

const serverPid = (run: NpmRun) => Number(/"pid":(\d+)/.exec(run.output())![1]);

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function graphql(port: number, apiKey: string, query: string): Promise<any> {
  const res = await fetch(`http://127.0.0.1:${port}/graphql`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
  });
  expect(res.status).toBe(200);
  return res.json();
}

it('SIGTERM to the npm process stops the server gracefully, releases the data folder and keeps acknowledged writes', async () => {
  const port = await freePort();
  const first = npm(['start'], port);
  await bannerPrinted(first);
  const lockFile = path.join(dataDir, 'loyalty.lock');

  let apiKey: string;
  if (onPostgres) {
    // On PostgreSQL nothing is created for you: the banner says how to make the first shop, and
    // the CLI may run beside the server.
    expect(first.output()).toContain('npm run cli -- shop create --name');
    expect(first.output()).toContain('npm run cli -- staff invite-owner --shop');
    apiKey = (await createShopWithCli(dbEnv, 'Npm start shop')).apiKey;
    await graphql(port, apiKey, 'mutation { customerUpsert(input: { shopifyCustomerId: "demo-1001", email: "ada@example.com" }) { userErrors { code } } }');
  } else {
    apiKey = /^\s+(lk_[a-z0-9]{10}_[A-Za-z0-9]{40})$/m.exec(first.output())![1]!;
    // The demo shop's owner for the staff console: a one-time link, printed once.
    expect(first.output()).toMatch(new RegExp(`^\\s+http://127\\.0\\.0\\.1:${port}/admin/accept#token=si_[A-Za-z0-9]{43}$`, 'm'));
    expect(existsSync(lockFile)).toBe(true);
    // A second `npm start` on the same folder fails, and npm says so with its exit code.
    const second = npm(['start'], await freePort());
    expect((await second.exited).code).not.toBe(0);
    expect(second.output()).toContain('is in use by process');
  }
  const before = (await graphql(port, apiKey, '{ customer(identifier: "demo-1001") { points } }')).data.customer.points;
  const write = await fetch(`http://127.0.0.1:${port}/rest-api/v1/points/add`, {
    method: 'POST',
    headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ customerIdentifier: 'demo-1001', amount: 7, description: 'before SIGTERM' }),
  });
  expect(write.status).toBe(200);

  const pid = serverPid(first);
  const signalledAt = Date.now();
  first.child.kill('SIGTERM');
  while ((await portOpen(port)) || existsSync(lockFile) || alive(pid)) {
    expect(Date.now() - signalledAt, `server still up: ${first.output()}`).toBeLessThan(10_000);
    await sleep(50);
  }
  expect(await first.exited).toEqual({ code: 0, signal: null });
  expect(first.output()).toContain('"msg":"shutting down"');

  // Restarted, it has the write, and its banner names the shop and the key command, not a key.
  const again = npm(['start'], port);
  await bannerPrinted(again);
  expect((await graphql(port, apiKey, '{ customer(identifier: "demo-1001") { points } }')).data.customer.points).toBe(before + 7);
  const shopId = onPostgres ? /id ([0-9a-f]{24})/.exec(again.output())![1] : /Demo shop: "Demo shop", id ([0-9a-f]{24})/.exec(again.output())![1];
  expect(again.output()).toContain(`A new API key for it: npm run cli -- key create --shop ${shopId}`);
  expect(again.output()).toContain(`npm run cli -- staff invite-owner --shop ${shopId} --email <address>`);
  expect(again.output()).not.toContain('#token=');
  expect(again.output()).not.toMatch(/lk_[a-z0-9]{10}_/);
  again.child.kill('SIGTERM');
  expect(await again.exited).toEqual({ code: 0, signal: null });
}, 480_000);

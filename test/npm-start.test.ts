import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freePort, isolatedPostgresUrl, onPostgres } from './helpers.js';

// `npm start` exactly as an operator, a process manager or a container runs it: a signal to the
// npm process must reach the server (graceful shutdown, data folder released), and the banner
// must say how to get a key without ever printing one again.

const ROOT = path.resolve(import.meta.dirname, '..');
const NPM_ENV = { npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_loglevel: 'error' };

let dataDir: string;
let dbEnv: Record<string, string>;
const children = new Set<ChildProcess>();

beforeAll(async () => {
  dataDir = await mkdtemp(path.join(tmpdir(), 'loyalty-npm-start-'));
  dbEnv = onPostgres ? { DATABASE_URL: (await isolatedPostgresUrl()).url } : { DATABASE_URL: '' };
});
afterAll(async () => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  await rm(dataDir, { recursive: true, force: true });
});

type NpmRun = { child: ChildProcess; output: () => string; exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }> };

function npm(args: string[], port: number): NpmRun {
  const child = spawn('npm', args, {
    cwd: ROOT,
    env: { ...process.env, ...NPM_ENV, ...dbEnv, DATA_DIR: dataDir, PORT: String(port), HOST: '127.0.0.1', LOG_LEVEL: 'info', REDIS_URL: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { child, output: () => out, exited };
}

/** Resolves once `run` has printed its start-up banner (the last thing main.ts writes). */
async function bannerPrinted(run: NpmRun): Promise<void> {
  const deadline = Date.now() + 180_000; // a loaded 2-core machine needs a minute or more to start tsx and PGlite
  while (!/A new API key/.test(run.output()) && !/No shop yet/.test(run.output())) {
    if (run.child.exitCode !== null || Date.now() > deadline) throw new Error(`npm start did not start: ${run.output()}`);
    await sleep(100);
  }
}

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
    const { stdout } = await promisify(execFile)('npm', ['run', '--silent', 'cli', '--', '--json', 'shop', 'create', '--name', 'Npm start shop'], {
      cwd: ROOT,
      env: { ...process.env, ...NPM_ENV, ...dbEnv },
    });
    apiKey = JSON.parse(stdout).apiKey;
    await graphql(port, apiKey, 'mutation { customerUpsert(input: { shopifyCustomerId: "demo-1001", email: "ada@example.com" }) { userErrors { code } } }');
  } else {
    apiKey = /^\s+(lk_[a-z0-9]{10}_[A-Za-z0-9]{40})$/m.exec(first.output())![1]!;
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
  expect(again.output()).not.toMatch(/lk_[a-z0-9]{10}_/);
  again.child.kill('SIGTERM');
  expect(await again.exited).toEqual({ code: 0, signal: null });
}, 480_000);

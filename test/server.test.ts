import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { openDatabase } from '../src/db/database.js';
import { startTestApp } from './helpers.js';

const root = path.resolve(import.meta.dirname, '..');
const tempDirs: string[] = [];
function tempDir() {
  const dir = mkdtempSync(path.join(tmpdir(), 'loyalty-test-'));
  tempDirs.push(dir);
  return dir;
}
afterAll(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

type Server = { child: ChildProcess; url: string; apiKey: string | undefined; output: () => string; exited: Promise<number | null> };

/** `npm start` as a user runs it (tsx src/main.ts), on a port of its own. */
function startServer(env: Record<string, string>): Promise<Server> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: root,
    env: { ...process.env, PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const url = /"url":"(http:[^"]+)"/.exec(out)?.[1];
      // The banner (the demo shop's key, or how to make one) follows the "listening" line.
      if (url && /npm run cli -- (key|shop) create/.test(out)) resolve({ child, url, apiKey: /(lk_[a-z0-9]{10}_[A-Za-z0-9]{40})/.exec(out)?.[1], output: () => out, exited });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    exited.then((code) => reject(new Error(`server exited with ${code}: ${out}`)));
  });
}

function run(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: root,
    env: { ...process.env, PORT: '0', DATABASE_URL: '', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (c) => (stderr += c));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stderr })));
}

describe('configuration', () => {
  it('stops start-up with one clear line and exit code 1 on a bad value', async () => {
    const { code, stderr } = await run({ PORT: 'eighty' });
    expect(code).toBe(1);
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr).toMatch(/invalid configuration: PORT/);
    const bad = await run({ DATABASE_URL: 'mysql://x' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/DATABASE_URL/);
  });

  it('has the documented defaults', () => {
    expect(loadConfig({})).toMatchObject({ port: 3000, dataDir: './data', databaseUrl: undefined, redisUrl: undefined, logLevel: 'info' });
  });
});

describe('embedded database (PGlite in DATA_DIR)', () => {
  it('creates a demo shop on first start, keeps data across a restart, and locks the folder', async () => {
    const dataDir = tempDir();
    const first = await startServer({ DATA_DIR: dataDir });
    expect(first.apiKey).toBeDefined();
    expect(first.output()).toContain('curl');
    const add = await fetch(`${first.url}/rest-api/v1/points/add`, {
      method: 'POST',
      headers: { authorization: `Bearer ${first.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ customerIdentifier: 'demo-1001', amount: 42 }),
    });
    const { activity } = await add.json();
    expect(add.status).toBe(200);

    // A second process on the same folder is refused with a clear message, not a corrupted database.
    const second = await run({ DATA_DIR: dataDir });
    expect(second.code).toBe(1);
    expect(second.stderr).toMatch(/in use by process \d+/);

    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    const again = await startServer({ DATA_DIR: dataDir });
    expect(again.apiKey).toBeUndefined(); // no second demo shop
    const res = await fetch(`${again.url}/graphql`, {
      method: 'POST',
      headers: { authorization: `Bearer ${first.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ query: '{ customer(identifier: "demo-1001") { points activities(first: 1) { edges { node { _id } } } } }' }),
    });
    const { data } = await res.json();
    expect(data.customer.points).toBe(activity.newPoints);
    expect(data.customer.activities.edges[0].node._id).toBe(activity._id);
    again.child.kill('SIGTERM');
    expect(await again.exited).toBe(0);
  });

  it('takes over a lock left by a process that died', async () => {
    const dataDir = tempDir();
    const victim = await startServer({ DATA_DIR: dataDir });
    victim.child.kill('SIGKILL');
    await victim.exited;
    const next = await startServer({ DATA_DIR: dataDir });
    expect((await fetch(`${next.url}/readyz`)).status).toBe(200);
    next.child.kill('SIGTERM');
    expect(await next.exited).toBe(0);
  });

  it('on SIGTERM finishes in-flight requests: every acknowledged write is in the ledger', async () => {
    const dataDir = tempDir();
    const server = await startServer({ DATA_DIR: dataDir });
    const calls = Array.from({ length: 60 }, () =>
      fetch(`${server.url}/rest-api/v1/points/add`, {
        method: 'POST',
        headers: { authorization: `Bearer ${server.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({ customerIdentifier: 'demo-1003', amount: 1 }),
      }).then(
        (r) => r.status,
        () => 0, // refused after close: not acknowledged
      ),
    );
    // Stop while the rest are in flight: as soon as the first write is acknowledged.
    void Promise.race(calls).then(() => server.child.kill('SIGTERM'));
    const statuses = await Promise.all(calls);
    expect(await server.exited).toBe(0);
    expect(statuses.every((s) => s === 200 || s === 503 || s === 0)).toBe(true);
    const acknowledged = statuses.filter((s) => s === 200).length;
    expect(acknowledged).toBeGreaterThan(0);

    const { db, close } = await openDatabase({ dataDir });
    const row = await db.selectFrom('customers').select('points').where('shopify_customer_id', '=', 'demo-1003').executeTakeFirstOrThrow();
    await close();
    expect(row.points).toBe(acknowledged);
  });
});

describe('operational endpoints', () => {
  it('answers /healthz and /readyz, and echoes a request id', async () => {
    const t = await startTestApp();
    try {
      expect(await (await fetch(`${t.url}/healthz`)).json()).toMatchObject({ success: true });
      expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
      const res = await fetch(`${t.url}/healthz`, { headers: { 'x-request-id': 'abc-123' } });
      expect(res.headers.get('x-request-id')).toBe('abc-123');
      const generated = await fetch(`${t.url}/healthz`, { headers: { 'x-request-id': 'bad id with spaces' } });
      expect(generated.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    } finally {
      await t.stop();
    }
  });

  it('reports unready once the database is gone', async () => {
    // No relay or delivery worker: their loops would be left talking to the closed database.
    const t = await startTestApp({ WORKER: 'off' });
    await t.app.database.close();
    const res = await fetch(`${t.url}/readyz`);
    expect(res.status).toBe(503);
    expect(await res.json()).toMatchObject({ success: false, error: 'not_ready' });
    await t.stop().catch(() => {});
  });
});

import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { mkdtemp, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { onInterrupt } from './cleanup.js';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

export type ServerProcess = {
  url: string;
  pid: number;
  /** What the server logged (it runs at LOG_LEVEL=warn, so anything here deserves a look); the last lines. */
  logged(): string[];
  /** The last 4,000 characters of its output (the start-up banner, with the demo shop's key on PGlite). */
  output(): string;
  stop(): Promise<void>;
};

export type ServerOptions = {
  databaseUrl: string;
  /** More environment for the server (DATABASE_POOL_SIZE, say). */
  env?: Record<string, string>;
  /** Extra node flags, e.g. ['--cpu-prof', '--cpu-prof-dir=/tmp/prof']. */
  nodeArgs?: string[];
  /** A data folder to use and keep (for a restart on it); by default a new one, removed on stop. */
  dataDir?: string;
};

/** A loopback port nobody listens on (right now). */
export async function freePort(): Promise<number> {
  const probe = net.createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const { port } = probe.address() as net.AddressInfo;
  probe.close();
  await once(probe, 'close');
  return port;
}

/**
 * The real server (`src/main.ts`) as a child process, as in production: the load generator and
 * the server never share an event loop. Resolves once /healthz answers.
 */
export async function startServer(options: ServerOptions): Promise<ServerProcess> {
  const port = await freePort();
  // Its own data folder and secrets key, so a run leaves nothing in the repository's ./data.
  const dataDir = options.dataDir ?? (await mkdtemp(path.join(os.tmpdir(), 'bench-server-')));
  const removeDataDir = () => (options.dataDir ? Promise.resolve() : rm(dataDir, { recursive: true, force: true }));
  const child = spawn(process.execPath, ['--import', 'tsx', ...(options.nodeArgs ?? []), 'src/main.ts'], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      DATABASE_URL: options.databaseUrl,
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'warn',
      DATA_DIR: dataDir,
      SECRETS_KEY: randomBytes(32).toString('hex'),
      // Measure the service, not its refusals: the limiter still runs, it just never says no.
      RATE_LIMIT_PER_MINUTE: '1000000000',
      // As deployed (docs/operations.md): graphql-js skips its development-only checks.
      NODE_ENV: 'production',
      ...options.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Keep the tail of its output: it explains a failed start, and warnings during a run are reported.
  let tail = '';
  const keep = (chunk: Buffer) => {
    tail = (tail + chunk.toString()).slice(-4000);
  };
  const logged = () => tail.split('\n').filter(Boolean).slice(-5);
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);

  const url = `http://127.0.0.1:${port}`;
  try {
    await untilHealthy(url, child, () => tail);
  } catch (err) {
    child.kill('SIGKILL');
    await removeDataDir();
    throw err;
  }
  const shutdown = async () => {
    await stopChild(child, () => tail);
    await removeDataDir();
  };
  const unregister = onInterrupt(shutdown);
  const stop = async () => {
    unregister();
    await shutdown();
  };
  return { url, pid: child.pid!, logged, output: () => tail, stop };
}

async function untilHealthy(url: string, child: ChildProcess, tail: () => string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the server exited with code ${child.exitCode}:\n${tail()}`);
    try {
      if ((await fetch(`${url}/healthz`)).ok) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`the server did not answer /healthz within 60 s:\n${tail()}`);
    await sleep(100);
  }
}

async function stopChild(child: ChildProcess, tail: () => string): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  const [code] = await exited;
  clearTimeout(timer);
  if (code !== 0) process.stderr.write(`the server exited with code ${code}:\n${tail()}\n`);
}

/** `npm run worker` (src/worker.ts) on the same database; resolves once it is running. */
export async function startWorkerProcess(databaseUrl: string, env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/worker.ts'], {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('webhook worker running')) resolve();
    });
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.once('exit', (code) => reject(new Error(`the worker exited with ${code}: ${output.slice(-2000)}`)));
  });
  return {
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

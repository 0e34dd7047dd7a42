import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { isolatedPostgresUrl, onPostgres } from './helpers.js';

/**
 * `npm start` as a newcomer runs it, for the tests of what they see: the pages in a browser, the
 * banner, a signal from a process manager. Nothing of the server runs in the test's process.
 */

const ROOT = path.resolve(import.meta.dirname, '..');
const NPM_ENV = { npm_config_update_notifier: 'false', npm_config_fund: 'false', npm_config_loglevel: 'error' };

export type NpmRun = {
  child: ChildProcess;
  /** stdout and stderr so far: the banner and the JSON log lines. */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
};

const running = new Set<ChildProcess>();

/** `npm <args>` in the repository with `env` over the test's own. */
export function npm(args: string[], env: Record<string, string>): NpmRun {
  const child = spawn('npm', args, { cwd: ROOT, env: { ...process.env, ...NPM_ENV, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    }),
  );
  return { child, output: () => out, exited };
}

/** Stops what `npm` started and is still running (afterAll, after a failure): SIGTERM, which npm passes on to the server. */
export function killNpmRuns(): void {
  for (const child of running) child.kill('SIGTERM');
}

/**
 * Resolves once `run` has printed its start-up banner (the last thing main.ts writes) and `also`
 * holds of its output (the log's lines are written apart from the banner, and may come after it).
 */
export async function bannerPrinted(run: NpmRun, also: RegExp = /./): Promise<void> {
  const deadline = Date.now() + 180_000; // a loaded 2-core machine needs a minute or more to start tsx and PGlite
  while ((!/A new API key/.test(run.output()) && !/No shop yet/.test(run.output())) || !also.test(run.output())) {
    if (run.child.exitCode !== null || Date.now() > deadline) throw new Error(`npm start did not start: ${run.output()}`);
    await sleep(100);
  }
}

/** The database a newcomer's `npm start` gets: PGlite in DATA_DIR, or the suite's PostgreSQL (and Redis) in a schema of its own. */
export async function databaseEnv(): Promise<Record<string, string>> {
  if (!onPostgres) return { DATABASE_URL: '', REDIS_URL: '' };
  return { DATABASE_URL: (await isolatedPostgresUrl()).url, REDIS_URL: process.env.TEST_REDIS_URL ?? '' };
}

/** `npm run cli -- --json shop create`, as the banner says on a database without a shop. */
export async function createShopWithCli(env: Record<string, string>, name: string): Promise<{ shopId: string; apiKey: string }> {
  const { stdout } = await promisify(execFile)('npm', ['run', '--silent', 'cli', '--', '--json', 'shop', 'create', '--name', name], {
    cwd: ROOT,
    env: { ...process.env, ...NPM_ENV, ...env },
  });
  return JSON.parse(stdout);
}

export type NpmServer = {
  url: string;
  /** The key the newcomer uses: the demo shop's, printed once (PGlite), or the CLI's new shop's (PostgreSQL). */
  apiKey: string;
  /** Whether the server made the demo shop (PGlite): its customers (demo-1001, ada@example.com, 250 points, …) and rewards exist. */
  demo: boolean;
  /** Its PostgreSQL schema's URL, for what no API does yet; none on PGlite (its data folder is the server's alone). */
  databaseUrl?: string;
  run: NpmRun;
  /** A JSON request with that key, as the shop's own server sends one. */
  request(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<Response>;
  /** A GraphQL operation on /graphql with that key; the answer's body. */
  graphql(query: string, variables?: Record<string, unknown>): Promise<any>;
  /** SIGTERM, as a process manager stops it; the data folder is removed. */
  stop(): Promise<void>;
};

/**
 * `npm start` in a fresh data folder on a free port, as the README says. On PGlite it makes the
 * demo shop and prints its key once; on PostgreSQL it makes nothing, and the shop comes from
 * `npm run cli -- shop create` beside it, as its banner says. `settings`: more of its environment.
 */
export async function startNpm(settings: Record<string, string> = {}): Promise<NpmServer> {
  const dataDir = await mkdtemp(path.join(tmpdir(), 'loyalty-npm-start-'));
  const database = await databaseEnv();
  const env = { ...database, DATA_DIR: dataDir, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', ...settings };
  const run = npm(['start'], env);
  const stop = async () => {
    if (run.child.exitCode === null && run.child.signalCode === null) run.child.kill('SIGTERM');
    await run.exited;
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    const listening = /"url":"(http:[^"]+)"/;
    await bannerPrinted(run, listening);
    const url = listening.exec(run.output())![1]!;
    const printed = /^\s+(lk_[a-z0-9]{10}_[A-Za-z0-9]{40})$/m.exec(run.output())?.[1];
    const apiKey = printed ?? (await createShopWithCli(env, 'Page test shop')).apiKey;
    const request = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) =>
      fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${apiKey}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    const graphql = async (query: string, variables?: Record<string, unknown>) => (await request('POST', '/graphql', { query, variables })).json();
    return { url, apiKey, demo: printed !== undefined, databaseUrl: database.DATABASE_URL || undefined, run, request, graphql, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

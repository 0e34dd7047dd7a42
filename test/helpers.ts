import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { PGlite } from '@electric-sql/pglite';
import { Kysely } from 'kysely';
import { PGliteDialect } from 'kysely-pglite-dialect';
import pg from 'pg';
import { type App, type AppOptions, buildApp } from '../src/app.js';
import { loadConfig } from '../src/config.js';
import { type DatabaseHandle, openDatabase } from '../src/db/database.js';
import { migrateToLatest } from '../src/db/migrate.js';
import type { Database } from '../src/db/schema.js';
import { changePoints } from '../src/domain/ledger/points.js';
import { upsertCustomer } from '../src/domain/program/sign-up.js';
import { createShop } from '../src/domain/shops/shops.js';
import { createLogger } from '../src/logger.js';

// One free-port probe for the tests and the benchmarks.
export { freePort } from '../bench/lib/server.js';

/** Which database the suite runs on: PGlite unless TEST_DATABASE_URL names a PostgreSQL. */
export const onPostgres = Boolean(process.env.TEST_DATABASE_URL);

/**
 * A PostgreSQL URL whose connections see only a fresh schema, so test files running in parallel
 * on one database never meet. `drop()` leaves it for the run's global teardown
 * (test/global-setup.ts): dropping a schema while another file's migrator reads the catalog fails
 * that migrator.
 */
export async function isolatedPostgresUrl(): Promise<{ url: string; drop(): Promise<void> }> {
  const base = process.env.TEST_DATABASE_URL!;
  const schema = `t_${process.env.TEST_RUN}_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  await admin.query(`create schema ${schema}`);
  await admin.end();
  const url = new URL(base);
  url.searchParams.set('options', `-c search_path=${schema}`);
  return {
    url: url.toString(),
    async drop() {},
  };
}

/**
 * A database for CLI child processes of one test file: an isolated PostgreSQL schema when the run
 * has one, else an embedded one in a folder of its own (which also holds the file's scratch files).
 */
export async function cliDatabase(prefix: string): Promise<{ env: Record<string, string>; dataDir: string; drop(): Promise<void> }> {
  const dataDir = await mkdtemp(path.join(tmpdir(), prefix));
  const schema = onPostgres ? await isolatedPostgresUrl() : undefined;
  return {
    env: schema ? { DATABASE_URL: schema.url } : { DATABASE_URL: '', DATA_DIR: dataDir },
    dataDir,
    async drop() {
      await schema?.drop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** A migrated in-memory PGlite whose every statement's SQL is passed to `onQuery` (to see what reaches the database). */
export async function openLoggedPglite(onQuery: (sql: string) => void): Promise<Kysely<Database>> {
  const db = new Kysely<Database>({
    dialect: new PGliteDialect(await PGlite.create()),
    log: (event) => {
      if (event.level === 'query') onQuery(event.query.sql);
    },
  });
  await migrateToLatest(db);
  return db;
}

/** A migrated database without a server: PGlite in memory, or a private PostgreSQL schema. */
export async function openTestDatabase(): Promise<DatabaseHandle & { url?: string }> {
  if (!onPostgres) {
    const handle = await openDatabase({ dataDir: 'memory://' });
    await migrateToLatest(handle.db);
    return handle;
  }
  const schema = await isolatedPostgresUrl();
  const handle = await openDatabase({ url: schema.url });
  await migrateToLatest(handle.db);
  return {
    ...handle,
    url: schema.url,
    async close() {
      await handle.close();
      await schema.drop();
    },
  };
}

/** A clock the test sets (and that stays there: a catch-up of many days takes seconds); the apps' due work compares with it. */
export function movableClock() {
  let at: number | undefined;
  return { now: () => at ?? Date.now(), moveTo: (to: Date) => (at = to.getTime()) };
}

/**
 * Two instances of the service on one private PostgreSQL schema, with their scheduled work left to
 * the test (WORKER off) and one movable clock: what every "two instances race for due work" test
 * needs. Both stop, and the schema goes, whatever `fn` does.
 */
export async function withTwoInstances(fn: (a: TestApp, b: TestApp, clock: ReturnType<typeof movableClock>) => Promise<void>): Promise<void> {
  const pg = await isolatedPostgresUrl();
  const clock = movableClock();
  const a = await startTestApp({ DATABASE_URL: pg.url, WORKER: 'off' }, { clock: clock.now });
  const b = await startTestApp({ DATABASE_URL: pg.url, WORKER: 'off' }, { clock: clock.now });
  try {
    await fn(a, b, clock);
  } finally {
    await a.stop();
    await b.stop();
    await pg.drop();
  }
}

export type TestApp = {
  app: App;
  url: string;
  stop(): Promise<void>;
  /** A new shop with its API key. */
  shop(name?: string): Promise<{ shopId: string; apiKey: string }>;
  /** Creates (or updates) a customer of `shopId` with a starting balance. */
  customer(shopId: string, shopifyCustomerId: string, points?: number): Promise<void>;
  post(path: string, body: unknown, apiKey?: string, headers?: Record<string, string>): Promise<Response>;
  graphql(apiKey: string, query: string, variables?: Record<string, unknown>, headers?: Record<string, string>): Promise<any>;
};

/**
 * A real server on a free loopback port: on in-memory PGlite, or on PostgreSQL in a private
 * schema when TEST_DATABASE_URL is set. `env` adds configuration (a DATA_DIR, say); `options`
 * injects a logger, a DNS resolver for the webhook URL check, or a rate-limit clock.
 */
export async function startTestApp(env: Record<string, string> = {}, options: AppOptions = {}): Promise<TestApp> {
  const pgSchema = onPostgres && !env.DATA_DIR ? await isolatedPostgresUrl() : undefined;
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATA_DIR: 'memory://',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    ...(pgSchema ? { DATABASE_URL: pgSchema.url } : {}),
    ...env,
  });
  const app = await buildApp(config, { logger: createLogger(config.logLevel), ...options });
  const url = await app.start();
  const db = app.database.db;

  const post: TestApp['post'] = (path, body, apiKey, headers = {}) =>
    fetch(`${url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(apiKey ? { authorization: `Bearer ${apiKey}` } : {}),
        ...headers,
      },
      body: typeof body === 'string' ? body : JSON.stringify(body),
    });

  return {
    app,
    url,
    async stop() {
      await app.stop();
      await pgSchema?.drop();
    },
    async shop(name = 'Test shop') {
      const { shop, apiKey } = await createShop(db, name);
      return { shopId: shop.id, apiKey };
    },
    async customer(shopId, shopifyCustomerId, points = 0) {
      await upsertCustomer(db, shopId, { shopifyCustomerId, email: `${shopifyCustomerId}@example.com` });
      if (points > 0) await changePoints(db, shopId, 'set', { customerIdentifier: shopifyCustomerId, amount: points });
    },
    post,
    async graphql(apiKey, query, variables, headers) {
      const res = await post('/graphql', { query, variables }, apiKey, headers);
      return res.json();
    },
  };
}

export type CliResult = { code: number | null; stdout: string; stderr: string };

/** Runs `npm run cli -- <args>` as a child process (tsx on src/cli/main.ts) with `env` added to this one's. */
export function runCli(args: string[], env: Record<string, string>): Promise<CliResult> {
  const root = path.resolve(import.meta.dirname, '..');
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(root, 'node_modules/.bin/tsx'), ['src/cli/main.ts', ...args], {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** A throwaway redis-server of the test's own: the machine's Redis is never stopped. */
export async function startRedis(port: number): Promise<ChildProcess> {
  const child = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  const deadline = Date.now() + 10_000;
  for (;;) {
    const socket = net.connect(port, '127.0.0.1');
    const up = await new Promise<boolean>((resolve) => {
      socket.once('connect', () => resolve(true));
      socket.once('error', () => resolve(false));
    });
    socket.destroy();
    if (up) return child;
    if (Date.now() > deadline) throw new Error('redis-server did not start');
    await sleep(50);
  }
}

/**
 * Two instances of the app on one private PostgreSQL schema and one Redis key prefix, as two
 * servers of a deployment: what one instance does, the other must see (needs TEST_REDIS_URL).
 */
export async function startTwoInstances(env: Record<string, string> = {}): Promise<{ one: TestApp; two: TestApp; redisPrefix: string; stop(): Promise<void> }> {
  const database = await isolatedPostgresUrl();
  const redisPrefix = `test:${randomBytes(4).toString('hex')}:`;
  const shared = { DATABASE_URL: database.url, REDIS_URL: process.env.TEST_REDIS_URL!, REDIS_KEY_PREFIX: redisPrefix, ...env };
  const one = await startTestApp(shared);
  const two = await startTestApp(shared);
  return {
    one,
    two,
    redisPrefix,
    async stop() {
      await two.stop();
      await one.stop();
      await database.drop();
    },
  };
}

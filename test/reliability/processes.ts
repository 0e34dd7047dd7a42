import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { chownSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { type DB, openDatabase } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { freePort, isolatedPostgresUrl } from '../helpers.js';

/**
 * Shared pieces of the reliability suite: server processes started as `npm start` starts them,
 * killed as an operator (or the kernel) would, a throwaway PostgreSQL cluster, and the ledger check.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** `npm run test:reliability` sets RELIABILITY=long: the full counts and durations. */
export const LONG = process.env.RELIABILITY === 'long';
export const scaled = (short: number, long: number): number => (LONG ? long : short);

/** One key for every instance of a test, so they can all read the webhook secrets. */
export const SECRETS_KEY = randomBytes(32).toString('hex');

export type ServerProcess = {
  child: ChildProcess;
  url: string;
  /** stdout and stderr so far (JSON log lines). */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Sends `signal` and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
};

const running = new Set<ChildProcess>();
const BANNER_END = /npm run cli -- (key|shop) create/;

/** `node --import tsx src/main.ts` on a free port; resolves once it logs its URL. */
export function startServerProcess(env: Record<string, string>): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'info', SECRETS_KEY, DATABASE_URL: '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  running.add(child);
  let out = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => {
      running.delete(child);
      resolve({ code, signal });
    }),
  );
  const stop = async (signal: NodeJS.Signals = 'SIGTERM') => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    return exited;
  };
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const url = /"url":"(http:[^"]+)"/.exec(out)?.[1];
      // The banner (the demo shop's key, or how to make one) ends with a `… create` command line.
      if (url && BANNER_END.test(out)) resolve({ child, url, output: () => out, exited, stop });
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then(({ code, signal }) => reject(new Error(`server exited (${code ?? signal}) before listening: ${out}`)));
  });
}

/** Kills every server process this file started and has not stopped (afterAll). */
export async function killAllServers(): Promise<void> {
  await Promise.all(
    [...running].map(async (child) => {
      const exited = once(child, 'exit');
      child.kill('SIGKILL');
      await exited;
    }),
  );
}

/** Polls until `check` holds, or throws after `ms`. */
export async function waitUntil(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Runs `items` through `worker` with at most `concurrency` in flight. */
export async function pool<T, R>(items: readonly T[], concurrency: number, worker: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await worker(items[i]!, i);
      }
    }),
  );
  return results;
}

export type WriteResult = { status: number; activityId?: string; ms: number };

/**
 * One `points/add` of `amount` over REST or GraphQL. Status 0 means no HTTP answer (refused or
 * cut connection): not acknowledged. `activityId` is set only for an acknowledged write.
 */
export async function addPoints(baseUrl: string, apiKey: string, via: 'rest' | 'graphql', customerIdentifier: string, amount = 1): Promise<WriteResult> {
  const started = Date.now();
  const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' };
  try {
    if (via === 'rest') {
      const res = await fetch(`${baseUrl}/rest-api/v1/points/add`, { method: 'POST', headers, body: JSON.stringify({ customerIdentifier, amount }) });
      const body = (await res.json()) as { activity?: { _id: string } };
      return { status: res.status, activityId: res.ok ? body.activity?._id : undefined, ms: Date.now() - started };
    }
    const res = await fetch(`${baseUrl}/graphql`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        query: 'mutation($input: PointsChangeInput!) { pointsAdd(input: $input) { activity { _id } userErrors { code } } }',
        variables: { input: { customerIdentifier, amount } },
      }),
    });
    const body = (await res.json()) as { data?: { pointsAdd?: { activity?: { _id: string } | null } } };
    const activityId = body.data?.pointsAdd?.activity?._id;
    // A GraphQL write is acknowledged when it returns its activity (errors can come with a 200).
    return { status: res.ok && !activityId ? 500 : res.status, activityId: res.ok ? activityId : undefined, ms: Date.now() - started };
  } catch {
    return { status: 0, ms: Date.now() - started };
  }
}

/**
 * The ledger's invariants for one shop: each customer's balance equals the sum of its entries'
 * changes and its last entry's newPoints, and the entries chain (each oldPoints is the previous
 * newPoints). Returns the set of activity ids, for "every acknowledged write is there" checks.
 */
export async function checkLedger(db: DB, shopId: string): Promise<{ activityIds: Set<string>; problems: string[] }> {
  const customers = await db.selectFrom('customers').select(['id', 'shopify_customer_id', 'points']).where('shop_id', '=', shopId).execute();
  const entries = await db
    .selectFrom('activities')
    .select(['id', 'customer_id', 'old_points', 'new_points'])
    .where('shop_id', '=', shopId)
    .orderBy('seq')
    .execute();
  const problems: string[] = [];
  const byCustomer = new Map<string, typeof entries>();
  for (const e of entries) byCustomer.set(e.customer_id, [...(byCustomer.get(e.customer_id) ?? []), e]);
  for (const c of customers) {
    const list = byCustomer.get(c.id) ?? [];
    let balance = 0;
    for (const e of list) {
      if (e.old_points !== balance) problems.push(`${c.shopify_customer_id}: entry ${e.id} starts at ${e.old_points}, previous ended at ${balance}`);
      balance = e.new_points;
    }
    const sum = list.reduce((s, e) => s + (e.new_points - e.old_points), 0);
    if (c.points !== sum || c.points !== balance) problems.push(`${c.shopify_customer_id}: balance ${c.points}, ledger sum ${sum}, last entry ${balance}`);
  }
  return { activityIds: new Set(entries.map((e) => e.id)), problems };
}

/** Ids of the shop's committed events (the outbox), which webhooks carry as webhook-id. */
export async function outboxEventIds(db: DB, shopId: string): Promise<string[]> {
  const rows = await db.selectFrom('outbox_events').select('id').where('shop_id', '=', shopId).execute();
  return rows.map((r) => r.id);
}

/** Log lines of a server process that are JSON and at level error or above (pino: 50+). */
export function errorLogs(output: string): string[] {
  return output.split('\n').filter((line) => {
    try {
      return (JSON.parse(line) as { level?: number }).level! >= 50;
    } catch {
      return false;
    }
  });
}

// --- A throwaway PostgreSQL cluster ------------------------------------------------------------

const PG_BIN = ['/usr/lib/postgresql/17/bin', '/usr/lib/postgresql/16/bin', '/usr/lib/postgresql/15/bin'].find((dir) => existsSync(path.join(dir, 'initdb')));

/** Why a throwaway cluster cannot be made here, or null when it can. */
export function throwawayPostgresUnavailable(): string | null {
  if (!PG_BIN) return 'PostgreSQL server binaries (initdb, pg_ctl) not found under /usr/lib/postgresql/*/bin';
  if (userInfo().uid === 0) {
    try {
      execFileSync('id', ['postgres'], { stdio: 'ignore' });
    } catch {
      return 'running as root and there is no postgres user to run initdb and pg_ctl as';
    }
  }
  return null;
}

export type ThrowawayPostgres = {
  /** postgres://postgres@127.0.0.1:<port>/postgres */
  url: string;
  port: number;
  start(): Promise<void>;
  /** pg_ctl stop: `fast` disconnects clients and shuts down cleanly, `immediate` is a crash. */
  stop(mode?: 'fast' | 'immediate'): Promise<void>;
  /** Stops it (if running) and removes its folder. */
  destroy(): Promise<void>;
};

/**
 * A PostgreSQL cluster of the test's own in a temporary folder, on a free port, that the test
 * may stop and start at will; the machine's cluster on 5432 is never touched. The binaries refuse
 * to run as root, so as root they run as the postgres user, who owns the folder.
 */
export async function startThrowawayPostgres(): Promise<ThrowawayPostgres> {
  const why = throwawayPostgresUnavailable();
  if (why) throw new Error(why);
  const asRoot = userInfo().uid === 0;
  const dir = mkdtempSync(path.join(tmpdir(), 'loyalty-reliability-pg-'));
  if (asRoot) {
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString());
    chownSync(dir, uid, gid);
  }
  // Asynchronous, so a test's load keeps running (and its timings stay true) while pg_ctl works.
  const run = async (binary: string, args: string[]) => {
    const command = path.join(PG_BIN!, binary);
    await promisify(execFile)(asRoot ? 'runuser' : command, asRoot ? ['-u', 'postgres', '--', command, ...args] : args, { cwd: dir });
  };
  const data = path.join(dir, 'data');
  await run('initdb', ['-D', data, '-U', 'postgres', '--auth=trust', '--no-sync', '-E', 'UTF8']);
  const port = await freePort();
  const options = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=100`;
  let up = false;
  const pg: ThrowawayPostgres = {
    url: `postgres://postgres@127.0.0.1:${port}/postgres`,
    port,
    async start() {
      await run('pg_ctl', ['start', '-D', data, '-w', '-t', '30', '-l', path.join(dir, 'log'), '-o', options]);
      up = true;
    },
    async stop(mode = 'fast') {
      await run('pg_ctl', ['stop', '-D', data, '-w', '-t', '30', '-m', mode]);
      up = false;
    },
    async destroy() {
      try {
        if (up) await pg.stop('immediate');
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
  };
  await pg.start();
  return pg;
}

/**
 * A migrated private schema on TEST_DATABASE_URL with one shop and its customers (`c-0`…), for
 * server processes to share.
 */
export async function sharedDatabase(customers: number, shopName = 'Reliability shop') {
  const { url } = await isolatedPostgresUrl();
  const handle = await openDatabase({ url, poolSize: 5 });
  await migrateToLatest(handle.db);
  const { shop, apiKey } = await createShop(handle.db, shopName);
  const ids = Array.from({ length: customers }, (_, i) => `c-${i}`);
  for (const id of ids) await upsertCustomer(handle.db, shop.id, { shopifyCustomerId: id, email: `${id}@example.com` });
  return {
    db: handle.db,
    url,
    shopId: shop.id,
    apiKey,
    ids,
    close: () => handle.close(),
  };
}

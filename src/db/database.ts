import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Kysely, type KyselyPlugin, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { lockDataDir } from './data-dir-lock.js';
import type { Database } from './schema.js';

export type DB = Kysely<Database>;

export type DatabaseHandle = {
  db: DB;
  kind: 'postgres' | 'pglite';
  /** The PostgreSQL pool's occupancy (for /metrics); absent on PGlite, which has no pool. */
  poolStats?: () => PoolStats;
  /** Closes the pool (or the embedded database) and releases the data-folder lock. */
  close(): Promise<void>;
};

export type DatabaseOptions = {
  /** PostgreSQL URL; absent means embedded PGlite. */
  url?: string | undefined;
  /** Folder for PGlite's files; `memory://` (or absent) means an in-memory database. */
  dataDir?: string | undefined;
  poolSize?: number;
  /** How long a query may wait for a pooled connection (or for a new one to connect). */
  acquireTimeoutMs?: number;
  /** Requests allowed to queue for a connection once all are busy; the next is refused at once. */
  maxWaiting?: number;
  /** Kysely plugins over every query; tests watch the statements a request sends. */
  plugins?: KyselyPlugin[] | undefined;
};

export type PoolStats = { total: number; idle: number; waiting: number };

/**
 * Every pooled connection is busy and the queue for one is full: the request is refused at once
 * (503 with Retry-After) instead of queueing until it times out, so a server under more load
 * than its database takes keeps answering.
 */
export class DatabaseOverloadedError extends Error {
  constructor(readonly waiting: number) {
    super(`all database connections are busy and ${waiting} requests already wait for one`);
  }
}

/**
 * A statement whose text starts with this is prepared once per connection (a named statement), so
 * PostgreSQL plans it once, not at every call: for the big write CTEs planning costs about as much
 * as running them (order-first-states.ts). Only for texts that do not vary with their parameters.
 */
export const PREPARED = '/* prepared */';

const statementNames = new Map<string, string>();

function prepareMarked(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  client.query = ((text: unknown, ...rest: unknown[]) => {
    if (typeof text !== 'string' || !text.startsWith(PREPARED)) return query(text, ...rest);
    let name = statementNames.get(text);
    if (!name) statementNames.set(text, (name = `prepared_${statementNames.size + 1}`));
    return query({ name, text, values: rest[0] });
  }) as typeof client.query;
}

const INT8_OID = 20;
// Balances are bigint in SQL; as JS numbers they are exact up to 2^53, far beyond any balance we allow.
const parseInt8 = (value: string) => Number(value);

export async function openDatabase(options: DatabaseOptions): Promise<DatabaseHandle> {
  if (options.url) {
    const pool = new pg.Pool({
      connectionString: options.url,
      max: options.poolSize ?? 20,
      // Fail fast instead of queueing forever when the database is gone or saturated.
      connectionTimeoutMillis: options.acquireTimeoutMs ?? 5_000,
      types: {
        getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
          oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
      },
    });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    pool.on('error', () => {});
    // A connection lost while checked out (mid-transaction, between statements) emits 'error' on
    // its client, which pg-pool handles only for idle ones: unheard, it killed the process when
    // PostgreSQL stopped. Heard here, the client's next query fails instead (a 503 for its request).
    pool.on('connect', (client) => {
      client.on('error', () => {});
      prepareMarked(client);
    });
    const maxWaiting = options.maxWaiting ?? 1_000;
    // pg-pool queues a request also while an idle connection is about to be handed to it (until
    // the next tick), so only the requests beyond the idle connections really wait.
    const waiting = () => Math.max(0, pool.waitingCount - pool.idleCount);
    const bounded = {
      connect: () => (waiting() >= maxWaiting ? Promise.reject(new DatabaseOverloadedError(waiting())) : pool.connect()),
      end: () => pool.end(),
    };
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: bounded }), plugins: options.plugins ?? [] });
    return {
      db,
      kind: 'postgres',
      poolStats: () => ({ total: pool.totalCount, idle: pool.idleCount, waiting: waiting() }),
      close: () => db.destroy(),
    };
  }

  const dataDir = options.dataDir?.startsWith('memory://') ? undefined : options.dataDir;
  const release = dataDir ? lockDataDir(dataDir) : () => {};
  try {
    // Loaded only here: a process on PostgreSQL (the CLI's import above all) saves ~80 MiB.
    const [{ PGlite }, { PGliteDialect }] = await Promise.all([import('@electric-sql/pglite'), import('kysely-pglite-dialect')]);
    const startParams = [...PGlite.defaultStartParams, ...PGLITE_SETTINGS];
    const pgdata = dataDir ? path.join(dataDir, 'pgdata') : undefined;
    if (pgdata && !existsSync(path.join(pgdata, 'PG_VERSION'))) await createCluster(pgdata, startParams);
    // The options form: `create(undefined, options)` (an in-memory database) ignores its options.
    const pglite = await PGlite.create({
      dataDir: pgdata,
      parsers: { [INT8_OID]: parseInt8 },
      startParams,
    });
    const db = new Kysely<Database>({ dialect: new PGliteDialect(pglite), plugins: options.plugins ?? [] });
    return {
      db,
      kind: 'pglite',
      close: async () => {
        await db.destroy();
        release();
      },
    };
  } catch (err) {
    release();
    throw err;
  }
}

/**
 * PostgreSQL's default shared_buffers (128 MB) is allocated and zeroed inside PGlite's WASM memory at
 * start, and WASM memory never shrinks: ~110 MiB of the embedded server's resident memory. The data
 * folder's files stay in the OS page cache, so a buffer miss costs a read from memory, not a disk
 * read: points/add on 200,000 customers measured the same at 16 MB (docs/operations.md#memory).
 */
const PGLITE_SETTINGS = ['-c', 'shared_buffers=16MB'];

/**
 * Creates the cluster of a new data folder in a child process. PGlite's initdb runs a second
 * PostgreSQL and initdb's own WASM instance beside the one that serves, plus a copy of the new
 * folder: ~500 MiB that stays in this process until a full garbage collection, which an idle server
 * may never run (a worker thread leaves ~150 MiB behind in malloc's arenas). A child's memory leaves with it.
 */
async function createCluster(pgdata: string, startParams: string[]): Promise<void> {
  const pglite = pathToFileURL(createRequire(import.meta.url).resolve('@electric-sql/pglite')).href;
  const script = `const [url, pgdata, params] = process.argv.slice(1);
const { PGlite } = await import(url);
await (await PGlite.create(pgdata, { startParams: JSON.parse(params) })).close();`;
  const child = spawn(process.execPath, ['--input-type=module', '-e', script, pglite, pgdata, JSON.stringify(startParams)], {
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr.on('data', (chunk) => (stderr += chunk));
  const [code] = await once(child, 'exit');
  if (code !== 0) throw new Error(`creating the database in ${pgdata} failed: ${stderr.trim() || `exit code ${code}`}`);
}

export async function isDatabaseReachable(db: DB, timeoutMs = 2_000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  // A full pool is a busy database, not an unreachable one: going unready then would only move
  // the load to the other instances (and take all of them out of rotation together).
  const probe = sql`select 1`.execute(db).then(
    () => true,
    (err) => err instanceof DatabaseOverloadedError,
  );
  try {
    return await Promise.race([probe, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

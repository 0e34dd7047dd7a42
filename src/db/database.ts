import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { PGliteDialect } from 'kysely-pglite-dialect';
import pg from 'pg';
import { lockDataDir } from './data-dir-lock.js';
import type { Database } from './schema.js';

export type DB = Kysely<Database>;

export type DatabaseHandle = {
  db: DB;
  kind: 'postgres' | 'pglite';
  /** Closes the pool (or the embedded database) and releases the data-folder lock. */
  close(): Promise<void>;
};

export type DatabaseOptions = {
  /** PostgreSQL URL; absent means embedded PGlite. */
  url?: string | undefined;
  /** Folder for PGlite's files; `memory://` (or absent) means an in-memory database. */
  dataDir?: string | undefined;
  poolSize?: number;
};

const INT8_OID = 20;
// Balances are bigint in SQL; as JS numbers they are exact up to 2^53, far beyond any balance we allow.
const parseInt8 = (value: string) => Number(value);

export async function openDatabase(options: DatabaseOptions): Promise<DatabaseHandle> {
  if (options.url) {
    const pool = new pg.Pool({
      connectionString: options.url,
      max: options.poolSize ?? 20,
      // Fail fast instead of queueing forever when the database is gone or saturated.
      connectionTimeoutMillis: 5_000,
      types: {
        getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
          oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format)) as typeof pg.types.getTypeParser,
      },
    });
    // An idle client losing its connection must not crash the process; the pool replaces it.
    pool.on('error', () => {});
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    return { db, kind: 'postgres', close: () => db.destroy() };
  }

  const dataDir = options.dataDir?.startsWith('memory://') ? undefined : options.dataDir;
  const release = dataDir ? lockDataDir(dataDir) : () => {};
  try {
    const pglite = await PGlite.create(dataDir ? path.join(dataDir, 'pgdata') : undefined, {
      parsers: { [INT8_OID]: parseInt8 },
    });
    const db = new Kysely<Database>({ dialect: new PGliteDialect(pglite) });
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

export async function isDatabaseReachable(db: DB, timeoutMs = 2_000): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), timeoutMs);
  });
  const probe = sql`select 1`.execute(db).then(
    () => true,
    () => false,
  );
  try {
    return await Promise.race([probe, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

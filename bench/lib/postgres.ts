import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { onInterrupt } from './cleanup.js';

export const DEFAULT_DATABASE_URL = 'postgres://postgres@127.0.0.1:5432/test';

/** The database the benchmark runs on: BENCH_DATABASE_URL, else TEST_DATABASE_URL, else the local test database. */
export function benchDatabaseUrl(env: NodeJS.ProcessEnv = process.env): string {
  return env.BENCH_DATABASE_URL || env.TEST_DATABASE_URL || DEFAULT_DATABASE_URL;
}

export type IsolatedSchema = {
  /** The schema's name, for tools that take it apart from the URL (pgbench). */
  schema: string;
  /** `base` with `options=-c search_path=<schema>`: every connection made with it sees only this schema. */
  url: string;
  drop(): Promise<void>;
};

async function adminQuery(base: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: base });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}

/** A fresh schema in the database at `base`, so a run never touches (or leaves behind) anyone's tables. */
export async function createIsolatedSchema(base: string): Promise<IsolatedSchema> {
  const schema = `bench_${randomBytes(6).toString('hex')}`;
  await adminQuery(base, `create schema ${schema}`);
  const unregister = onInterrupt(() => adminQuery(base, `drop schema if exists ${schema} cascade`));
  const url = new URL(base);
  // %20, not URLSearchParams' `+`: libpq (pgbench) does not read `+` as a space.
  url.searchParams.delete('options');
  url.search += `${url.search ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
  const drop = async () => {
    unregister();
    await adminQuery(base, `drop schema if exists ${schema} cascade`);
  };
  return { schema, url: url.toString(), drop };
}

/** A plain client on `url` for seeding and checks; the caller ends it. */
export async function connect(url: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

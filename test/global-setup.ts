import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';

/**
 * A self-signed certificate for the tests' HTTPS webhook receivers (localhost, 127.0.0.1). The
 * service trusts it the way an operator would trust a private CA: through NODE_EXTRA_CA_CERTS,
 * which Node reads at process start; set here, before vitest forks its workers, it reaches every
 * test process and every server or worker process they spawn.
 */
// Test files' private schemas are named t_<run>_<random> (test/helpers.ts isolatedPostgresUrl), <run>
// being this run's start time in base 36: a run drops its own schemas at the end, and at its start
// only those of runs begun over an hour ago (interrupted ones), never those of a run still going.
const RUN = Date.now().toString(36);
const STALE_MS = 60 * 60 * 1000;

async function dropTestSchemas(which: (run: string) => boolean): Promise<void> {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) return;
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ name: string }>(`select nspname as name from pg_namespace where nspname ~ '^t_[0-9a-z]+_[0-9a-f]{12}$'`);
    for (const { name } of rows) {
      if (which(name.split('_')[1]!)) await client.query(`drop schema if exists ${name} cascade`);
    }
  } finally {
    await client.end();
  }
}

export default async function setup(): Promise<() => Promise<void>> {
  await dropTestSchemas((run) => Date.now() - parseInt(run, 36) > STALE_MS);
  process.env.TEST_RUN = RUN;
  const dir = mkdtempSync(path.join(os.tmpdir(), 'loyalty-test-tls-'));
  const key = path.join(dir, 'receiver-key.pem');
  const cert = path.join(dir, 'receiver-cert.pem');
  execFileSync('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-sha256', '-days', '2',
    '-keyout', key, '-out', cert,
    '-subj', '/CN=localhost',
    '-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1',
    '-addext', 'basicConstraints=critical,CA:TRUE',
  ], { stdio: 'ignore' });
  process.env.TEST_TLS_KEY = key;
  process.env.TEST_TLS_CERT = cert;
  process.env.NODE_EXTRA_CA_CERTS = cert;
  return async () => {
    rmSync(dir, { recursive: true, force: true });
    await dropTestSchemas((run) => run === RUN);
  };
}

import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { type Measurement, summarize } from './load.js';

/** pgbench's path when it is installed (PGBENCH overrides), else null. */
export function findPgbench(): string | null {
  const candidate = process.env.PGBENCH || 'pgbench';
  const probe = spawnSync(candidate, ['--version'], { encoding: 'utf8' });
  return probe.status === 0 ? candidate : null;
}

export type PgbenchRun = {
  pgbench: string;
  /** libpq connection URL (may carry `options=-c search_path=…`). */
  url: string;
  /** The transaction, in pgbench's script language. */
  script: string;
  /** `-D name=value` variables for the script. */
  variables: Record<string, string>;
  clients: number;
  durationSec: number;
};

/**
 * One pgbench run with the extended query protocol (what node-postgres speaks: parse, bind,
 * execute per statement, no prepared-statement cache). Every transaction is logged, so p50 and
 * p99 come from the same kind of per-request latencies autocannon reports.
 */
export async function runPgbench(run: PgbenchRun): Promise<Measurement> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'pgbench-'));
  try {
    const scriptFile = path.join(dir, 'transaction.sql');
    await writeFile(scriptFile, run.script);
    const args = [
      '--no-vacuum',
      '--protocol=extended',
      `--client=${run.clients}`,
      `--jobs=${Math.min(run.clients, os.availableParallelism())}`,
      `--time=${run.durationSec}`,
      `--file=${scriptFile}`,
      '--log',
      `--log-prefix=${path.join(dir, 'tx')}`,
      ...Object.entries(run.variables).map(([k, v]) => `--define=${k}=${v}`),
      run.url,
    ];
    const child = spawn(run.pgbench, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.stderr.on('data', (c: Buffer) => (out += c));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    if (code !== 0) throw new Error(`pgbench exited with code ${code}:\n${out}`);

    const tps = /tps = ([\d.]+) \(without initial connection time\)/.exec(out);
    const processed = /number of transactions actually processed: (\d+)/.exec(out);
    const failed = /number of failed transactions: (\d+)/.exec(out);
    if (!tps || !processed) throw new Error(`cannot read pgbench's summary:\n${out}`);

    // Log lines: client_id transaction_no latency_us script_no epoch_s epoch_us
    const latencies: number[] = [];
    for (const file of (await readdir(dir)).filter((f) => f.startsWith('tx.'))) {
      for (const line of (await readFile(path.join(dir, file), 'utf8')).split('\n')) {
        const us = Number(line.split(' ')[2]);
        if (line && Number.isFinite(us)) latencies.push(us / 1000);
      }
    }
    const ok = Number(processed[1]);
    const rate = Number(tps[1]);
    return {
      rate,
      ...summarize(latencies),
      ok,
      failed: failed ? Number(failed[1]) : 0,
      // The time the transactions took, without pgbench's connecting (as its tps): runs combine exactly.
      durationSec: ok / rate,
      latencies,
    };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

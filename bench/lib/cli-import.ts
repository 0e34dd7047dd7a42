// An import run as users run it (`npm run cli -- …` on PostgreSQL), timed as a whole process: its
// rate over the file (customers counted in the shop once a second) and the CLI's peak memory.
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { openDatabase } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { connect } from './postgres.js';
import { dropDatabase, recreateDatabase } from './scale-data.js';
import { REPO_ROOT } from './server.js';
import { fmt, formatTable } from './table.js';

/** When the count first reached `target`, interpolated between polls. */
function timeAt(samples: Array<{ t: number; n: number }>, target: number): number {
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1]!;
    const b = samples[i]!;
    if (b.n >= target) return b.n === a.n ? b.t : a.t + ((target - a.n) / (b.n - a.n)) * (b.t - a.t);
  }
  return Number.NaN;
}

/**
 * Runs `npm run cli -- <command(shopId)>` into an empty shop of a fresh database `name`, and reports
 * its time, its rate in the first and last tenth of `rows` and its peak RSS against `targets`.
 */
export async function timeCliImport(run: {
  base: string;
  name: string;
  rows: number;
  command: (shopId: string) => string[];
  title: string;
  targets: { seconds: number; rssMiB: number };
}): Promise<string> {
  const { rows, targets } = run;
  const url = await recreateDatabase(run.base, run.name);
  const { db, close } = await openDatabase({ url, poolSize: 1 });
  let shopId: string;
  try {
    await migrateToLatest(db);
    shopId = (await createShop(db, 'Bench import')).shop.id;
  } finally {
    await close();
  }
  const client = await connect(url);
  try {
    // Run as users run it (`npm run cli`, with the script's node flags). /usr/bin/time reports the
    // peak RSS of the largest process under it: the CLI's node (npm itself holds ~70 MiB).
    const child = spawn('/usr/bin/time', ['-v', 'npm', 'run', '--silent', 'cli', '--', ...run.command(shopId)], {
      cwd: REPO_ROOT,
      env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-8000)));
    const exited = once(child, 'exit');
    const started = performance.now();
    const counts: Array<{ t: number; n: number }> = [{ t: 0, n: 0 }];
    let done = false;
    void exited.then(() => (done = true));
    while (!done) {
      const { rows: r } = await client.query<{ n: string }>('select count(*) as n from customers where shop_id = $1', [shopId]);
      counts.push({ t: (performance.now() - started) / 1000, n: Number(r[0]!.n) });
      await Promise.race([sleep(1000), exited]);
    }
    const [code] = await exited;
    const total = (performance.now() - started) / 1000;
    const final = Number((await client.query<{ n: string }>('select count(*) as n from customers where shop_id = $1', [shopId])).rows[0]!.n);
    counts.push({ t: total, n: final });
    const peakKiB = Number(/Maximum resident set size \(kbytes\): (\d+)/.exec(stderr)?.[1] ?? Number.NaN);
    const tenth = rows / 10;
    // From the first committed batch: the CLI's start-up (tsx, config, connection) is not the file's rate.
    const first = counts.find((c) => c.n > 0) ?? { t: 0, n: 0 };
    const firstRate = first.n < tenth ? (tenth - first.n) / (timeAt(counts, tenth) - first.t) : Number.NaN;
    const lastRate = tenth / (timeAt(counts, rows) - timeAt(counts, rows - tenth));
    const peakMiB = peakKiB / 1024;
    const result = [
      run.title,
      `exit code ${code}; ${final} customers in the shop afterwards; the CLI said: ${stdout.trim().split('\n')[0]?.slice(0, 200) ?? ''}`,
      formatTable(
        ['import', 'value', 'target', 'result'],
        [
          ['total time', `${total.toFixed(1)} s`, `< ${targets.seconds} s`, total < targets.seconds ? 'met' : 'MISSED'],
          ['start-up, to the first rows committed', `${first.t.toFixed(1)} s`, '', ''],
          ['rows/s, first tenth of the file', fmt.rate(firstRate), '', ''],
          ['rows/s, last tenth of the file', fmt.rate(lastRate), 'steady', lastRate >= 0.8 * firstRate ? 'met' : 'MISSED'],
          ['rows/s, overall', fmt.rate(final / total), '', ''],
          ['CLI peak RSS', `${peakMiB.toFixed(0)} MiB`, `< ${targets.rssMiB} MiB`, peakMiB < targets.rssMiB ? 'met' : 'MISSED'],
        ],
      ),
    ];
    if (code !== 0 && code !== 2) result.push(`the import failed:\n${stderr.slice(-2000)}`);
    return result.join('\n');
  } finally {
    await client.end();
    await dropDatabase(run.base, run.name);
  }
}

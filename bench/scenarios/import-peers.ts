// Imports from other programs (issue 37): a 1,000,000-row customers export shaped like Smile.io's
// (a BOM, its headers, quoted names with commas, blank cells, columns the import skips) imported
// into an empty shop on PostgreSQL with `npm run cli -- import smile FILE --shop ID`: the whole
// process's time, its rate over the file and its peak RSS.
import { once } from 'node:events';
import { createWriteStream, existsSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { timeCliImport } from '../lib/cli-import.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';

const ROWS = 1_000_000;
const TARGETS = { seconds: 120, rssMiB: 200 };

/** The export, written once and reused (in the system's temporary folder). */
async function smileExport(rows: number): Promise<string> {
  const file = path.join(os.tmpdir(), `bench-smile-customers-${rows}.csv`);
  if (existsSync(file)) return file;
  const out = createWriteStream(`${file}.partial`);
  out.write('\uFEFFFirst name,Last name,Email,Points balance,Points spent,VIP tier,Referral URL,Date of birth,Member state,Created at\r\n');
  for (let i = 0; i < rows; i++) {
    const first = ['Ada', 'ben', 'Maria', 'zoe', 'omar', 'Ivy', 'lucas', 'Nina'][i % 8];
    const name = i % 10 === 0 ? `"${first}, Jr."` : first;
    const birthday = i % 3 === 0 ? `${i % 6 === 0 ? 1004 : 1960 + (i % 40)}-0${1 + (i % 9)}-1${i % 10}` : '';
    const line = `${name},Import${i},${first}.peer${i}@example.org,${i % 5000},${i % 700},,http://i.refs.cc/${i.toString(36)},${birthday},member,2024-04-04T15:10:42.030Z\r\n`;
    if (!out.write(line)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  await rename(`${file}.partial`, file);
  return file;
}

async function run(options: BenchOptions): Promise<boolean> {
  const t0 = performance.now();
  const file = await smileExport(ROWS);
  process.stdout.write(`  export file ${file} ready in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  const report = await timeCliImport({
    base: options.databaseUrl,
    name: 'bench_import_peers',
    rows: ROWS,
    command: (shopId) => ['import', 'smile', file, '--shop', shopId],
    title: `import smile of a ${ROWS}-row Smile.io-shaped customers export into an empty shop on PostgreSQL, run as \`npm run cli -- import smile FILE --shop ID\``,
    targets: TARGETS,
  });
  process.stdout.write(`${report}\n`);
  return /^exit code 0;/m.test(report);
}

export const importPeers: Scenario = {
  name: 'import-peers',
  summary: 'import smile: a 1,000,000-row Smile.io customers export into an empty shop, time and the CLI\'s peak memory',
  run,
};

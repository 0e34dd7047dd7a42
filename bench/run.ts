// `npm run bench [-- SCENARIO… [--duration 10] [--warmup 3] [--connections 32] [--customers 1000] [--cpu-prof DIR]]`
// console: [--customers 1000000] [--samples 1000] [--rebuild]
// scale only: [--build-only] [--rebuild] [--samples 1000] [--purge-turns 2] [--import-rows 1000000] [--parts lists,writes,purge,import]
// Runs the named scenarios (all when none is named) against a server on PostgreSQL
// (BENCH_DATABASE_URL, else TEST_DATABASE_URL, else postgres://postgres@127.0.0.1:5432/test);
// `memory` measures the embedded default, PGlite.
import { parseArgs } from 'node:util';
import { runCleanups } from './lib/cleanup.js';
import { describeMachine } from './lib/machine.js';
import { benchDatabaseUrl } from './lib/postgres.js';
import { type BenchOptions, SCALE_PARTS, type Scenario } from './lib/scenario.js';
import { consoleBench } from './scenarios/console.js';
import { expiry } from './scenarios/expiry.js';
import { importPeers } from './scenarios/import-peers.js';
import { insights } from './scenarios/insights.js';
import { mail } from './scenarios/mail.js';
import { isolation } from './scenarios/isolation.js';
import { memory } from './scenarios/memory.js';
import { orders } from './scenarios/orders.js';
import { points } from './scenarios/points.js';
import { redemptions } from './scenarios/redemptions.js';
import { scale } from './scenarios/scale.js';
import { shopifySync } from './scenarios/shopify-sync.js';
import { soak } from './scenarios/soak.js';
import { storefront } from './scenarios/storefront.js';
import { subscriptions } from './scenarios/subscriptions.js';
import { webhooks } from './scenarios/webhooks.js';

// Later scenarios (redemptions, webhook deliveries, subscriptions) are one module each, listed here.
const SCENARIOS: Scenario[] = [points, redemptions, webhooks, subscriptions, isolation, soak, memory, scale, orders, expiry, storefront, insights, shopifySync, consoleBench, mail, importPeers];
// Run only when named: it builds databases of millions of rows and takes many minutes.
const ON_REQUEST = new Set(['scale', 'console', 'import-peers']);

function positiveInt(name: string, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0) throw new Error(`--${name} must be a whole number, got "${value}"`);
  return n;
}

function scaleParts(value: string): Array<(typeof SCALE_PARTS)[number]> {
  const parts = value.split(',').map((p) => p.trim());
  const unknown = parts.filter((p) => !(SCALE_PARTS as readonly string[]).includes(p));
  if (unknown.length) throw new Error(`--parts takes ${SCALE_PARTS.join(', ')}; not ${unknown.join(', ')}`);
  return parts as Array<(typeof SCALE_PARTS)[number]>;
}

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      duration: { type: 'string' },
      warmup: { type: 'string', default: '3' },
      connections: { type: 'string', default: '32' },
      customers: { type: 'string', default: '1000' },
      'cpu-prof': { type: 'string' },
      'build-only': { type: 'boolean', default: false },
      rebuild: { type: 'boolean', default: false },
      samples: { type: 'string', default: '1000' },
      'purge-turns': { type: 'string', default: '2' },
      'import-rows': { type: 'string', default: '1000000' },
      parts: { type: 'string', default: SCALE_PARTS.join(',') },
    },
  });
  const unknown = positionals.filter((name) => !SCENARIOS.some((s) => s.name === name));
  if (unknown.length) {
    const list = SCENARIOS.map((s) => `  ${s.name.padEnd(12)} ${s.summary}`).join('\n');
    process.stderr.write(`unknown scenario ${unknown.join(', ')}; the scenarios are:\n${list}\n`);
    return 2;
  }
  const options: BenchOptions = {
    databaseUrl: benchDatabaseUrl(),
    durationSec: positiveInt('duration', values.duration ?? '10'),
    durationGiven: values.duration !== undefined,
    warmupSec: positiveInt('warmup', values.warmup),
    connections: positiveInt('connections', values.connections),
    customers: positiveInt('customers', values.customers),
    customersGiven: process.argv.some((arg) => arg === '--customers' || arg.startsWith('--customers=')),
    cpuProfDir: values['cpu-prof'],
    scale: {
      buildOnly: values['build-only'],
      rebuild: values.rebuild,
      samples: positiveInt('samples', values.samples),
      purgeTurns: positiveInt('purge-turns', values['purge-turns']),
      importRows: positiveInt('import-rows', values['import-rows']),
      parts: new Set(scaleParts(values.parts)),
    },
  };
  const chosen = positionals.length ? SCENARIOS.filter((s) => positionals.includes(s.name)) : SCENARIOS.filter((s) => !ON_REQUEST.has(s.name));

  process.stdout.write(`${await describeMachine(options.databaseUrl)}\n`);
  let ok = true;
  for (const scenario of chosen) {
    process.stdout.write(`\n== ${scenario.name}: ${scenario.summary}\n`);
    ok = (await scenario.run(options)) && ok;
  }
  if (!ok) process.stderr.write('a correctness check failed\n');
  return ok ? 0 : 1;
}

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    process.stderr.write(`\n${signal}: stopping the server and dropping the schema\n`);
    runCleanups().finally(() => process.exit(130));
  });
}

main().then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(`bench failed: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exit(1);
  },
);

// Expiry: 1,000,000 due lots (100,000 customers of a per_earn shop, 10 lots each) expired by the
// server's own scheduler while POST /points/add of another shop runs beside it at a steady rate
// (open loop). Its p99 during the sweep against its p99 before and after it, in one run; then a
// ledger check. Then the daily tier evaluation of a shop with 1,000,000 members (a tenth of whom
// fall: their points left the rolling window), beside the same load.
import { setTimeout as sleep } from 'node:timers/promises';
import { openDatabase } from '../../src/db/database.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createTier } from '../../src/domain/program/tiers.js';
import { updateShopSettings } from '../../src/domain/settings/shop-settings.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { combine, type Measurement, runOpenLoop } from '../lib/load.js';
import { connect, createIsolatedSchema } from '../lib/postgres.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';
import { startServer } from '../lib/server.js';
import { fmt, formatTable } from '../lib/table.js';

const TARGETS = { sweepSeconds: 60, p99Ratio: 2, evaluationSeconds: 60 };
const TIER_MEMBERS = 1_000_000;
/** One member in this many has points only outside the window: they fall at the evaluation. */
const FALL_EVERY = 10;
const EXPIRING_CUSTOMERS = 100_000;
const LOTS_PER_CUSTOMER = 10;
const LOT_POINTS = 10;
/** points/add per second on the other shop: a busy shop, well under what the server can take. */
const ADD_RATE = 400;
const LOAD_CUSTOMERS = 1000;
/** The load runs in slices this long while the sweep goes on, so it ends when the sweep does. */
const SLICE_SEC = 2;

async function seed(url: string) {
  const { db, close } = await openDatabase({ url, poolSize: 8 });
  try {
    const load = await createShop(db, 'Bench load shop');
    const expiring = await createShop(db, 'Bench expiring shop');
    for (const shop of [load.shop, expiring.shop]) await updateShopSettings(db, shop.id, { expiry: { mode: 'per_earn', days: 365 } });
    for (let i = 0; i < LOAD_CUSTOMERS; i += 8) {
      await Promise.all(Array.from({ length: 8 }, (_, k) => upsertCustomer(db, load.shop.id, { shopifyCustomerId: String(i + k), email: `l${i + k}@bench.example` })));
    }
    // The expiring shop's customers and their lots, written directly (far faster than 1,000,000
    // credits through the API): balances equal their lots, as the ledger trigger keeps them.
    const client = await connect(url);
    try {
      await client.query(
        `insert into customers (id, shop_id, shopify_customer_id, email, points)
         select 'bx' || i, $1, i::text, 'x' || i || '@bench.example', $2 from generate_series(1, $3) i`,
        [expiring.shop.id, LOTS_PER_CUSTOMER * LOT_POINTS, EXPIRING_CUSTOMERS],
      );
      const started = performance.now();
      await client.query(
        `insert into point_lots (shop_id, customer_id, points, expires_at, created_at)
         select $1, 'bx' || (1 + g / $4), $2, '2100-01-01', now() from generate_series(0, $3 - 1) g`,
        [expiring.shop.id, LOT_POINTS, EXPIRING_CUSTOMERS * LOTS_PER_CUSTOMER, LOTS_PER_CUSTOMER],
      );
      const lotsSec = (performance.now() - started) / 1000;
      await client.query('analyze customers; analyze point_lots');
      return { loadShop: load, expiringShopId: expiring.shop.id, lotsSec };
    } finally {
      await client.end();
    }
  } finally {
    await close();
  }
}

async function run(options: BenchOptions): Promise<boolean> {
  const schema = await createIsolatedSchema(options.databaseUrl);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  const client = await connect(schema.url).catch(async (err) => {
    await schema.drop();
    throw err;
  });
  try {
    const nodeArgs = options.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`] : [];
    server = await startServer({ databaseUrl: schema.url, nodeArgs });
    const seedStarted = performance.now();
    const { loadShop, expiringShopId, lotsSec } = await seed(schema.url);
    process.stdout.write(`  seeded ${EXPIRING_CUSTOMERS * LOTS_PER_CUSTOMER} lots of ${EXPIRING_CUSTOMERS} customers in ${((performance.now() - seedStarted) / 1000).toFixed(1)} s\n`);
    const pointsAdd = {
      url: `${server.url}/rest-api/v1/points/add`,
      connections: options.connections,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${loadShop.apiKey}` },
      body: () => JSON.stringify({ customerIdentifier: String(Math.floor(Math.random() * LOAD_CUSTOMERS)), amount: 1 }),
    };
    const phaseSec = options.durationSec;
    if (options.warmupSec > 0) await runOpenLoop({ ...pointsAdd, rate: ADD_RATE, durationSec: options.warmupSec });
    // The lots fall due right after the first quiet phase: rewriting them takes about twice as long as writing them did.
    const dueAt = Date.now() + (2 * lotsSec + phaseSec + 1) * 1000;
    await client.query('update point_lots set expires_at = $2 where shop_id = $1', [expiringShopId, new Date(dueAt)]);
    const before = await runOpenLoop({ ...pointsAdd, rate: ADD_RATE, durationSec: phaseSec });
    if (Date.now() > dueAt) process.stdout.write(`  note: the quiet phase ended ${((Date.now() - dueAt) / 1000).toFixed(1)} s after the lots fell due\n`);
    await sleep(Math.max(0, dueAt - Date.now()));

    // The sweep: the server's scheduler finds the lots due within its idle wait (1 s).
    const during: Measurement[] = [];
    let sweepSec = Number.NaN;
    const left = async () => Number((await client.query('select count(*) as n from point_lots where shop_id = $1', [expiringShopId])).rows[0].n);
    for (;;) {
      during.push(await runOpenLoop({ ...pointsAdd, rate: ADD_RATE, durationSec: SLICE_SEC }));
      const n = await left();
      process.stdout.write(`  ${((Date.now() - dueAt) / 1000).toFixed(0)} s after due: ${n} lots left\n`);
      if (n === 0) {
        // The sweep ended within the last slice: ask the ledger when.
        const last = await client.query<{ at: Date }>(`select max(created_at) as at from activities where shop_id = $1 and type = 'expire_points'`, [expiringShopId]);
        sweepSec = (last.rows[0]!.at.getTime() - dueAt) / 1000;
        break;
      }
      if (Date.now() - dueAt > 10 * TARGETS.sweepSeconds * 1000) break;
    }
    const after = await runOpenLoop({ ...pointsAdd, rate: ADD_RATE, durationSec: phaseSec });
    const quiet = combine([before, after]);
    const sweeping = combine(during);
    const ratio = sweeping.p99 / quiet.p99;

    const tiers = await evaluateTiers(schema.url, client, (durationSec) => runOpenLoop({ ...pointsAdd, rate: ADD_RATE, durationSec }));
    const evaluating = combine(tiers.during);
    const tierRatio = evaluating.p99 / quiet.p99;

    const one = async (text: string, params: unknown[]) => Number(Object.values((await client.query(text, params)).rows[0])[0]);
    const shop = [expiringShopId];
    const checks = [
      { name: 'every expiring customer at 0, with no lot left', ok: (await one(`select count(*) from customers where shop_id = $1 and points <> 0`, shop)) === 0 && (await left()) === 0 },
      {
        name: `one expire_points entry per customer, of ${LOTS_PER_CUSTOMER * LOT_POINTS}`,
        ok: (await one(`select count(distinct customer_id) from activities where shop_id = $1 and type = 'expire_points' and old_points - new_points = $2`, [expiringShopId, LOTS_PER_CUSTOMER * LOT_POINTS])) === EXPIRING_CUSTOMERS &&
          (await one(`select count(*) from activities where shop_id = $1`, shop)) === EXPIRING_CUSTOMERS,
      },
      { name: 'one points/expired event per customer', ok: (await one(`select count(*) from outbox_events where shop_id = $1 and type = 'points/expired'`, shop)) === EXPIRING_CUSTOMERS },
      {
        name: 'the load shop: every add in the ledger, every lot sums to its balance',
        ok: (await one(`select count(*) from activities where shop_id = $1`, [loadShop.shop.id])) >= before.ok + after.ok + sweeping.ok &&
          (await one(`select count(*) from customers c where c.shop_id = $1 and c.points <> (select coalesce(sum(points), 0) from point_lots l where l.customer_id = c.id)`, [loadShop.shop.id])) === 0,
      },
    ];
    process.stdout.write(
      [
        '',
        formatTable(
          ['POST /points/add (other shop)', 'req/s', 'p50', 'p99', 'ok', 'failed'],
          [
            ['before and after the sweep', fmt.rate(quiet.rate), fmt.ms(quiet.p50), fmt.ms(quiet.p99), quiet.ok, quiet.failed],
            ['during the sweep', fmt.rate(sweeping.rate), fmt.ms(sweeping.p50), fmt.ms(sweeping.p99), sweeping.ok, sweeping.failed],
            ['during the tier evaluation', fmt.rate(evaluating.rate), fmt.ms(evaluating.p50), fmt.ms(evaluating.p99), evaluating.ok, evaluating.failed],
          ],
        ),
        '',
        formatTable(
          ['target', 'value', 'target', 'result'],
          [
            [`${EXPIRING_CUSTOMERS * LOTS_PER_CUSTOMER} due lots expired`, `${sweepSec.toFixed(1)} s`, `< ${TARGETS.sweepSeconds} s`, sweepSec < TARGETS.sweepSeconds ? 'met' : 'MISSED'],
            [`points/add p99 during / without the sweep (${ADD_RATE}/s)`, fmt.ratio(ratio), `< ${TARGETS.p99Ratio}`, ratio < TARGETS.p99Ratio ? 'met' : 'MISSED'],
            [`tier evaluation of ${TIER_MEMBERS} members`, `${tiers.seconds.toFixed(1)} s`, `< ${TARGETS.evaluationSeconds} s`, tiers.seconds < TARGETS.evaluationSeconds ? 'met' : 'MISSED'],
            [`points/add p99 during the evaluation / without (informative)`, fmt.ratio(tierRatio), '', ''],
          ],
        ),
        '',
        ...[...checks, ...tiers.checks].map((c) => `  ${c.ok ? 'ok  ' : 'FAIL'} ${c.name}`),
        ...(server.logged().length ? [`  server log tail: ${server.logged().join(' | ')}`] : []),
        '',
      ].join('\n'),
    );
    return [...checks, ...tiers.checks].every((c) => c.ok) && quiet.failed + sweeping.failed + evaluating.failed === 0;
  } finally {
    await client.end();
    await server?.stop();
    await schema.drop();
  }
}

/**
 * A shop of TIER_MEMBERS customers, each a member holding Silver (100 points in a 30-day rolling
 * window), written directly; a tenth have their points 40 days back. Its evaluation is then made
 * due, and the server's scheduler walks it while `load` runs in one-second slices.
 */
async function evaluateTiers(url: string, client: Awaited<ReturnType<typeof connect>>, load: (durationSec: number) => Promise<Measurement>) {
  const { db, close } = await openDatabase({ url, poolSize: 2 });
  let shopId: string;
  let silver: string;
  try {
    const { shop } = await createShop(db, 'Bench tiers shop');
    shopId = shop.id;
    await updateShopSettings(db, shopId, { tiers: { window: 'rolling_days', days: 30 } });
    silver = (await createTier(db, shopId, { name: 'Silver', threshold: '100', multiplier: '1.5' })).tier.id;
    await createTier(db, shopId, { name: 'Gold', threshold: '1000', multiplier: '2' });
  } finally {
    await close();
  }
  // Not due while it is being written.
  await client.query(`update shop_day_runs set due_at = '2100-01-01' where shop_id = $1 and kind = 'tiers'`, [shopId]);
  const started = performance.now();
  await client.query(
    `insert into customers (id, shop_id, shopify_customer_id, email, points)
     select 'bt' || i, $1, i::text, 't' || i || '@bench.example', 100 from generate_series(1, $2) i`,
    [shopId, TIER_MEMBERS],
  );
  await client.query(`insert into tier_members (customer_id, shop_id, tier_id, since) select 'bt' || i, $1, $2, now() from generate_series(1, $3) i`, [shopId, silver, TIER_MEMBERS]);
  await client.query(
    `insert into tier_metric_days (customer_id, day, points)
     select 'bt' || i, current_date - case when i % $2 = 0 then 40 else 3 end, 100 from generate_series(1, $1) i`,
    [TIER_MEMBERS, FALL_EVERY],
  );
  await client.query('analyze customers; analyze tier_members; analyze tier_metric_days');
  process.stdout.write(`  seeded ${TIER_MEMBERS} tier members in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);

  const dueAt = Date.now();
  await client.query(`update shop_day_runs set due_at = $2, after_id = null where shop_id = $1 and kind = 'tiers'`, [shopId, new Date(dueAt)]);
  const during: Measurement[] = [];
  let seconds = Number.NaN;
  for (;;) {
    during.push(await load(1));
    const run = await client.query<{ due_at: Date }>(`select due_at from shop_day_runs where shop_id = $1 and kind = 'tiers'`, [shopId]);
    if (run.rows[0]!.due_at.getTime() > Date.now()) {
      seconds = (Date.now() - dueAt) / 1000;
      break;
    }
    if (Date.now() - dueAt > 10 * TARGETS.evaluationSeconds * 1000) break;
  }
  process.stdout.write(`  tier evaluation of ${TIER_MEMBERS} members: done within ${seconds.toFixed(1)} s of falling due\n`);
  const one = async (text: string) => Number(Object.values((await client.query(text, [shopId])).rows[0])[0]);
  const falls = TIER_MEMBERS / FALL_EVERY;
  return {
    seconds,
    during,
    checks: [
      { name: `the tier evaluation: ${falls} members fell, the others kept Silver`, ok: (await one(`select count(*) from tier_members where shop_id = $1 and tier_id is null`)) === falls && (await one(`select count(*) from tier_members where shop_id = $1 and tier_id is not null`)) === TIER_MEMBERS - falls },
      { name: 'one tiers/changed event per fall', ok: (await one(`select count(*) from outbox_events where shop_id = $1 and type = 'tiers/changed'`)) === falls },
    ],
  };
}

export const expiry: Scenario = {
  name: 'expiry',
  summary: '1,000,000 due lots expired by the scheduler while POST /points/add of another shop runs beside it, p99 during against without; then the tier evaluation of 1,000,000 members',
  run,
};

// Redemptions: REST GET /pointsRedemptions (pageSize 50) and POST /pointsRedemptions (redeem),
// then a check that every redemption left exactly one ledger entry, code and outbox event.
import { openDatabase } from '../../src/db/database.js';
import { changePoints } from '../../src/domain/ledger/points.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createPointsRedemption } from '../../src/domain/rewards/redemptions.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { type Measurement, runHttpPhase } from '../lib/load.js';
import { connect, createIsolatedSchema } from '../lib/postgres.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';
import { startServer } from '../lib/server.js';
import { fmt, formatTable } from '../lib/table.js';

const TARGETS = { p99Ms: 50 };
const FIRST_CUSTOMER = 200_001;
/** More options than one page holds, so the list reads a full page of 50. */
const OPTIONS = 60;
const PAGE_SIZE = 50;
const COST = 100;
// Enough for every redemption the run can make: a customer never runs out mid-run.
const OPENING_BALANCE = 100_000_000;

async function seed(url: string, customers: number): Promise<{ apiKey: string; shopId: string; rewardId: string }> {
  const { db, close } = await openDatabase({ url, poolSize: 8 });
  try {
    const { shop, apiKey } = await createShop(db, 'Bench redemptions shop');
    let rewardId = '';
    for (let i = 0; i < OPTIONS; i++) {
      const { pointsRedemption } = await createPointsRedemption(db, shop.id, {
        name: `$${i + 1} off`,
        type: 'amount',
        discountPrefix: `B${i}-`,
        rewardValue: COST * (i + 1),
        discountValue: i + 1,
      });
      if (i === 0) rewardId = pointsRedemption._id;
    }
    const ids = Array.from({ length: customers }, (_, i) => String(FIRST_CUSTOMER + i));
    for (let i = 0; i < ids.length; i += 8) {
      await Promise.all(
        ids.slice(i, i + 8).map(async (id) => {
          await upsertCustomer(db, shop.id, { shopifyCustomerId: id, email: `r${id}@bench.example` });
          await changePoints(db, shop.id, 'set', { customerIdentifier: id, amount: OPENING_BALANCE });
        }),
      );
    }
    return { apiKey, shopId: shop.id, rewardId };
  } finally {
    await close();
  }
}

type Check = { name: string; ok: boolean; detail: string };

async function checkRedemptions(url: string, shopId: string, redemptions: number): Promise<Check[]> {
  const client = await connect(url);
  try {
    const one = async (text: string) => Number(Object.values((await client.query(text, [shopId])).rows[0])[0]);
    const activities = await one(`select count(*) from activities where shop_id = $1 and type = 'redeem_points'`);
    const codes = await one(`select count(*) from discount_codes where shop_id = $1`);
    const linked = await one(`
      select count(*) from discount_codes d join activities a on a.id = d.activity_id
      where d.shop_id = $1 and a.type = 'redeem_points' and a.old_points - a.new_points = d.points_amount`);
    const events = await one(`select count(*) from outbox_events where shop_id = $1 and type = 'redemptions/created'`);
    const wrongBalances = await one(`
      select count(*) from customers c
      left join lateral (select new_points from activities a where a.customer_id = c.id order by seq desc limit 1) last on true
      where c.shop_id = $1 and c.points <> coalesce(last.new_points, 0)`);
    return [
      {
        name: 'redeem_points entries = 2xx responses = codes = events',
        ok: activities === redemptions && codes === redemptions && events === redemptions,
        detail: `${activities} entries, ${redemptions} responses, ${codes} codes, ${events} events`,
      },
      { name: 'each code tied to its ledger entry', ok: linked === codes, detail: `${linked} of ${codes}` },
      { name: 'balance = last activity newPoints', ok: wrongBalances === 0, detail: `${wrongBalances} customers differ` },
    ];
  } finally {
    await client.end();
  }
}

async function run(options: BenchOptions): Promise<boolean> {
  const schema = await createIsolatedSchema(options.databaseUrl);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    server = await startServer({ databaseUrl: schema.url });
    const { apiKey, shopId, rewardId } = await seed(schema.url, options.customers);
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` };
    const randomCustomer = () => String(FIRST_CUSTOMER + Math.floor(Math.random() * options.customers));

    const list = await runHttpPhase(
      {
        url: `${server.url}/rest-api/v1/pointsRedemptions?customerIdentifier=${FIRST_CUSTOMER}&page=1&pageSize=${PAGE_SIZE}`,
        method: 'GET',
        connections: options.connections,
        headers,
      },
      options.durationSec,
      options.warmupSec,
    );
    report('GET /pointsRedemptions', list.measured);
    const redeem = await runHttpPhase(
      {
        url: `${server.url}/rest-api/v1/pointsRedemptions`,
        connections: options.connections,
        headers,
        body: () => JSON.stringify({ customerIdentifier: randomCustomer(), pointsAmount: COST, rewardId }),
      },
      options.durationSec,
      options.warmupSec,
    );
    report('POST /pointsRedemptions', redeem.measured);
    await server.stop();
    server = undefined;

    const checks = await checkRedemptions(schema.url, shopId, redeem.successes);
    const rows = [
      [`REST GET /pointsRedemptions (pageSize ${PAGE_SIZE})`, list.measured],
      ['REST POST /pointsRedemptions (redeem)', redeem.measured],
    ] as const;
    process.stdout.write(
      [
        '',
        `redemptions: ${options.connections} connections, about ${options.durationSec} s each after about ${options.warmupSec} s of warm-up;`,
        `${OPTIONS} options, ${options.customers} customers redeeming at random; rates count successes only`,
        '',
        formatTable(
          ['', 'rate (req/s)', 'p50', 'p99', 'ok', 'failed', 'seconds', `p99 < ${TARGETS.p99Ms} ms`],
          rows.map(([label, m]) => [label, fmt.rate(m.rate), fmt.ms(m.p50), fmt.ms(m.p99), m.ok, m.failed, m.durationSec.toFixed(1), m.p99 < TARGETS.p99Ms ? 'met' : 'MISSED']),
        ),
        '',
        formatTable(['correctness check', 'result', 'detail'], checks.map((c) => [c.name, c.ok ? 'ok' : 'FAILED', c.detail])),
        '',
      ].join('\n'),
    );
    return checks.every((c) => c.ok) && list.measured.failed === 0 && redeem.measured.failed === 0;
  } finally {
    await server?.stop();
    await schema.drop();
  }
}

function report(label: string, m: Measurement): void {
  process.stdout.write(`  ${label.padEnd(24)} ${fmt.rate(m.rate)} req/s, p50 ${fmt.ms(m.p50)}, p99 ${fmt.ms(m.p99)}\n`);
}

export const redemptions: Scenario = {
  name: 'redemptions',
  summary: 'REST GET /pointsRedemptions (pageSize 50) and POST /pointsRedemptions (redeem) rates',
  run,
};

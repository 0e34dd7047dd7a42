// Insights: the 90-day daily insights query of a shop with 5,000,000 ledger entries (written by
// SQL over the last 120 days, their rollups spread over 20 stripes a bucket, as 20 connections
// writing all day leave them, then folded as the hourly retention loop does) and a discount code
// for each of its 1,000,000 redemptions (over 5 rewards, 60 % of them ended: used, expired or
// cancelled, by statements through the codes' end trigger), answered over HTTP one at a time: p50
// and p99; then the same with each reward's codes per day. Then POST
// /points/add with the rollup triggers (movements and active members) on and off, in turns, at 32
// connections: the write rate the rollups leave.
import { openDatabase } from '../../src/db/database.js';
import { compactInsights } from '../../src/domain/insights/insights.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createPointsRedemption } from '../../src/domain/rewards/redemptions.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { combine, inTurns, type Measurement, summarize, warmUp } from '../lib/load.js';
import { connect, createIsolatedSchema } from '../lib/postgres.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';
import { startServer } from '../lib/server.js';
import { fmt, printReport, rateRatioRow } from '../lib/table.js';

const TARGETS = { queryP99Ms: 100, writeRatio: 0.9 };
const ENTRIES = 5_000_000;
const CUSTOMERS = 100_000;
const HISTORY_DAYS = 120;
const STRIPES = 20;
const QUERIES = 300;
const INTERVAL_QUERIES = 100;
const REWARDS = 5;
const ROUNDS = 6;
const LOAD_CUSTOMERS = 1000;
// The rollup columns the seed fills (its entries are adds, order earns, redemptions and subtractions).
const SPREAD = ['issued_orders', 'issued_manual', 'removed_manual', 'redeemed', 'active_members', 'members'];
// The ledger's rollup triggers, off for the turns without them.
const ROLLUP_TRIGGERS = ['activities_insights', 'activities_active_members'];

async function seed(url: string) {
  const { db, close } = await openDatabase({ url, poolSize: 8 });
  const client = await connect(url);
  try {
    const big = await createShop(db, 'Bench insights shop');
    const load = await createShop(db, 'Bench load shop');
    for (let i = 0; i < LOAD_CUSTOMERS; i += 8) {
      await Promise.all(Array.from({ length: 8 }, (_, k) => upsertCustomer(db, load.shop.id, { shopifyCustomerId: String(i + k), email: `l${i + k}@bench.example` })));
    }
    await client.query(`update shops set timezone = 'America/New_York' where id = $1`, [big.shop.id]);
    const started = performance.now();
    // Each customer's entries are a chain from 0 (its k-th entry: two adds, an order's earn, a redemption of 2, a subtraction of 3, again).
    await client.query(
      `insert into customers (id, shop_id, shopify_customer_id, email, points)
       select 'bi' || i, $1, i::text, 'i' || i || '@bench.example', 0 from generate_series(1, $2) i`,
      [big.shop.id, CUSTOMERS],
    );
    await client.query(
      `insert into activities (id, shop_id, customer_id, type, setting_type, old_points, new_points, created_at, updated_at)
       select 'ba' || g, $1, 'bi' || (1 + g % $3), kind, setting, running - delta, running, at, at
       from (
         select g, kind, setting, delta, at, sum(delta) over (partition by g % $3 order by g) as running
         from (
           select g,
             case when k % 5 = 4 then 'subtract_points' when k % 5 = 3 then 'redeem_points' when k % 5 = 2 then 'earn_points' else 'add_points' end as kind,
             case when k % 5 = 2 then 'order' when k % 5 = 3 then 'redemption' else 'api' end as setting,
             case when k % 5 = 4 then -3 when k % 5 = 3 then -2 else 1 + k % 10 end as delta,
             now() - make_interval(secs => (($2 - g)::float8 / $2) * $4 * 86400) as at
           from generate_series(0, $2 - 1) g, lateral (select g / $3 as k) n
         ) e
       ) c`,
      [big.shop.id, ENTRIES, CUSTOMERS, HISTORY_DAYS],
    );
    await client.query(
      `update customers c set points = l.new_points from (
         select distinct on (customer_id) customer_id, new_points from activities where shop_id = $1 order by customer_id, seq desc
       ) l where c.id = l.customer_id`,
      [big.shop.id],
    );
    // A code for each redemption, over REWARDS rewards, then 30 % used, 20 % expired (those due), 10 % cancelled.
    // Only the codes meant to expire are due within a year: the server, running, expires due codes
    // itself, and the ends below take only issued codes, as the product's transitions do (an end
    // written over the server's expiry counted expired in the rollups and cancelled in the table).
    const rewards = [];
    for (let r = 0; r < REWARDS; r++) rewards.push((await createPointsRedemption(db, big.shop.id, { name: `Bench ${r}`, type: 'amount', rewardValue: 2, discountValue: 5 })).pointsRedemption._id);
    await client.query(
      `insert into discount_codes (id, shop_id, customer_id, reward_id, activity_id, code, type, value, points_amount, expires_at, created_at)
       select 'bc' || a.seq, $1, a.customer_id, ($2::text[])[(1 + a.seq % $3)::int], a.id, 'BENCH-' || a.seq, 'amount', 5, 2, a.created_at + interval '365 days', a.created_at
       from activities a where a.shop_id = $1 and a.type = 'redeem_points'`,
      [big.shop.id, rewards, REWARDS],
    );
    // By the codes' own seq, as the ends below (the ledger's seq is another numbering).
    await client.query(`update discount_codes set expires_at = created_at + interval '30 days' where shop_id = $1 and seq % 10 in (3, 4)`, [big.shop.id]);
    await client.query(`update discount_codes set status = 'used', used_at = least(created_at + interval '2 days', now()), order_id = 'bo' || seq where shop_id = $1 and seq % 10 < 3 and status = 'issued'`, [big.shop.id]);
    await client.query(`update discount_codes set status = 'expired' where shop_id = $1 and seq % 10 in (3, 4) and expires_at < now() and status = 'issued'`, [big.shop.id]);
    await client.query(`update discount_codes set status = 'cancelled', cancelled_at = least(created_at + interval '1 day', now()) where shop_id = $1 and seq % 10 = 5 and status = 'issued'`, [big.shop.id]);
    // One statement wrote them, so one stripe holds each bucket: spread each over STRIPES, the sums unchanged.
    await client.query(
      `with old as (delete from insight_buckets where shop_id = $1 returning *)
       insert into insight_buckets (shop_id, bucket, stripe, ${SPREAD.join(', ')})
       select shop_id, bucket, s, ${SPREAD.map((c) => `${c} / $2 + case when s = 0 then ${c} % $2 else 0 end`).join(', ')}
       from old cross join generate_series(0, $2 - 1) s`,
      [big.shop.id, STRIPES],
    );
    const rollups = async () => Number((await client.query('select count(*) as n from insight_buckets where shop_id = $1', [big.shop.id])).rows[0].n);
    const striped = await rollups();
    const seedSec = (performance.now() - started) / 1000;
    // What the server's hourly retention loop does: every bucket older than an hour folded to one row.
    const folding = performance.now();
    await compactInsights(db, new Date(Date.now() - 3_600_000), { pauseMs: 0, batchSize: 5_000 });
    const foldSec = (performance.now() - folding) / 1000;
    await client.query('analyze');
    return { big, load, seedSec, foldSec, rollups: { striped, folded: await rollups() } };
  } finally {
    await client.end();
    await close();
  }
}

async function switchRollups(client: Awaited<ReturnType<typeof connect>>, on: boolean) {
  for (const trigger of ROLLUP_TRIGGERS) await client.query(`alter table activities ${on ? 'enable' : 'disable'} trigger ${trigger}`);
}

/** The program page's query over `$from`..`$to` by day (the scale bench sends it too); `perDay`: with the codes per day and reward. */
export const insightsQuery = (perDay: boolean) => `query($from: DateTime!, $to: DateTime!) { shop { insights(from: $from, to: $to, interval: day) {
      points { at issued { orders rules manual referrals total } removedManually redeemed expired clawedBack outstanding pending activeMembers newMembers members ${perDay ? 'codes { issued used expired cancelled useRate }' : ''} }
      rewards { rewardId codes points discount used expired cancelled useRate ${perDay ? 'intervals { date issued used expired cancelled useRate }' : ''} } tiers { name members } } } }`;

async function run(options: BenchOptions): Promise<boolean> {
  const schema = await createIsolatedSchema(options.databaseUrl);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    // Started first: it migrates the schema the seed writes into.
    server = await startServer({ databaseUrl: schema.url });
    process.stdout.write(`  writing ${ENTRIES.toLocaleString('en')} ledger entries by SQL…\n`);
    const { big, load, seedSec, foldSec, rollups } = await seed(schema.url);
    process.stdout.write(`  written in ${seedSec.toFixed(1)} s; ${rollups.striped.toLocaleString('en')} rollup rows over ${STRIPES} stripes, ${rollups.folded.toLocaleString('en')} once folded (${foldSec.toFixed(1)} s)\n`);

    // The query, one at a time: a shop owner opening the page, not a load test.
    const query = insightsQuery;
    const to = new Date();
    const variables = { from: new Date(to.getTime() - 90 * 86_400_000).toISOString(), to: to.toISOString() };
    type Answer = {
      data?: { shop: { insights: { points: Array<{ at: string; outstanding: number; members: number; activeMembers: number }>; rewards: Array<{ codes: number; used: number; expired: number; cancelled: number }> } } };
    };
    const timed = async (perDay: boolean, count: number) => {
      const latencies: number[] = [];
      let answer: Answer = {};
      for (let i = 0; i < count + 10; i++) {
        const started = performance.now();
        const res = await fetch(`${server!.url}/graphql`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${big.apiKey}` },
          body: JSON.stringify({ query: query(perDay), variables }),
        });
        answer = (await res.json()) as Answer;
        // The first ten warm the connection pool and plan cache.
        if (i >= 10) latencies.push(performance.now() - started);
      }
      return { latencies, answer };
    };
    const { latencies, answer } = await timed(false, QUERIES);
    const queried = summarize(latencies);
    const perDay = await timed(true, INTERVAL_QUERIES);
    const queriedPerDay = summarize(perDay.latencies);
    const series = answer.data?.shop.insights.points ?? [];
    const rewards = answer.data?.shop.insights.rewards ?? [];
    const client = await connect(schema.url);
    let owed: number;
    let codes: { issued: number; used: number; expired: number; cancelled: number };
    try {
      owed = Number((await client.query('select sum(points) as n from customers where shop_id = $1', [big.shop.id])).rows[0].n);
      // The codes of the series' range, counted in the codes table.
      const { rows } = await client.query(
        `select count(*) filter (where created_at >= $2 and created_at < $3) as issued,
           count(*) filter (where status = 'used' and used_at >= $2 and used_at < $3) as used,
           count(*) filter (where status = 'expired' and expires_at >= $2 and expires_at < $3) as expired,
           count(*) filter (where status = 'cancelled' and cancelled_at >= $2 and cancelled_at < $3) as cancelled
         from discount_codes where shop_id = $1`,
        [big.shop.id, series[0]?.at ?? variables.from, variables.to],
      );
      codes = { issued: Number(rows[0].issued), used: Number(rows[0].used), expired: Number(rows[0].expired), cancelled: Number(rows[0].cancelled) };
    } finally {
      await client.end();
    }
    const shown = (f: (r: (typeof rewards)[number]) => number) => rewards.reduce((s, r) => s + f(r), 0);
    const rewardFigures = { issued: shown((r) => r.codes), used: shown((r) => r.used), expired: shown((r) => r.expired), cancelled: shown((r) => r.cancelled) };

    // The write rate with the rollup trigger and without, in turns (the trigger toggled between turns).
    const customer = () => String(Math.floor(Math.random() * LOAD_CUSTOMERS));
    const add = {
      url: `${server.url}/rest-api/v1/points/add`,
      connections: options.connections,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${load.apiKey}` },
      body: () => JSON.stringify({ customerIdentifier: customer(), amount: 1 }),
    };
    const toggle = await connect(schema.url);
    let turns: Record<'with' | 'without', Measurement[]>;
    try {
      const rate = (await warmUp(add, options.warmupSec)).rate;
      const roundSec = Math.max(1, Math.round(options.durationSec / ROUNDS));
      turns = await inTurns({ with: add, without: add }, { with: rate, without: rate }, {
        rounds: ROUNDS,
        roundSec,
        beforeTurn: (face) => switchRollups(toggle, face === 'with'),
      });
    } finally {
      await switchRollups(toggle, true);
      await toggle.end();
    }
    const withRollups = combine(turns.with);
    const without = combine(turns.without);

    const checks = [
      { name: 'the query answered 90 days', ok: series.length >= 90, detail: `${series.length} days` },
      { name: 'the rewards\' codes issued, used, expired, cancelled are the codes table\'s', ok: JSON.stringify(rewardFigures) === JSON.stringify(codes), detail: `${JSON.stringify(rewardFigures)} against ${JSON.stringify(codes)}` },
      { name: 'the query with codes per day answered', ok: (perDay.answer.data?.shop.insights.points.length ?? 0) >= 90, detail: `${perDay.answer.data?.shop.insights.points.length} days` },
      { name: 'the last outstanding figure is every balance together', ok: series.at(-1)?.outstanding === owed, detail: `${series.at(-1)?.outstanding} against ${owed}` },
      { name: 'the last members figure is every customer', ok: series.at(-1)?.members === CUSTOMERS, detail: `${series.at(-1)?.members} against ${CUSTOMERS}` },
      { name: 'active members counted on every day with entries', ok: series.slice(1).every((p) => p.activeMembers > 0), detail: `${series.filter((p) => p.activeMembers > 0).length} of ${series.length} days` },
      { name: 'every write answered 2xx', ok: withRollups.failed + without.failed === 0, detail: `${withRollups.failed + without.failed} failed` },
    ];
    return printReport({
      requests: [
        [`insights, 90 days, ${ENTRIES.toLocaleString('en')} entries (one at a time)`, '-', fmt.ms(queried.p50), fmt.ms(queried.p99), latencies.length, 0],
        ['the same, with each reward\'s codes per day', '-', fmt.ms(queriedPerDay.p50), fmt.ms(queriedPerDay.p99), perDay.latencies.length, 0],
        ['POST /points/add, rollups on', fmt.rate(withRollups.rate), fmt.ms(withRollups.p50), fmt.ms(withRollups.p99), withRollups.ok, withRollups.failed],
        ['POST /points/add, rollups off', fmt.rate(without.rate), fmt.ms(without.p50), fmt.ms(without.p99), without.ok, without.failed],
      ],
      targets: [
        ['insights query p99', fmt.ms(queried.p99), '', `< ${TARGETS.queryP99Ms} ms`, queried.p99 < TARGETS.queryP99Ms ? 'met' : 'MISSED'],
        rateRatioRow(`write rate with rollups / without, ${options.connections} connections`, turns.with, turns.without, TARGETS.writeRatio),
      ],
      checks,
    });
  } finally {
    await server?.stop();
    await schema.drop();
  }
}

export const insights: Scenario = {
  name: 'insights',
  summary: 'the 90-day insights query on a shop with 5,000,000 ledger entries and 1,000,000 codes; points/add with the rollups on and off, in turns',
  run,
};

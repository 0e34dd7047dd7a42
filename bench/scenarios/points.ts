// Points: REST POST /rest-api/v1/points/add and GraphQL pointsAdd against pgbench running the same
// SQL transaction as changePoints (src/domain/ledger/points.ts) on the same tables, then a ledger check.
import os from 'node:os';
import { loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/database.js';
import { type Actor, apiKeyActor } from '../../src/domain/audit/index.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { type ProbeCommit, stalledCommit, startCommitProbe } from '../lib/commit-probe.js';
import { type CpuBreakdown, cpuBreakdown, type CpuSpan, sampleCpu } from '../lib/cpu.js';
import { amountFor, combine, type Measurement, runHttpLoad, runOpenLoop, warmUp } from '../lib/load.js';
import { findPgbench, runPgbench } from '../lib/pgbench.js';
import { connect, createIsolatedSchema } from '../lib/postgres.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';
import { startServer } from '../lib/server.js';
import { fmt, formatTable } from '../lib/table.js';

const TARGETS = { restVsPgbench: 0.5, graphqlVsRest: 0.8, p99Ms: 50 };
// Customers are "100001", "100002", …: numeric strings, like Shopify customer ids.
const FIRST_CUSTOMER = 100_001;

const DESCRIPTION = { rest: 'bench rest', graphql: 'bench graphql', pgbench: 'bench pgbench' } as const;
type Face = keyof typeof DESCRIPTION;
const HTTP_FACES = ['rest', 'graphql'] as const;
type HttpFace = (typeof HTTP_FACES)[number];
/** Saturated runs come in this many turns per face (see run). */
const ROUNDS = 5;

const POINTS_ADD = `mutation PointsAdd($input: PointsChangeInput!) {
  pointsAdd(input: $input) { activity { _id type oldPoints newPoints createdAt } userErrors { code field message } }
}`;

const PATHS = { rest: '/rest-api/v1/points/add', graphql: '/graphql' } as const;
const BODIES = {
  rest: (customerIdentifier: string) => ({ customerIdentifier, amount: 1, description: DESCRIPTION.rest }),
  graphql: (customerIdentifier: string) => ({
    query: POINTS_ADD,
    variables: { input: { customerIdentifier, amount: 1, description: DESCRIPTION.graphql } },
  }),
};

/**
 * changePoints('add') as it reaches PostgreSQL when it has a statement to itself: writeBalanceChanges
 * in src/domain/ledger/points.ts with one change (naming the customer by the shop's id for them), which locks the customer, updates the balance and inserts
 * the activity, the outbox event and the audit row that names the API key (as a REST call by key writes). (Under load the server puts several concurrent changes in that
 * one statement; pgbench runs one change per transaction, the database's own rate for it.) Values the
 * service sends as parameters are pgbench variables or SQL here (ids and timestamps made in SQL, as
 * pgbench's script language has no strings). test/bench-points-transaction.test.ts fails when
 * changePoints and this script drift apart.
 */
export const PGBENCH_TRANSACTION = `
\\set cid random(:first_customer, :last_customer)
with input as (
  select * from unnest(
    array[0]::int[], array[:shop]::text[], array[:cid]::text[],
    array['add']::text[], array[1]::bigint[],
    array['add_points']::text[], array['api']::text[],
    array['${DESCRIPTION.pgbench}']::text[], array[null]::text[],
    array[substr(md5(random()::text), 1, 24)]::text[], array['evt_' || substr(md5(random()::text), 1, 24)]::text[],
    array['points/added']::text[],
    array['api_key']::text[], array[:key_id]::text[], array[:key_label]::text[], array[substr(md5(random()::text), 1, 24)]::text[]
  ) as i(ord, shop_id, customer_key, op, amount, type, setting_type, description, note, activity_id, event_id, topic,
    actor_kind, actor_id, actor_label, audit_id)
), target as (
  select c.id, c.points, i.ord from input i join customers c on c.shop_id = i.shop_id and c.shopify_customer_id = i.customer_key
  order by c.id for no key update of c
), updated as (
  update customers c
  set points = case i.op when 'add' then t.points + i.amount when 'subtract' then t.points - i.amount else i.amount end,
    updated_at = now()
  from target t join input i on i.ord = t.ord
  where c.id = t.id
    and case i.op when 'add' then t.points + i.amount <= 2147483647 when 'subtract' then t.points >= i.amount else true end
  returning c.*, t.points as old_points, i.ord
), activity as (
  insert into activities (id, shop_id, customer_id, type, setting_type, description, note, old_points, new_points, created_at, updated_at)
  select i.activity_id, u.shop_id, u.id, i.type, i.setting_type, i.description, i.note, u.old_points, u.points, now(), now()
  from updated u join input i on i.ord = u.ord
  returning *
), event as (
  insert into outbox_events (id, shop_id, type, data)
  select i.event_id, a.shop_id, i.topic, jsonb_build_object(
    '_id', a.id, 'type', a.type, 'settingType', a.setting_type, 'description', a.description, 'note', a.note,
    'oldPoints', a.old_points, 'newPoints', a.new_points, 'customer', a.customer_id, 'shop', a.shop_id,
    'createdAt', now()::text, 'updatedAt', now()::text)
  from activity a join input i on i.activity_id = a.id
  where i.topic is not null
), audit as (
  insert into audit_log (id, shop_id, at, actor_kind, actor_id, actor_label, kind, subject_type, subject_id, before, after)
  select i.audit_id, a.shop_id, now(), i.actor_kind, i.actor_id, i.actor_label, 'points.' || i.op, 'customer', a.customer_id,
    jsonb_build_object('points', a.old_points),
    jsonb_build_object('points', a.new_points, 'activity', a.id, 'description', a.description, 'note', a.note)
  from activity a join input i on i.activity_id = a.id
  where i.actor_id is not null)
select a.*, u.ord, u.shopify_customer_id, u.email, u.birthday, u.pending_points, u.created_at as customer_created_at
from activity a join updated u on u.id = a.customer_id;
`;

function randomCustomer(count: number): string {
  return String(FIRST_CUSTOMER + Math.floor(Math.random() * count));
}

async function seed(url: string, customers: number): Promise<{ shopId: string; apiKey: string; actor: Actor }> {
  const { db, close } = await openDatabase({ url, poolSize: 8 });
  try {
    const { shop, apiKey } = await createShop(db, 'Bench shop');
    // The audit row the REST calls write names their key; pgbench's names the same.
    const actor = apiKeyActor(await db.selectFrom('api_keys').select(['id', 'prefix']).where('shop_id', '=', shop.id).executeTakeFirstOrThrow());
    const ids = Array.from({ length: customers }, (_, i) => String(FIRST_CUSTOMER + i));
    // Through the domain, so the rows are exactly what the service writes; eight at a time.
    for (let i = 0; i < ids.length; i += 8) {
      await Promise.all(
        ids.slice(i, i + 8).map((id) => upsertCustomer(db, shop.id, { shopifyCustomerId: id, email: `c${id}@bench.example` })),
      );
    }
    return { shopId: shop.id, apiKey, actor };
  } finally {
    await close();
  }
}

type Check = { name: string; ok: boolean; detail: string };

/** Every balance equals its last activity's newPoints, each entry starts where the previous ended, counts add up. */
async function checkLedger(url: string, shopId: string, successes: Record<Face, number>): Promise<Check[]> {
  const client = await connect(url);
  try {
    const one = async (text: string) => Number(Object.values((await client.query(text, [shopId])).rows[0])[0]);
    const wrongBalances = await one(`
      select count(*) from customers c
      left join lateral (select new_points from activities a where a.customer_id = c.id order by seq desc limit 1) last on true
      where c.shop_id = $1 and c.points <> coalesce(last.new_points, 0)`);
    const brokenChain = await one(`
      select count(*) from (
        select old_points, lag(new_points, 1, 0::bigint) over (partition by customer_id order by seq) as previous
        from activities where shop_id = $1) entries
      where old_points <> previous`);
    const checks: Check[] = [
      { name: 'balance = last activity newPoints', ok: wrongBalances === 0, detail: `${wrongBalances} customers differ` },
      { name: 'oldPoints = previous newPoints', ok: brokenChain === 0, detail: `${brokenChain} entries differ` },
    ];
    const { rows } = await client.query<{ description: string; activities: string; events: string }>(
      // A join, not a correlated EXISTS: that one scans the outbox once per activity.
      `select a.description, count(distinct a.id) as activities, count(distinct e.data->>'_id') as events
       from activities a left join outbox_events e on e.shop_id = a.shop_id and e.data->>'_id' = a.id
       where a.shop_id = $1 group by a.description`,
      [shopId],
    );
    for (const face of Object.keys(DESCRIPTION) as Face[]) {
      const row = rows.find((r) => r.description === DESCRIPTION[face]);
      const activities = Number(row?.activities ?? 0);
      const events = Number(row?.events ?? 0);
      const what = face === 'pgbench' ? 'committed transactions' : '2xx responses';
      checks.push({
        name: `${face}: activities = ${what} = events`,
        ok: activities === successes[face] && events === activities,
        detail: `${activities} activities, ${successes[face]} ${what}, ${events} outbox events`,
      });
    }
    return checks;
  } finally {
    await client.end();
  }
}

async function run(options: BenchOptions): Promise<boolean> {
  const schema = await createIsolatedSchema(options.databaseUrl);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    const nodeArgs = options.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`] : [];
    // The server migrates the fresh schema as it starts.
    server = await startServer({ databaseUrl: schema.url, nodeArgs });
    const { shopId, apiKey, actor } = await seed(schema.url, options.customers);
    const admin = await connect(options.databaseUrl);
    // A checkpoint before each phase, so none of them pays for another's dirty pages.
    const checkpoint = () => admin.query('checkpoint');

    const successes: Record<Face, number> = { rest: 0, graphql: 0, pgbench: 0 };
    const phaseErrors: string[] = [];
    const load = (face: HttpFace) => ({
      url: `${server!.url}${PATHS[face]}`,
      connections: options.connections,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
      body: () => JSON.stringify(BODIES[face](randomCustomer(options.customers))),
    });
    // Warm-up, which also gives each face the rate its rounds are sized by.
    const rates: Partial<Record<HttpFace, number>> = {};
    for (const face of HTTP_FACES) {
      try {
        await checkpoint();
        const warm = await warmUp(load(face), options.warmupSec);
        rates[face] = warm.rate;
        successes[face] += warm.successes;
      } catch (err) {
        // One broken face should not hide the others' figures.
        phaseErrors.push(`${face}: ${(err as Error).message}`);
        process.stdout.write(`  ${face.padEnd(8)} FAILED: ${(err as Error).message}\n`);
      }
    }

    // Saturated: the faces take turns in short rounds rather than one long run each. This machine's
    // speed drifts by tens of percent from one minute to the next (other tenants of the host), so
    // runs far apart in time compare the moments more than the faces; in turns, each face meets
    // the same moments.
    const faces = HTTP_FACES.filter((face) => rates[face] !== undefined);
    const roundSec = Math.max(1, Math.round(options.durationSec / ROUNDS));
    const turns: Record<Face, Measurement[]> = { rest: [], graphql: [], pgbench: [] };
    // Where the CPU went, per successful request: explains the rates.
    const spans: Record<Face, CpuSpan[]> = { rest: [], graphql: [], pgbench: [] };
    for (let round = 0; round < ROUNDS; round++) {
      // A different face goes first in each round.
      for (const face of faces.map((_, i) => faces[(i + round) % faces.length]!)) {
        await checkpoint();
        const before = sampleCpu(server.pid);
        const m = await runHttpLoad({ ...load(face), amount: amountFor(load(face), rates[face]!, roundSec) });
        spans[face].push({ before, after: sampleCpu(server.pid) });
        rates[face] = m.rate;
        turns[face].push(m);
        successes[face] += m.ok;
      }
      process.stdout.write(`  round ${round + 1}: ${faces.map((face) => `${face} ${fmt.rate(turns[face][round]!.rate)} req/s`).join(', ')}\n`);
    }

    // Then open loop at half the saturated rate: closed-loop latency at saturation is mostly
    // queueing (connections / rate), so the latency a shop sees at a load the server keeps up
    // with needs its own phase.
    // Beside it, a bare commit on the database every 20 ms (bench/lib/commit-probe.ts): a stall
    // of the database's WAL flush shows there too, one of the service's own does not.
    const steady: Partial<Record<HttpFace, Measurement>> = {};
    const probed: Partial<Record<HttpFace, ProbeCommit[]>> = {};
    for (const face of faces) {
      const rate = Math.round(combine(turns[face]).rate / 2);
      await checkpoint();
      const probe = await startCommitProbe(schema.url);
      const m = await runOpenLoop({ ...load(face), rate, durationSec: options.durationSec, slowMs: TARGETS.p99Ms });
      const commits = (probed[face] = await probe.stop());
      successes[face] += m.ok;
      steady[face] = m;
      process.stdout.write(`  ${face.padEnd(8)} at ${rate} req/s: p50 ${fmt.ms(m.p50)}, p99 ${fmt.ms(m.p99)}${m.failed ? `, ${m.failed} failed` : ''}\n`);
      // Where the slow requests were: one tight episode is a stall, scattered ones are queueing.
      for (const e of m.slow!.slice(0, 3)) {
        const flush = stalledCommit(commits, e.fromMs, e.toMs, TARGETS.p99Ms);
        const why = flush ? `; a bare commit on the database took ${fmt.ms(flush.ms)} then` : '';
        process.stdout.write(`    over ${TARGETS.p99Ms} ms: ${e.requests} requests sent ${e.startSec.toFixed(2)}-${e.endSec.toFixed(2)} s, up to ${fmt.ms(e.maxMs)}${why}\n`);
      }
    }

    // pgbench in one run: each run opens its connections afresh, and cold backends in short turns
    // would understate the database's rate.
    const pgbench = findPgbench();
    if (pgbench) {
      const transactions = (durationSec: number) =>
        runPgbench({
          pgbench,
          url: schema.url,
          script: PGBENCH_TRANSACTION,
          variables: {
            shop: shopId,
            key_id: actor.id,
            key_label: actor.label,
            first_customer: String(FIRST_CUSTOMER),
            last_customer: String(FIRST_CUSTOMER + options.customers - 1),
          },
          clients: options.connections,
          durationSec,
        });
      await checkpoint();
      if (options.warmupSec > 0) successes.pgbench += (await transactions(options.warmupSec)).ok;
      await checkpoint();
      const before = sampleCpu(undefined);
      const measured = await transactions(options.durationSec);
      spans.pgbench.push({ before, after: sampleCpu(undefined) });
      turns.pgbench.push(measured);
      successes.pgbench += measured.ok;
      process.stdout.write(`  pgbench  ${fmt.rate(measured.rate)} tx/s, p50 ${fmt.ms(measured.p50)}, p99 ${fmt.ms(measured.p99)}\n`);
    } else {
      process.stdout.write('  pgbench is not installed: no database baseline in this run\n');
    }

    const results: Partial<Record<Face, Measurement>> = {};
    const cpu: Partial<Record<Face, CpuBreakdown>> = {};
    const cores = os.availableParallelism();
    for (const face of Object.keys(DESCRIPTION) as Face[]) {
      if (!turns[face].length) continue;
      results[face] = combine(turns[face]);
      cpu[face] = cpuBreakdown(spans[face], results[face].ok, cores);
    }
    await admin.end();
    const logged = server.logged();
    await server.stop();
    server = undefined;
    if (logged.length) process.stdout.write(`  the server logged (last lines):\n${logged.map((l) => `    ${l.slice(0, 300)}`).join('\n')}\n`);

    const checks = await checkLedger(schema.url, shopId, successes);
    for (const error of phaseErrors) checks.push({ name: 'phase ran', ok: false, detail: error.slice(0, 200) });
    printReport(options, { results, turns, roundSec }, steady, probed, cpu, checks);
    return checks.every((c) => c.ok);
  } finally {
    await server?.stop();
    await schema.drop();
  }
}

function printReport(
  options: BenchOptions,
  saturated: { results: Partial<Record<Face, Measurement>>; turns: Record<Face, Measurement[]>; roundSec: number },
  steady: Partial<Record<HttpFace, Measurement>>,
  probed: Partial<Record<HttpFace, ProbeCommit[]>>,
  cpu: Partial<Record<Face, CpuBreakdown>>,
  checks: Check[],
): void {
  // What the server child reads from the same environment.
  const server = loadConfig({ ...process.env, DATABASE_URL: options.databaseUrl });
  const { results, turns, roundSec } = saturated;
  const rows = (['rest', 'graphql', 'pgbench'] as const)
    .filter((face) => results[face])
    .map((face) => {
      const m = results[face]!;
      const label = { rest: 'REST POST /points/add', graphql: 'GraphQL pointsAdd', pgbench: 'pgbench, same SQL transaction' }[face];
      return [label, fmt.rate(m.rate), fmt.ms(m.p50), fmt.ms(m.p99), m.ok, m.failed, m.durationSec.toFixed(1)];
    });
  for (const face of ['rest', 'graphql'] as const) {
    const m = steady[face];
    if (m) rows.push([`${face === 'rest' ? 'REST' : 'GraphQL'} at half that rate, open loop`, fmt.rate(m.rate), fmt.ms(m.p50), fmt.ms(m.p99), m.ok, m.failed, m.durationSec.toFixed(1)]);
  }

  const ms = (n: number | null | undefined) => (n === null || n === undefined ? '-' : `${n.toFixed(2)} ms`);
  const cpuRows = (['rest', 'graphql', 'pgbench'] as const)
    .filter((face) => cpu[face])
    .map((face) => {
      const c = cpu[face]!;
      return [face, face === 'pgbench' ? '-' : ms(c.server), ms(c.postgres), ms(c.loadGenerator), c.othersShare === null ? '-' : `${(c.othersShare * 100).toFixed(0)} %`];
    });

  const shares = Object.values(cpu).map((c) => c.othersShare).filter((x): x is number => x !== null);
  const busiest = shares.length ? Math.max(...shares) : null;

  const { rest, graphql } = results;
  const verdict = (ok: boolean) => (ok ? 'met' : 'MISSED');
  const targets: Array<Array<string | number>> = [];
  /** A rate ratio over all rounds, and its lowest and highest in a single round (how much the moment mattered). */
  const ratio = (name: string, top: Face, bottom: Face, target: number) => {
    if (!results[top] || !results[bottom]) return;
    const r = results[top].rate / results[bottom].rate;
    // Only faces that took turns have rounds to compare (pgbench runs once).
    const perRound = turns[top].length === turns[bottom].length ? turns[top].map((m, i) => m.rate / turns[bottom][i]!.rate) : [];
    const spread = perRound.length > 1 ? `${fmt.ratio(Math.min(...perRound))}-${fmt.ratio(Math.max(...perRound))}` : '';
    targets.push([name, fmt.ratio(r), spread, `>= ${target}`, verdict(r >= target)]);
  };
  ratio('REST / pgbench rate', 'rest', 'pgbench', TARGETS.restVsPgbench);
  ratio('GraphQL / REST rate', 'graphql', 'rest', TARGETS.graphqlVsRest);
  for (const [name, m] of [['REST', rest], ['GraphQL', graphql]] as const) {
    if (m) targets.push([`${name} p99, saturated`, fmt.ms(m.p99), '', `< ${TARGETS.p99Ms} ms`, verdict(m.p99 < TARGETS.p99Ms)]);
  }
  for (const [name, m] of [['REST', steady.rest], ['GraphQL', steady.graphql]] as const) {
    if (m) targets.push([`${name} p99 at half that rate`, fmt.ms(m.p99), '', `< ${TARGETS.p99Ms} ms`, verdict(m.p99 < TARGETS.p99Ms)]);
  }

  process.stdout.write(
    [
      '',
      `points: ${options.connections} connections (pgbench: ${options.connections} clients); after about ${options.warmupSec} s of warm-up each,`,
      `REST and GraphQL saturated in ${ROUNDS} rounds of about ${roundSec} s each, taking turns, then open loop for ${options.durationSec} s each;`,
      `pgbench for ${options.durationSec} s; ${options.customers} customers picked at random; server: pool of ${server.databasePoolSize} connections,`,
      `outbox relay ${server.worker ? 'on' : 'off'}, rate limiter ${server.redisUrl ? 'on Redis' : 'in memory'} (limit raised out of the way), LOG_LEVEL=warn; rates count successes only`,
      '',
      formatTable(['', 'rate (req/s)', 'p50', 'p99', 'ok', 'failed', 'seconds'], rows),
      '',
      'CPU per successful request (others: share of all cores used by other processes meanwhile)',
      formatTable(['', 'server', 'PostgreSQL', 'load generator', 'others'], cpuRows),
      ...(busiest !== null && busiest > 0.2
        ? [`warning: other processes took up to ${(busiest * 100).toFixed(0)} % of the cores during these runs; rates and latencies are worse than on a quiet machine`]
        : []),
      ...(['rest', 'graphql', 'pgbench'] as const)
        .filter((face) => results[face]?.failures)
        .map((face) => `${face} failures: ${results[face]!.failures}`),
      '',
      `bare commits on the database over ${TARGETS.p99Ms} ms during the open loop (the database's own flush stalls): ${(['rest', 'graphql'] as const)
        .filter((face) => probed[face])
        .map((face) => {
          const slow = probed[face]!.filter((c) => c.ms > TARGETS.p99Ms);
          return `${face} ${slow.length} of ${probed[face]!.length}${slow.length ? ` (slowest ${fmt.ms(Math.max(...slow.map((c) => c.ms)))})` : ''}`;
        })
        .join(', ')}`,
      '',
      formatTable(['target', 'value', 'single rounds', 'target', 'result'], targets),
      '',
      formatTable(['correctness check', 'result', 'detail'], checks.map((c) => [c.name, c.ok ? 'ok' : 'FAILED', c.detail])),
      '',
    ].join('\n'),
  );
}

export const points: Scenario = {
  name: 'points',
  summary: 'REST points/add and GraphQL pointsAdd against pgbench running the same transaction',
  run,
};

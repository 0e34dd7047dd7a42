// GraphQL isolation: shop B's POST /points/add latency alone, and while shop A sends, at its whole
// rate limit, what used to stall the server: a thousand aliased introspections in one document
// (refused now, max_tokens) and a page of 250 customers each with its activities, discount codes
// and referral code (one statement per field now, not one per customer).
import { setTimeout as sleep } from 'node:timers/promises';
import { Pool } from 'undici';
import { openDatabase } from '../../src/db/database.js';
import { changePoints } from '../../src/domain/ledger/points.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createPointsRedemption, redeemPoints } from '../../src/domain/rewards/redemptions.js';
import { updateShopSettings } from '../../src/domain/settings/shop-settings.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { combine, type Measurement, runOpenLoop, summarize } from '../lib/load.js';
import { createIsolatedSchema } from '../lib/postgres.js';
import type { BenchOptions } from '../lib/scenario.js';
import { startServer } from '../lib/server.js';
import { fmt, formatTable } from '../lib/table.js';

const TARGET_RATIO = 1.5;
/**
 * Seconds measured alone, and as many attacked, unless --duration says otherwise: shop A
 * spends its rate limit in a burst and again when its window has moved on, so the attacked samples
 * must be many enough that a burst is weighed, not the whole of them.
 */
const DEFAULT_DURATION_SEC = 40;
/** Alone and attacked take turns in this many rounds each (this machine's speed drifts). */
const ROUNDS = 4;
/** Shop A's customers: a full page of the wide list. */
const A_CUSTOMERS = 250;
const B_CUSTOMERS = 200;
/** Shop B's steady load: its own limit is raised to fit (shop A keeps the default 600 a minute). */
const B_RATE = 100;
/** Shop A's pace: its whole rate limit (600 a minute), evenly spread, which it can keep up for ever. */
const A_RATE = 10;

const ALIAS_BOMB = `{ ${Array.from({ length: 1000 }, (_, i) => `s${i}: __schema { types { fields { name } } }`).join(' ')} }`;
const WIDE_LIST = `{ customers(first: 250) { edges { node {
  _id email points referralCode
  activities(first: 1) { edges { node { _id type oldPoints newPoints createdAt } } }
  discountCodes(first: 1) { edges { node { code value type } } }
} } } }`;

type Seeded = { a: { apiKey: string }; b: { apiKey: string; customers: string[] } };

async function seed(url: string): Promise<Seeded> {
  const { db, close } = await openDatabase({ url, poolSize: 8 });
  try {
    const a = await createShop(db, 'Shop A (noisy)');
    const { pointsRedemption } = await createPointsRedemption(db, a.shop.id, { name: '5 off', type: 'amount', discountPrefix: 'A-', rewardValue: 10, discountValue: 5 });
    const aIds = Array.from({ length: A_CUSTOMERS }, (_, i) => `a-${i}`);
    for (let i = 0; i < aIds.length; i += 8) {
      await Promise.all(
        aIds.slice(i, i + 8).map(async (id) => {
          await upsertCustomer(db, a.shop.id, { shopifyCustomerId: id, email: `${id}@bench.example` });
          for (let n = 0; n < 3; n++) await changePoints(db, a.shop.id, 'add', { customerIdentifier: id, amount: 20 });
          await redeemPoints(db, a.shop.id, { customerIdentifier: id, rewardId: pointsRedemption._id, pointsAmount: 10 });
        }),
      );
    }
    const b = await createShop(db, 'Shop B');
    await updateShopSettings(db, b.shop.id, { rateLimitPerMinute: 10_000 });
    const bIds = Array.from({ length: B_CUSTOMERS }, (_, i) => `b-${i}`);
    for (let i = 0; i < bIds.length; i += 8) {
      await Promise.all(bIds.slice(i, i + 8).map((id) => upsertCustomer(db, b.shop.id, { shopifyCustomerId: id, email: `${id}@bench.example` })));
    }
    return { a: { apiKey: a.apiKey }, b: { apiKey: b.apiKey, customers: bIds } };
  } finally {
    await close();
  }
}

/**
 * Shop A's traffic until `signal.stopped`: bombs and wide lists in turn, A_RATE a second on a
 * fixed schedule, whether or not earlier ones were answered.
 */
function attack(url: string, apiKey: string, signal: { stopped: boolean }) {
  const pool = new Pool(url, { connections: A_RATE });
  const statuses = new Map<string, number>();
  const count = (what: string) => statuses.set(what, (statuses.get(what) ?? 0) + 1);
  /** How long shop A's answers took, ms: a wide list's cost shows here. */
  const latencies: Record<'bomb' | 'wide list', number[]> = { bomb: [], 'wide list': [] };
  const send = async (bomb: boolean) => {
    const what = bomb ? 'bomb' : 'wide list';
    const started = performance.now();
    try {
      const res = await pool.request({
        method: 'POST',
        path: '/graphql',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
        body: JSON.stringify({ query: bomb ? ALIAS_BOMB : WIDE_LIST }),
      });
      await res.body.dump();
      count(`${what} ${res.statusCode}`);
      latencies[what].push(performance.now() - started);
    } catch {
      count(`${what} socket error`);
    }
  };
  const done = (async () => {
    const inFlight: Array<Promise<void>> = [];
    const started = performance.now();
    for (let sent = 0; !signal.stopped; sent++) {
      const due = started + (sent * 1000) / A_RATE;
      if (due > performance.now()) await sleep(due - performance.now());
      if (!signal.stopped) inFlight.push(send(sent % 2 === 0));
    }
    await Promise.all(inFlight);
    await pool.close();
  })();
  return { statuses, latencies, done };
}

/** Runs the scenario; resolves to whether shop B's p99 under attack stayed within TARGET_RATIO of its own, without a 503. */
export async function graphqlIsolation(options: BenchOptions): Promise<boolean> {
  const schema = await createIsolatedSchema(options.databaseUrl);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    // The real per-shop limits (shop A's 600 a minute): they are part of the isolation.
    const nodeArgs = options.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`] : [];
    server = await startServer({ databaseUrl: schema.url, env: { RATE_LIMIT_PER_MINUTE: '600' }, nodeArgs });
    const seeded = await seed(schema.url);
    const pointsAdd = {
      url: `${server.url}/rest-api/v1/points/add`,
      connections: options.connections,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${seeded.b.apiKey}` },
      body: () => JSON.stringify({ customerIdentifier: seeded.b.customers[Math.floor(Math.random() * B_CUSTOMERS)], amount: 1 }),
    };
    // The wide list answers (and its referral codes exist) before anything is measured.
    const check = await fetch(`${server.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${seeded.a.apiKey}` },
      body: JSON.stringify({ query: WIDE_LIST }),
    });
    const checked = (await check.json()) as { data?: { customers: { edges: unknown[] } }; errors?: unknown };
    if (checked.data?.customers.edges.length !== A_CUSTOMERS) throw new Error(`the wide list did not answer: ${JSON.stringify(checked.errors)}`);
    if (options.warmupSec > 0) await runOpenLoop({ ...pointsAdd, rate: B_RATE, durationSec: options.warmupSec });

    const durationSec = options.durationGiven ? options.durationSec : DEFAULT_DURATION_SEC;
    const roundSec = Math.max(2, Math.round(durationSec / ROUNDS));
    const alone: Measurement[] = [];
    const attacked: Measurement[] = [];
    const attackStatuses = new Map<string, number>();
    const attackLatencies: Record<'bomb' | 'wide list', number[]> = { bomb: [], 'wide list': [] };
    for (let round = 0; round < ROUNDS; round++) {
      // Alone first in even rounds, attacked first in odd ones.
      for (const underAttack of round % 2 === 0 ? [false, true] : [true, false]) {
        const signal = { stopped: false };
        const traffic = underAttack ? attack(server.url, seeded.a.apiKey, signal) : undefined;
        const m = await runOpenLoop({ ...pointsAdd, rate: B_RATE, durationSec: roundSec });
        signal.stopped = true;
        if (traffic) {
          await traffic.done;
          for (const [what, n] of traffic.statuses) attackStatuses.set(what, (attackStatuses.get(what) ?? 0) + n);
          attackLatencies.bomb.push(...traffic.latencies.bomb);
          attackLatencies['wide list'].push(...traffic.latencies['wide list']);
        }
        (underAttack ? attacked : alone).push(m);
      }
      process.stdout.write(
        `  round ${round + 1}: shop B p99 alone ${fmt.ms(alone.at(-1)!.p99)}, with shop A's bombs and wide lists ${fmt.ms(attacked.at(-1)!.p99)}\n`,
      );
    }

    const quiet = combine(alone);
    const noisy = combine(attacked);
    const ratio = noisy.p99 / quiet.p99;
    const attack503 = [...attackStatuses].filter(([what]) => what.endsWith(' 503')).reduce((n, [, c]) => n + c, 0);
    const bombsAnswered = [...attackStatuses].filter(([what]) => what.startsWith('bomb') && !what.endsWith(' 400') && !what.endsWith(' 429'));
    const wideAnswered = attackStatuses.get('wide list 200') ?? 0;
    const ok = ratio <= TARGET_RATIO && quiet.failed === 0 && noisy.failed === 0 && attack503 === 0 && bombsAnswered.length === 0 && wideAnswered > 0;
    process.stdout.write(
      `\n${formatTable(
        ['shop B POST /points/add', 'requests', 'p50', 'p99', 'failed'],
        [
          ['alone', quiet.ok, fmt.ms(quiet.p50), fmt.ms(quiet.p99), quiet.failed],
          ['while shop A attacks', noisy.ok, fmt.ms(noisy.p50), fmt.ms(noisy.p99), noisy.failed],
        ],
      )}\n`,
    );
    process.stdout.write(
      `  p99 ratio ${ratio.toFixed(2)} (target <= ${TARGET_RATIO}); shop A's answers: ${[...attackStatuses].map(([what, n]) => `${what} ×${n}`).join(', ')}; shop A's 503s ${attack503}, shop B's non-2xx ${quiet.failed + noisy.failed}\n`,
    );
    const answered = (what: 'bomb' | 'wide list') => {
      const { p50, p99 } = summarize(attackLatencies[what]);
      return `${what} p50 ${fmt.ms(p50)}, p99 ${fmt.ms(p99)}`;
    };
    process.stdout.write(`  shop A's answers took: ${answered('bomb')}; ${answered('wide list')}\n`);
    process.stdout.write(`  ${ok ? 'PASS' : 'FAIL'}: shop B's p99 under attack within ${TARGET_RATIO}× of alone, no 503, every bomb refused\n`);
    if (server.logged().length) process.stdout.write(`  server log tail: ${server.logged().join(' | ')}\n`);
    return ok;
  } finally {
    await server?.stop();
    await schema.drop();
  }
}

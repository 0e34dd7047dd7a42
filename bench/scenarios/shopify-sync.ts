// Shopify sync (issue 34, item 6): 10,000 codes issued in a burst for shop A, each created in the
// Admin API stand-in (test/support/shopify-admin.ts, in this process) by the service's sync worker,
// at a rate compared with what A's cost bucket allows; meanwhile shop B, on its own healthy store,
// redeems a few codes a second, and the time from each redemption's answer to its code's creation
// in Shopify is measured. Then checks: every code created exactly once, all synced, none failed.
//
// The server runs with WORKER=off beside `npm run worker` (the outbox relay and the sync), and the
// worker starts after the burst: this machine issues codes more slowly than the 200 a second the
// bucket allows, and a sync waiting for codes to be issued would measure the issuing.
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { openDatabase } from '../../src/db/database.js';
import { changePoints } from '../../src/domain/ledger/points.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createPointsRedemption } from '../../src/domain/rewards/redemptions.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { REQUIRED_SCOPES } from '../../src/domain/shopify/index.js';
import { DISCOUNT_CODE_BASIC_CREATE } from '../../src/shopify-admin/operations.js';
import { createShopifyAdminStandIn, type ShopifyAdminStandIn, type ShopifyStore } from '../../test/support/shopify-admin.js';
import { percentile, runHttpLoad } from '../lib/load.js';
import { connect, createIsolatedSchema } from '../lib/postgres.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';
import { startServer, startWorkerProcess } from '../lib/server.js';
import { fmt, formatChecks, formatTable } from '../lib/table.js';

const TARGETS = { ratio: 0.9, p99Ms: 2_000 };
const CODES = 10_000;
/** Shop A's bucket: Shopify's default size, restored fast enough that 10,000 creations take about 50 s. */
const BUCKET_A = { maximumAvailable: 2_000, restoreRate: 2_000 };
/** Shop B redeems this often (ms): a few codes a second, on a store with Shopify's Standard bucket. */
const B_EVERY_MS = 250;
const CUSTOMERS_A = 500;
const CUSTOMERS_B = 20;
const COST = 100;
const OPENING_BALANCE = 100_000_000;
const PUBLIC_URL = 'https://loyalty.bench.example';

type BenchShop = { shopId: string; apiKey: string; rewardId: string; domain: string; customers: string[] };

async function seedShop(url: string, name: string, domain: string, prefix: string, customers: number, firstId: bigint): Promise<BenchShop> {
  const { db, close } = await openDatabase({ url, poolSize: 8 });
  try {
    const { shop, apiKey } = await createShop(db, name);
    const { pointsRedemption } = await createPointsRedemption(db, shop.id, { name: '$5 off', type: 'amount', discountPrefix: prefix, rewardValue: COST, discountValue: 5 });
    // Shopify's own customer ids, so each code is limited to its customer there.
    const ids = Array.from({ length: customers }, (_, i) => String(firstId + BigInt(i)));
    for (let i = 0; i < ids.length; i += 8) {
      await Promise.all(
        ids.slice(i, i + 8).map(async (id) => {
          await upsertCustomer(db, shop.id, { shopifyCustomerId: id, email: `s${id}@bench.example` });
          await changePoints(db, shop.id, 'set', { customerIdentifier: id, amount: OPENING_BALANCE });
        }),
      );
    }
    return { shopId: shop.id, apiKey, rewardId: pointsRedemption._id, domain, customers: ids };
  } finally {
    await close();
  }
}

async function graphql(serverUrl: string, apiKey: string, query: string, variables: Record<string, unknown>) {
  const res = await fetch(`${serverUrl}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as { data?: any; errors?: unknown };
  if (!res.ok || body.errors) throw new Error(`GraphQL answered ${res.status}: ${JSON.stringify(body.errors)}`);
  return body.data;
}

/** The shop's store domain set, and its Admin API connected with a token the stand-in knows; waits for its webhooks. */
async function connectShop(serverUrl: string, shopify: ShopifyAdminStandIn, shop: BenchShop): Promise<void> {
  const settings = await graphql(serverUrl, shop.apiKey, 'mutation($i: ShopifySettingsInput!) { shopifySettingsUpdate(input: $i) { userErrors { code message } } }', {
    i: { shopDomain: shop.domain, webhookSecret: 'shpss_bench_secret_123' },
  });
  if (settings.shopifySettingsUpdate.userErrors.length) throw new Error(JSON.stringify(settings.shopifySettingsUpdate.userErrors));
  const token = shopify.store(shop.domain).addAccessToken([...REQUIRED_SCOPES]);
  const connected = await graphql(serverUrl, shop.apiKey, 'mutation($input: ShopifyAdminConnectInput!) { shopifyAdminConnect(input: $input) { userErrors { code message } } }', {
    input: { accessToken: token },
  });
  if (connected.shopifyAdminConnect.userErrors.length) throw new Error(JSON.stringify(connected.shopifyAdminConnect.userErrors));
  const deadline = Date.now() + 30_000;
  for (;;) {
    const view = await graphql(serverUrl, shop.apiKey, '{ shop { shopifyAdmin { webhooks { state } } } }', {});
    const webhooks = view.shop.shopifyAdmin?.webhooks ?? [];
    if (webhooks.length > 0 && webhooks.every((w: { state: string }) => w.state === 'registered')) return;
    if (Date.now() > deadline) throw new Error(`${shop.domain}: webhooks not registered within 30 s`);
    await sleep(200);
  }
}

async function redeem(serverUrl: string, shop: BenchShop, customer: string): Promise<string> {
  const res = await fetch(`${serverUrl}/rest-api/v1/pointsRedemptions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${shop.apiKey}` },
    body: JSON.stringify({ customerIdentifier: customer, rewardId: shop.rewardId, pointsAmount: COST }),
  });
  if (!res.ok) throw new Error(`redeem answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { discountCode: string }).discountCode;
}

/** Successful creations in the store, and the THROTTLED (GraphQL) and 429 (HTTP) answers it gave. */
function storeFigures(store: ShopifyStore) {
  const creations = store.callsTo('discountCodeBasicCreate').filter((c) => c.status === 200 && (c.response as any)?.data?.discountCodeBasicCreate?.codeDiscountNode);
  const throttled = store.calls.filter((c) => c.status === 200 && ((c.response as any)?.errors ?? []).some?.((e: any) => e.extensions?.code === 'THROTTLED')).length;
  const http429 = store.calls.filter((c) => c.status === 429).length;
  return { creations, throttled, http429 };
}

/** When the outbox relay queued each of the shop's codes for Shopify (its redemptions/created event relayed), by code. */
async function relayTimes(url: string, shopId: string): Promise<Map<string, number>> {
  const client = await connect(url);
  try {
    const { rows } = await client.query<{ code: string; relayed_at: Date | null }>(
      `select d.code, o.relayed_at from discount_codes d
       join outbox_events o on o.shop_id = d.shop_id and o.type = 'redemptions/created' and o.data->>'_id' = d.id
       where d.shop_id = $1`,
      [shopId],
    );
    return new Map(rows.filter((r) => r.relayed_at).map((r) => [r.code, r.relayed_at!.getTime()]));
  } finally {
    await client.end();
  }
}

/** Outbox events not yet relayed (the relay queues codes' jobs as it relays their events). */
async function unrelayed(url: string): Promise<number> {
  const client = await connect(url);
  try {
    return Number((await client.query('select count(*) from outbox_events where relayed_at is null')).rows[0].count);
  } finally {
    await client.end();
  }
}

async function until(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(200);
  }
}

type Check = { name: string; ok: boolean; detail: string };

async function checkShop(url: string, store: ShopifyStore, shop: BenchShop, expected: number): Promise<Check[]> {
  const client = await connect(url);
  try {
    const { rows } = await client.query<{ code: string; shopify_sync: string | null; shopify_id: string | null }>(
      'select code, shopify_sync, shopify_id from discount_codes where shop_id = $1',
      [shop.shopId],
    );
    const jobs = Number((await client.query("select count(*) from shopify_sync_jobs where shop_id = $1 and kind like 'code_%'", [shop.shopId])).rows[0].count);
    const wrongBalances = Number(
      (
        await client.query(
          `select count(*) from customers c
           left join lateral (select new_points from activities a where a.customer_id = c.id order by seq desc limit 1) last on true
           where c.shop_id = $1 and c.points <> coalesce(last.new_points, 0)`,
          [shop.shopId],
        )
      ).rows[0].count,
    );
    const created = new Map<string, number>();
    for (const call of storeFigures(store).creations) {
      const code = (call.variables as { discount: { code: string } }).discount.code;
      created.set(code, (created.get(code) ?? 0) + 1);
    }
    const twice = [...created.values()].filter((n) => n > 1).length;
    const missing = rows.filter((r) => !store.discountByCode(r.code)).length;
    const synced = rows.filter((r) => r.shopify_sync === 'synced' && r.shopify_id === store.discountByCode(r.code)?.id).length;
    const failed = rows.filter((r) => r.shopify_sync === 'failed').length;
    const name = shop.domain.split('.')[0];
    return [
      { name: `${name}: codes issued`, ok: rows.length === expected, detail: `${rows.length} of ${expected}` },
      { name: `${name}: every code in Shopify exactly once`, ok: missing === 0 && twice === 0 && store.discounts.size === rows.length, detail: `${store.discounts.size} discounts, ${missing} missing, ${twice} created twice` },
      { name: `${name}: all synced with Shopify's id`, ok: synced === rows.length, detail: `${synced} of ${rows.length}` },
      { name: `${name}: none failed, no code job left`, ok: failed === 0 && jobs === 0, detail: `${failed} failed, ${jobs} code jobs left` },
      { name: `${name}: balance = last activity newPoints`, ok: wrongBalances === 0, detail: `${wrongBalances} customers differ` },
    ];
  } finally {
    await client.end();
  }
}

async function run(options: BenchOptions): Promise<boolean> {
  const schema = await createIsolatedSchema(options.databaseUrl);
  const shopify = await createShopifyAdminStandIn();
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  let worker: Awaited<ReturnType<typeof startWorkerProcess>> | undefined;
  try {
    const env = { PUBLIC_URL, SHOPIFY_ADMIN_BASE_URL: `${shopify.url}/stores/{shop}`, SECRETS_KEY: randomBytes(32).toString('hex') };
    server = await startServer({ databaseUrl: schema.url, env: { ...env, WORKER: 'off' } });
    worker = await startWorkerProcess(schema.url, { ...env, LOG_LEVEL: 'warn' });
    const a = await seedShop(schema.url, 'Bench sync shop A', 'bench-a.myshopify.com', 'SA-', CUSTOMERS_A, 7_100_000_000_000_000_001n);
    const b = await seedShop(schema.url, 'Bench sync shop B', 'bench-b.myshopify.com', 'SB-', CUSTOMERS_B, 7_200_000_000_000_000_001n);
    const storeA = shopify.store(a.domain, BUCKET_A);
    const storeB = shopify.store(b.domain);
    await connectShop(server.url, shopify, a);
    await connectShop(server.url, shopify, b);
    await worker.stop();
    worker = undefined;

    const burst = await runHttpLoad({
      url: `${server.url}/rest-api/v1/pointsRedemptions`,
      connections: options.connections,
      amount: CODES,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${a.apiKey}` },
      body: () => JSON.stringify({ customerIdentifier: a.customers[Math.floor(Math.random() * a.customers.length)], rewardId: a.rewardId, pointsAmount: COST }),
    });
    process.stdout.write(`  burst: ${burst.ok} codes issued for A in ${burst.durationSec.toFixed(1)} s (${fmt.rate(burst.rate)}/s), ${burst.failed} failed\n`);
    // The registrations' calls refilled long ago: the sync starts on a full bucket.
    const opening = storeA.bucket.status().currentlyAvailable;
    worker = await startWorkerProcess(schema.url, { ...env, LOG_LEVEL: 'warn' });
    // B starts once the relay has queued A's burst: the relay is one queue for every shop, in commit order.
    await until(async () => (await unrelayed(schema.url)) === 0, 120_000, "the relay to queue A's burst");

    // Shop B redeems steadily until A's backlog is created; each answer's time is kept.
    const answeredB = new Map<string, number>();
    let bRunning = true;
    const bLoop = (async () => {
      for (let i = 0; bRunning; i++) {
        const next = Date.now() + B_EVERY_MS;
        answeredB.set(await redeem(server!.url, b, b.customers[i % b.customers.length]!), Date.now());
        await sleep(Math.max(0, next - Date.now()));
      }
    })();

    const deadline = Date.now() + 10 * 60_000;
    while (storeFigures(storeA).creations.length < burst.ok && Date.now() < deadline) {
      await sleep(500);
    }
    bRunning = false;
    await bLoop;
    // B's last codes get their time to be created.
    const bDeadline = Date.now() + 30_000;
    while ([...answeredB.keys()].some((code) => !storeB.discountByCode(code)) && Date.now() < bDeadline) await sleep(100);
    // The last answers recorded before the checks read the database.
    await sleep(1_000);

    const { creations, throttled, http429 } = storeFigures(storeA);
    const first = creations[0]?.at ?? 0;
    const last = creations.at(-1)?.at ?? 0;
    const seconds = (last - first) / 1000;
    // What the bucket allows in that window: the opening level, then its restore rate, each creation costing its mutation's cost.
    const allowedCodes = (opening + BUCKET_A.restoreRate * seconds) / DISCOUNT_CODE_BASIC_CREATE.cost;
    const achieved = creations.length / seconds;
    const allowed = allowedCodes / seconds;
    const ratio = creations.length / allowedCodes;
    // The pace through the run, to show where time went (the start, the end, a stall).
    const perFive = Array.from({ length: Math.ceil(seconds / 5) }, (_, i) => creations.filter((c) => c.at >= first + i * 5_000 && c.at < first + (i + 1) * 5_000).length / 5);
    process.stdout.write(`  A's creations per second, each 5 s from the first: ${perFive.map((n) => n.toFixed(0)).join(' ')}\n`);
    const latenciesB = [...answeredB].map(([code, at]) => (storeB.discountByCode(code)?.createdAt ?? Number.POSITIVE_INFINITY) - at).sort((x, y) => x - y);
    const p50 = percentile(latenciesB, 50);
    const p99 = percentile(latenciesB, 99);
    const bFigures = storeFigures(storeB);

    // Where B's time went: from its answer to the outbox relay queueing its job (the rest is the sync worker's).
    const relayedB = await relayTimes(schema.url, b.shopId);
    const relayLagB = [...answeredB].map(([code, at]) => (relayedB.get(code) ?? Number.POSITIVE_INFINITY) - at).sort((x, y) => x - y);

    await worker.stop();
    worker = undefined;
    await server.stop();
    server = undefined;
    const checks = [...(await checkShop(schema.url, storeA, a, burst.ok)), ...(await checkShop(schema.url, storeB, b, answeredB.size))];
    checks.push({ name: 'burst: every redemption answered 2xx', ok: burst.failed === 0 && burst.ok === CODES, detail: `${burst.ok} ok, ${burst.failed} failed` });

    process.stdout.write(
      [
        '',
        `shopify-sync: ${CODES} codes redeemed for shop A over ${options.connections} connections; A's store bucket ${BUCKET_A.maximumAvailable} points,`,
        `restored at ${BUCKET_A.restoreRate}/s, ${DISCOUNT_CODE_BASIC_CREATE.cost} points a creation (${opening.toFixed(0)} in it at the start);`,
        `the worker process started after the burst; shop B redeems every ${B_EVERY_MS} ms on its own store (2000 points, 100/s) meanwhile`,
        '',
        formatTable(
          ['', 'value', 'target', 'result'],
          [
            ['A: codes created', creations.length, '', ''],
            ['A: first to last creation (s)', seconds.toFixed(1), '', ''],
            ['A: codes/s achieved', achieved.toFixed(1), '', ''],
            ['A: codes/s the bucket allows', allowed.toFixed(1), '', ''],
            ['A: achieved / allowed', fmt.ratio(ratio), `>= ${TARGETS.ratio}`, ratio >= TARGETS.ratio ? 'met' : 'MISSED'],
            ['A: THROTTLED answers', throttled, '', ''],
            ['A: HTTP 429 answers', http429, '', ''],
            ['B: codes', latenciesB.length, '', ''],
            ['B: redemption to creation p50', fmt.ms(p50), '', ''],
            ['B: redemption to creation p99', fmt.ms(p99), `< ${TARGETS.p99Ms} ms`, p99 < TARGETS.p99Ms ? 'met' : 'MISSED'],
            ['B: of which answer to relayed, p99', fmt.ms(percentile(relayLagB, 99)), '', ''],
            ['B: redemption to creation max', fmt.ms(latenciesB.at(-1) ?? 0), '', ''],
            ['B: THROTTLED answers', bFigures.throttled, '', ''],
          ],
        ),
        '',
        ...formatChecks(checks),
        '',
      ].join('\n'),
    );
    return checks.every((c) => c.ok);
  } finally {
    await worker?.stop();
    await server?.stop();
    await shopify.close();
    await schema.drop();
  }
}

export const shopifySync: Scenario = {
  name: 'shopify-sync',
  summary: "10,000 codes created in the Shopify stand-in against its cost bucket, another shop's codes created meanwhile",
  run,
};

// Orders: REST PUT /orders/{id} (a new paid order, one place_order rule) against POST /points/add in
// the same run, taking turns with the same PUT carrying a code the customer redeemed (it becomes
// used); the Shopify connector's acceptance (a signed orders/paid webhook stored
// and answered) at the same connections; then `npm run cli -- orders import` of 100,000 orders; then
// a ledger check.
import { spawn } from 'node:child_process';
import { createHmac, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream } from 'node:fs';
import { rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../src/db/database.js';
import { changePoints } from '../../src/domain/ledger/points.js';
import { createEarningRule } from '../../src/domain/program/earning-rules.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createPointsRedemption, redeemPoints } from '../../src/domain/rewards/redemptions.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { amountFor, combine, inTurns, runHttpLoad, warmUp } from '../lib/load.js';
import { connect, createIsolatedSchema } from '../lib/postgres.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';
import { REPO_ROOT, startServer } from '../lib/server.js';
import { fmt, printReport, rateRatioRow } from '../lib/table.js';

const TARGETS = { ordersVsPoints: 0.7, withCodeVsWithout: 0.9, importSeconds: 90, connectorP99Ms: 50 };
/** Codes issued before the warm-up of PUTs with a code, per second of its warm-up and turns: more than they can use. */
const CODES_PER_SECOND = 6_000;
const CONNECTOR_SECONDS = 10;
const SHOPIFY_DOMAIN = 'bench-orders.myshopify.com';
const SHOPIFY_SECRET = 'bench-shopify-webhook-secret';
const ROUNDS = 5;
const IMPORT_ORDERS = 100_000;
const FIRST_CUSTOMER = 300_001;

let orderSeq = 0;
const nextOrderId = () => `B-${process.pid}-${++orderSeq}`;

function orderBody(customerIdentifier: string, discountCodes?: Array<{ code: string; amount: string }>) {
  return {
    customerIdentifier, currency: 'USD', subtotal: '42.50', shipping: '4.99', tax: '3.40', total: '50.89', status: 'paid',
    lineItems: [{ productId: 'tee', quantity: 2, price: '15.00' }, { productId: 'mug', quantity: 1, price: '12.50' }],
    ...(discountCodes ? { discountCodes } : {}),
  };
}

/** Each customer redeems once (100 points given, then spent on a code): the codes the run uses are copies of theirs. */
async function seed(url: string, customers: number) {
  const { db, close } = await openDatabase({ url, poolSize: 8 });
  try {
    const { shop, apiKey } = await createShop(db, 'Bench orders shop');
    await createEarningRule(db, shop.id, { type: 'place_order', name: '1 point per $1', earnPoint: 1, spent: '1.00' });
    const { pointsRedemption } = await createPointsRedemption(db, shop.id, { name: '$5 off', type: 'amount', discountPrefix: 'BENCH-', rewardValue: 100, discountValue: 5 });
    const ids = Array.from({ length: customers }, (_, i) => String(FIRST_CUSTOMER + i));
    for (let i = 0; i < ids.length; i += 8) {
      await Promise.all(ids.slice(i, i + 8).map(async (id) => {
        await upsertCustomer(db, shop.id, { shopifyCustomerId: id, email: `o${id}@bench.example` });
        await changePoints(db, shop.id, 'add', { customerIdentifier: id, amount: 100 });
        await redeemPoints(db, shop.id, { customerIdentifier: id, pointsAmount: 100, rewardId: pointsRedemption._id });
      }));
    }
    return { shopId: shop.id, apiKey };
  } finally {
    await close();
  }
}

/**
 * Issued codes for the PUTs with a code, one per PUT, each of a customer at random: rows inserted
 * as copies of that customer's redeemed code (its reward, value and ledger entry), as many as asked.
 */
class CodePool {
  private codes: Array<{ code: string; customer: string }> = [];
  /** The next code to take: an index, not shift(), which copies the whole array when it is large (O(n) in the load generator, on the cores the server uses). */
  private next = 0;
  private issued = 0;
  constructor(private readonly url: string, private readonly shopId: string, private readonly customers: number) {}

  /** Makes sure `count` codes are left. */
  async topUp(count: number): Promise<void> {
    const missing = count - (this.codes.length - this.next);
    if (missing <= 0) return;
    const fresh = Array.from({ length: missing }, () => ({ code: `BENCH-${process.pid}-${++this.issued}`, customer: String(FIRST_CUSTOMER + Math.floor(Math.random() * this.customers)) }));
    const client = await connect(this.url);
    try {
      await client.query(
        `insert into discount_codes (id, shop_id, customer_id, reward_id, activity_id, code, type, value, currency, variant_id, points_amount)
        select i.code, d.shop_id, d.customer_id, d.reward_id, d.activity_id, i.code, d.type, d.value, d.currency, d.variant_id, d.points_amount
        from unnest($2::text[], $3::text[]) as i(code, customer)
        join customers c on c.shop_id = $1 and c.shopify_customer_id = i.customer
        cross join lateral (select * from discount_codes d where d.customer_id = c.id order by d.seq limit 1) d`,
        [this.shopId, fresh.map((f) => f.code), fresh.map((f) => f.customer)],
      );
      // As autovacuum would after so many rows, but now: on statistics from before a bulk insert the
      // orders' statement plans a code's lookup as a pass over the table (600 ms a batch at 40,000 codes).
      await client.query('analyze discount_codes');
    } finally {
      await client.end();
    }
    // Not push(...fresh): a longer run's codes (200,000 at --duration 30) are more arguments than the stack takes.
    this.codes = this.codes.slice(this.next).concat(fresh);
    this.next = 0;
  }

  /** The next unused code and its customer. */
  take(): { code: string; customer: string } {
    const next = this.codes[this.next++];
    if (!next) throw new Error('the bench ran out of codes: top the pool up more before a turn');
    return next;
  }
}

/** The same order as orderBody, as Shopify's orders/paid webhook carries it. */
function shopifyOrder(id: number, customer: string) {
  const money = (amount: string) => ({ shop_money: { amount, currency_code: 'USD' } });
  return {
    id,
    email: `o${customer}@bench.example`,
    currency: 'USD',
    financial_status: 'paid',
    processed_at: '2026-11-20T10:00:00Z',
    updated_at: '2026-11-20T10:00:00Z',
    total_price: '50.89',
    total_tax: '3.40',
    total_shipping_price_set: money('4.99'),
    customer: { id: Number(customer), email: `o${customer}@bench.example` },
    line_items: [
      { id: 1, product_id: 101, variant_id: 1011, quantity: 2, price: '15.00', discount_allocations: [] },
      { id: 2, product_id: 102, variant_id: 1021, quantity: 1, price: '12.50', discount_allocations: [] },
    ],
    refunds: [],
  };
}

/** Waits until the connector has applied every stored webhook (the server's scheduler does it). */
async function connectorDrained(url: string, shopId: string): Promise<{ applied: number; rejected: number }> {
  const client = await connect(url);
  try {
    for (;;) {
      const { rows } = await client.query<{ waiting: string; applied: string; rejected: string }>(
        `select count(*) filter (where processed_at is null) as waiting, count(*) filter (where processed_at is not null and error is null) as applied,
          count(*) filter (where error is not null and processed_at is not null) as rejected from shopify_inbox where shop_id = $1`,
        [shopId],
      );
      if (Number(rows[0]!.waiting) === 0) return { applied: Number(rows[0]!.applied), rejected: Number(rows[0]!.rejected) };
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  } finally {
    await client.end();
  }
}

/** 100,000 paid orders over the shop's customers, one NDJSON line each. */
async function importFile(customers: number): Promise<string> {
  const file = path.join(os.tmpdir(), `bench-orders-${process.pid}.ndjson`);
  const out = createWriteStream(file);
  for (let i = 0; i < IMPORT_ORDERS; i++) {
    const line = JSON.stringify({ orderId: `H-${i}`, ...orderBody(String(FIRST_CUSTOMER + (i % customers))) });
    if (!out.write(`${line}\n`)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  return file;
}

async function runImport(url: string, shopId: string, customers: number): Promise<{ seconds: number; exitCode: number | null; report: string }> {
  const file = await importFile(customers);
  try {
    const started = performance.now();
    const child = spawn('npm', ['run', '--silent', 'cli', '--', '--json', 'orders', 'import', file, '--shop', shopId], {
      cwd: REPO_ROOT,
      env: { ...process.env, DATABASE_URL: url, LOG_LEVEL: 'warn' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.resume();
    const [exitCode] = (await once(child, 'exit')) as [number | null];
    return { seconds: (performance.now() - started) / 1000, exitCode, report: stdout.trim().slice(0, 300) };
  } finally {
    await rm(file, { force: true });
  }
}

/** Balances equal their ledgers; every order earned its 42 points once; every code sent was used once, by its order. */
async function checkLedger(url: string, shopId: string, ordersOk: number, withCodeOk: number): Promise<Array<{ name: string; ok: boolean; detail: string }>> {
  const client = await connect(url);
  try {
    const one = async (text: string) => Number(Object.values((await client.query(text, [shopId])).rows[0])[0]);
    const wrong = await one(`select count(*) from customers c
      left join lateral (select new_points from activities a where a.customer_id = c.id order by seq desc limit 1) last on true
      where c.shop_id = $1 and c.points <> coalesce(last.new_points, 0)`);
    const orders = await one(`select count(*) from orders where shop_id = $1 and points_earned = 42`);
    const earns = await one(`select count(*) from activities where shop_id = $1 and type = 'earn_points' and new_points - old_points = 42`);
    const used = await one(`select count(*) from discount_codes d join orders o on o.shop_id = d.shop_id and o.order_id = d.order_id
      where d.shop_id = $1 and d.status = 'used' and not d.other_customer and o.discount_codes->0->>'code' = d.code`);
    const usedEvents = await one(`select count(*) from outbox_events where shop_id = $1 and type = 'redemptions/used'`);
    return [
      { name: 'balance = last activity newPoints', ok: wrong === 0, detail: `${wrong} customers differ` },
      { name: 'orders = 2xx PUTs + imported, each earned 42 once', ok: orders === ordersOk && earns === orders, detail: `${orders} orders, ${ordersOk} expected, ${earns} earn entries` },
      { name: 'codes used = 2xx PUTs with a code, each by its order, one event each', ok: used === withCodeOk && usedEvents === used, detail: `${used} used, ${withCodeOk} expected, ${usedEvents} events` },
    ];
  } finally {
    await client.end();
  }
}

async function run(options: BenchOptions): Promise<boolean> {
  const schema = await createIsolatedSchema(options.databaseUrl);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    const nodeArgs = options.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`] : [];
    server = await startServer({ databaseUrl: schema.url, nodeArgs });
    const { shopId, apiKey } = await seed(schema.url, options.customers);
    const customer = () => String(FIRST_CUSTOMER + Math.floor(Math.random() * options.customers));
    const headers = { 'content-type': 'application/json', authorization: `Bearer ${apiKey}` };
    const loads = {
      points: { url: `${server.url}/rest-api/v1/points/add`, connections: options.connections, headers, body: () => JSON.stringify({ customerIdentifier: customer(), amount: 1 }) },
      orders: {
        url: `${server.url}/rest-api/v1/orders/warm`,
        method: 'PUT' as const,
        connections: options.connections,
        headers,
        path: () => `/rest-api/v1/orders/${nextOrderId()}`,
        body: () => JSON.stringify(orderBody(customer())),
      },
      withCode: {
        url: `${server.url}/rest-api/v1/orders/warm`,
        method: 'PUT' as const,
        connections: options.connections,
        headers,
        path: () => `/rest-api/v1/orders/${nextOrderId()}`,
        body: () => {
          const { code, customer: owner } = codes.take();
          return JSON.stringify(orderBody(owner, [{ code, amount: '5.00' }]));
        },
      },
    };
    const roundSec = Math.max(1, Math.round(options.durationSec / ROUNDS));
    const codes = new CodePool(schema.url, shopId, options.customers);
    // Every code the warm-up and the turns take, issued before the warm-up: the analyze after an
    // insert makes every connection plan the orders' statement with codes again (7 ms each, 20
    // connections), which an insert and analyze before each turn put into that turn's measure.
    await codes.topUp(options.connections * 4 + CODES_PER_SECOND * (options.warmupSec + ROUNDS * roundSec));
    const warm = { points: await warmUp(loads.points, options.warmupSec), orders: await warmUp(loads.orders, options.warmupSec), withCode: await warmUp(loads.withCode, options.warmupSec) };
    const rates = { points: warm.points.rate, orders: warm.orders.rate, withCode: warm.withCode.rate };
    // Only on a machine faster than CODES_PER_SECOND: more codes before a turn that could run short.
    const beforeTurn = async (face: keyof typeof loads) => {
      if (face === 'withCode') await codes.topUp(2 * amountFor(loads.withCode, rates.withCode, roundSec));
    };
    const turns = await inTurns(loads, rates, { rounds: ROUNDS, roundSec, beforeTurn });
    const withCodeOk = warm.withCode.successes + turns.withCode.reduce((n, m) => n + m.ok, 0);
    let ordersOk = warm.orders.successes + turns.orders.reduce((n, m) => n + m.ok, 0) + withCodeOk;
    const points = combine(turns.points);
    const orders = combine(turns.orders);
    const withCode = combine(turns.withCode);

    // The connector: what Shopify waits for is the webhook stored; applying it follows on the server.
    const connected = await fetch(`${server.url}/graphql`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ query: `mutation { shopifySettingsUpdate(input: { shopDomain: "${SHOPIFY_DOMAIN}", webhookSecret: "${SHOPIFY_SECRET}" }) { userErrors { message } } }` }),
    });
    if (!connected.ok) throw new Error(`connecting the shop to Shopify: ${connected.status} ${await connected.text()}`);
    let shopifyOrderId = 9_000_000_000;
    const connectorLoad = {
      url: `${server.url}/integrations/shopify/webhooks`,
      connections: options.connections,
      headers: { 'content-type': 'application/json', 'x-shopify-topic': 'orders/paid', 'x-shopify-shop-domain': SHOPIFY_DOMAIN },
      body: () => JSON.stringify(shopifyOrder(++shopifyOrderId, customer())),
      signed: (body: string) => ({ 'x-shopify-hmac-sha256': createHmac('sha256', SHOPIFY_SECRET).update(body).digest('base64'), 'x-shopify-webhook-id': randomUUID() }),
    };
    const connectorWarm = await warmUp(connectorLoad, options.warmupSec);
    const connector = await runHttpLoad({ ...connectorLoad, amount: amountFor(connectorLoad, connectorWarm.rate, CONNECTOR_SECONDS) });
    const drained = await connectorDrained(schema.url, shopId);
    ordersOk += drained.applied;
    await server.stop();
    server = undefined;

    const imported = await runImport(schema.url, shopId, options.customers);
    const checks = await checkLedger(schema.url, shopId, ordersOk + IMPORT_ORDERS, withCodeOk);
    checks.push({ name: 'import exited 0', ok: imported.exitCode === 0, detail: imported.report });
    checks.push({
      name: 'every stored webhook applied, none rejected',
      ok: drained.applied === connectorWarm.successes + connector.ok && drained.rejected === 0,
      detail: `${drained.applied} applied of ${connectorWarm.successes + connector.ok} accepted, ${drained.rejected} rejected`,
    });

    return printReport({
      requests: [
        ['REST POST /points/add', fmt.rate(points.rate), fmt.ms(points.p50), fmt.ms(points.p99), points.ok, points.failed],
        ['REST PUT /orders/{id} (new paid order, 1 rule)', fmt.rate(orders.rate), fmt.ms(orders.p50), fmt.ms(orders.p99), orders.ok, orders.failed],
        ['REST PUT /orders/{id} (the same, with a used code)', fmt.rate(withCode.rate), fmt.ms(withCode.p50), fmt.ms(withCode.p99), withCode.ok, withCode.failed],
        ['POST /integrations/shopify/webhooks (stored)', fmt.rate(connector.rate), fmt.ms(connector.p50), fmt.ms(connector.p99), connector.ok, connector.failed],
      ],
      targets: [
        rateRatioRow('PUT /orders / points/add rate', turns.orders, turns.points, TARGETS.ordersVsPoints),
        rateRatioRow('PUT /orders with a code / without', turns.withCode, turns.orders, TARGETS.withCodeVsWithout),
        [`connector acceptance p99, ${options.connections} connections`, fmt.ms(connector.p99), '', `< ${TARGETS.connectorP99Ms} ms`, connector.p99 < TARGETS.connectorP99Ms ? 'met' : 'MISSED'],
        [`orders import of ${IMPORT_ORDERS} orders`, `${imported.seconds.toFixed(1)} s`, '', `< ${TARGETS.importSeconds} s`, imported.seconds < TARGETS.importSeconds ? 'met' : 'MISSED'],
      ],
      checks,
    });
  } finally {
    await server?.stop();
    await schema.drop();
  }
}

export const orders: Scenario = {
  name: 'orders',
  summary: 'PUT /orders (a paid order, one rule), without and with a used code, against POST /points/add in turns; the Shopify connector\'s acceptance; the orders import of 100,000 orders',
  run,
};

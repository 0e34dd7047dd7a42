// The LARGE and SMALL databases of `npm run bench -- scale` (issue 16): one busy shop and a few small
// ones, written with `insert … select … from generate_series(…)` rather than through the API (a
// million customers through the API would take hours). Shops, API keys and redemption options are
// made by the domain's own functions; the bulk rows by SQL that keeps the domain's invariants:
// a balance is its last ledger entry's new_points, each entry starts where the previous ended, a
// redemption entry has its discount code, ids look like src/domain/kernel/ids.ts makes them.
//
// The databases are kept between runs. A marker table records GENERATOR_VERSION: a database is
// rebuilt only when it is missing, unfinished, of another version, or when asked to be; otherwise
// pending migrations are applied (a new migration may add indexes) and it is reused.
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { loadConfig } from '../../src/config.js';
import { type DB, openDatabase } from '../../src/db/database.js';
import { compactInsights, purgeActiveMemberMarkers } from '../../src/domain/insights/insights.js';
import { purgeRelayedOutboxEvents } from '../../src/domain/kernel/events.js';
import { purgeExpiredIdempotencyKeys } from '../../src/domain/ledger/idempotency.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { READABLE_ALPHABET } from '../../src/domain/kernel/ids.js';
import { changePoints } from '../../src/domain/ledger/points.js';
import { upsertOrder } from '../../src/domain/orders/index.js';
import { createEarningRule } from '../../src/domain/program/earning-rules.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createTier } from '../../src/domain/program/tiers.js';
import { createPointsRedemption } from '../../src/domain/rewards/redemptions.js';
import { updateShopSettings } from '../../src/domain/settings/shop-settings.js';
import { createShop } from '../../src/domain/shops/shops.js';

/** Bump whenever the rows generated change: databases of another version are rebuilt. */
export const GENERATOR_VERSION = 3;

const DAY_MS = 24 * 60 * 60 * 1000;

/** How much of everything one shop has. The shapes are the same at every size. */
export type ShopShape = {
  customers: number;
  /**
   * Ledger entries; a tenth belong to customer 0 (the heavy one), every fifth of the older half (a
   * customer busy months ago and quiet since: the newest half holds none of theirs); the rest go
   * round the others.
   */
  activities: number;
  /** Customers referred by customer 2. */
  referees: number;
  /** Webhook deliveries over the last 25 days (inside the default 30-day retention). */
  deliveries: number;
  /** Idempotency keys; 80 % older than the 24-hour TTL. */
  idempotencyKeys: number;
  /** Orders recorded before the program earned on orders (no points), round customers 1..C-1. */
  orders: number;
};

export type ScaleSize = 'large' | 'small';

/** The measured shop, and the few small shops beside it (so every shop_id filter has something to skip). */
export const SHAPES: Record<ScaleSize, { main: ShopShape; others: ShopShape; otherShops: number }> = {
  large: {
    main: { customers: 1_000_000, activities: 5_000_000, referees: 100_000, deliveries: 500_000, idempotencyKeys: 1_000_000, orders: 1_000_000 },
    others: { customers: 10_000, activities: 50_000, referees: 1_000, deliveries: 5_000, idempotencyKeys: 10_000, orders: 10_000 },
    otherShops: 3,
  },
  small: {
    // 300 referees and 500 deliveries, not a thousandth of LARGE's: a full page of 250 must exist.
    main: { customers: 1_000, activities: 10_000, referees: 300, deliveries: 500, idempotencyKeys: 1_000, orders: 1_000 },
    others: { customers: 100, activities: 1_000, referees: 30, deliveries: 50, idempotencyKeys: 100, orders: 100 },
    otherShops: 3,
  },
};

/** Customer indexes with a role (customer i has shopifyCustomerId FIRST_SHOPIFY_ID + i). */
export const ROLES = {
  /** A tenth of all ledger entries, half of them redemptions: the one customer with many discount codes too. */
  heavy: 0,
  referrer: 2,
  /** An ordinary customer: a few entries, a referral code. */
  ordinary: 7,
} as const;
export const FIRST_SHOPIFY_ID = 7_000_000_000;

/**
 * The measured shop's program (issue 38): orders earn a point a dollar, credits expire per earn
 * after a year, two tiers count points earned. Set by the domain after the bulk rows, as a shop
 * turning them on would (the tiers count the ledger's history; every positive balance becomes a lot).
 */
export const PROGRAM = {
  rule: { type: 'place_order', name: '1 point per $1', earnPoint: 1, spent: '1.00' },
  tiers: [{ name: 'Silver', threshold: '500', multiplier: '1.25' }, { name: 'Gold', threshold: '5000', multiplier: '1.5' }],
  expiry: { mode: 'per_earn', days: 365 },
} as const;

/**
 * The history customer: at LARGE a long life (5,000 orders of $2,000, each followed by three
 * credits: 20,000 ledger entries, as many lots), at SMALL a short one (100 orders: 400 entries),
 * written through the domain.
 * Refunds of the bench take $2 at a time from its oldest orders.
 */
export const HISTORY = { customer: 'history-customer', orderTotal: '2000.00', large: { orders: 5_000 }, small: { orders: 100 }, creditsPerOrder: 3 } as const;
export const historyOrder = (refunded: string) => ({
  customerIdentifier: HISTORY.customer, currency: 'USD', subtotal: HISTORY.orderTotal, total: HISTORY.orderTotal, refunded,
  status: refunded === '0.00' ? 'paid' : 'partially_refunded', lineItems: [{ productId: 'gift-box', quantity: 1, price: HISTORY.orderTotal }],
});

/** What the bench needs to find its way in a built database. */
export type ScaleFacts = {
  size: ScaleSize;
  shopId: string;
  apiKey: string;
  otherShopIds: string[];
  /** Live subscriptions ('customers/*', 'redemptions/created'); the 'points/*' one was deleted, its deliveries kept. */
  subscriptions: { customers: string; redemptions: string; deletedPoints: string };
  shape: ShopShape;
};

export type ScaleDatabase = { url: string; facts: ScaleFacts; built: boolean; buildSeconds: number };

/** `base` (any database on the server) with another database name. */
export function databaseUrl(base: string, name: string): string {
  const url = new URL(base);
  url.pathname = `/${name}`;
  return url.toString();
}

export function scaleDatabaseName(size: ScaleSize): string {
  return `bench_scale_${size}`;
}

export async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

type Marker<F> = { version: number; facts: F; build_seconds: string };

async function readMarker<F>(url: string): Promise<Marker<F> | undefined> {
  try {
    return await withClient(url, async (client) => {
      const { rows } = await client.query<Marker<F>>('select version, facts, build_seconds from bench_scale_marker limit 1');
      return rows[0];
    });
  } catch {
    // No such database, or no marker: an unfinished build.
    return undefined;
  }
}

export async function dropDatabase(base: string, name: string): Promise<void> {
  await withClient(databaseUrl(base, 'postgres'), (admin) => admin.query(`drop database if exists ${name} with (force)`));
}

export async function recreateDatabase(base: string, name: string): Promise<string> {
  await withClient(databaseUrl(base, 'postgres'), async (admin) => {
    await admin.query(`drop database if exists ${name} with (force)`);
    await admin.query(`create database ${name}`);
  });
  return databaseUrl(base, name);
}

/**
 * The database of this size, built if it is missing, unfinished, of another generator version or
 * `rebuild` is set; migrated to the latest schema either way.
 */
export async function ensureScaleDatabase(
  base: string,
  size: ScaleSize,
  options: { rebuild?: boolean; log?: (line: string) => void } = {},
): Promise<ScaleDatabase> {
  return ensureBuiltDatabase(base, scaleDatabaseName(size), GENERATOR_VERSION, (url, log) => build(url, size, log), options);
}

/**
 * A generated database kept between runs (the scale's, the console's): `build` fills it when it is
 * missing, unfinished (no marker), of another `version`, or `rebuild` is set; otherwise pending
 * migrations are applied and it is reused with the facts its build recorded.
 */
export async function ensureBuiltDatabase<F>(
  base: string,
  name: string,
  version: number,
  build: (url: string, log: (line: string) => void) => Promise<F>,
  options: { rebuild?: boolean; log?: (line: string) => void } = {},
): Promise<{ url: string; facts: F; built: boolean; buildSeconds: number }> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const url = databaseUrl(base, name);
  const marker = options.rebuild ? undefined : await readMarker<F>(url);
  if (marker && marker.version === version) {
    const applied = await migrate(url);
    log(`  ${name}: reused (generator version ${marker.version}, built in ${Number(marker.build_seconds).toFixed(0)} s)` +
      (applied.length ? `; applied ${applied.join(', ')}` : ''));
    return { url, facts: marker.facts, built: false, buildSeconds: Number(marker.build_seconds) };
  }
  const why = options.rebuild ? 'rebuild asked for' : marker ? `generator version ${marker.version}, now ${version}` : 'missing or unfinished';
  log(`  ${name}: building (${why})`);
  const started = performance.now();
  await recreateDatabase(base, name);
  const facts = await build(url, log);
  const buildSeconds = (performance.now() - started) / 1000;
  // The marker comes last: an interrupted build has none, so the next run starts it again.
  await withClient(url, async (client) => {
    await client.query('create table bench_scale_marker (version integer not null, facts jsonb not null, build_seconds numeric not null, built_at timestamptz not null default now())');
    await client.query('insert into bench_scale_marker (version, facts, build_seconds) values ($1, $2, $3)', [version, JSON.stringify(facts), buildSeconds]);
  });
  log(`  ${name}: built in ${buildSeconds.toFixed(0)} s`);
  return { url, facts, built: true, buildSeconds };
}

async function migrate(url: string): Promise<string[]> {
  const { db, close } = await openDatabase({ url, poolSize: 1 });
  try {
    return await migrateToLatest(db);
  } finally {
    await close();
  }
}

async function build(url: string, size: ScaleSize, log: (line: string) => void): Promise<ScaleFacts> {
  const shapes = SHAPES[size];
  // Schema by our migrator; shops, keys and redemption options by the domain.
  const { db, close } = await openDatabase({ url, poolSize: 2 });
  let main: { shopId: string; apiKey: string };
  const others: string[] = [];
  try {
    await migrateToLatest(db);
    const made = await createShop(db, `Scale ${size.toUpperCase()}`);
    main = { shopId: made.shop.id, apiKey: made.apiKey };
    for (let i = 0; i < shapes.otherShops; i++) others.push((await createShop(db, `Scale ${size} neighbour ${i + 1}`)).shop.id);
    for (const shopId of [main.shopId, ...others]) {
      for (const [name, rewardValue, discountValue] of [['5 off', 5, 5], ['10 off', 100, 10], ['25 off', 250, 25], ['50 off', 500, 50], ['100 off', 1000, 100]] as const) {
        await createPointsRedemption(db, shopId, { name, type: 'amount', discountPrefix: 'SAVE', rewardValue, discountValue });
      }
    }
  } finally {
    await close();
  }

  const facts = await bulkInsert(url, log, async (step, client) => {
    const subscriptions = await generateShop(step, client, main.shopId, shapes.main, 'main shop');
    for (const [i, shopId] of others.entries()) await generateShop(step, client, shopId, shapes.others, `neighbour ${i + 1}`);
    return { size, shopId: main.shopId, apiKey: main.apiKey, otherShopIds: others, subscriptions, shape: shapes.main };
  });
  await programAndHistory(url, main.shopId, HISTORY[size].orders, log);
  return facts;
}

/**
 * What a server's first retention pass does at start (src/app.ts), done at full speed: relayed
 * events and expired keys deleted, the rollups' stripes folded, past days' active-member markers
 * deleted (millions at LARGE; at a third of the time, as the server runs it, that took hours).
 */
export async function firstRetentionPass(db: DB, log: (line: string) => void): Promise<void> {
  const fast = { batchSize: 50_000, pauseMs: 0 };
  const hour = 60 * 60 * 1000;
  const events = await purgeRelayedOutboxEvents(db, new Date(Date.now() - loadConfig({}).outboxRetentionHours * hour), fast);
  const keys = await purgeExpiredIdempotencyKeys(db, fast);
  const folded = await compactInsights(db, new Date(Date.now() - hour), fast);
  const markers = await purgeActiveMemberMarkers(db, new Date(Date.now() - 3 * 24 * hour), fast);
  log(`    first retention pass: ${events} relayed events, ${keys} expired idempotency keys, ${folded} rollup stripes folded, ${markers} past active-member markers`);
}

/** The measured shop's program turned on, then the history customer's life, through the domain. */
async function programAndHistory(url: string, shopId: string, orders: number, log: (line: string) => void): Promise<void> {
  const { db, close } = await openDatabase({ url, poolSize: 2 });
  try {
    let t = performance.now();
    const took = () => {
      const seconds = (performance.now() - t) / 1000;
      t = performance.now();
      return `${seconds.toFixed(1)} s`;
    };
    await createEarningRule(db, shopId, PROGRAM.rule);
    for (const tier of PROGRAM.tiers) await createTier(db, shopId, tier);
    await updateShopSettings(db, shopId, { expiry: PROGRAM.expiry });
    log(`    main shop: earning rule, tiers (the history counted) and per-earn expiry (a lot per balance) in ${took()}`);
    await upsertCustomer(db, shopId, { shopifyCustomerId: HISTORY.customer, email: 'history@scale.example' });
    for (let i = 1; i <= orders; i++) {
      await upsertOrder(db, shopId, `H-${i}`, historyOrder('0.00'));
      for (let k = 0; k < HISTORY.creditsPerOrder; k++) await changePoints(db, shopId, 'add', { customerIdentifier: HISTORY.customer, amount: 10 });
    }
    log(`    main shop: the history customer's ${orders} orders and ${orders * HISTORY.creditsPerOrder} credits in ${took()}`);
    // What a server's first retention pass deletes (it runs at start): done here, so the first run
    // after a build measures what later runs do, not that pass (millions of relayed events at LARGE).
    await firstRetentionPass(db, log);
    log(`    the first retention pass in ${took()}`);
    await sql`vacuum analyze`.execute(db);
  } finally {
    await close();
  }
}

/**
 * Bulk statements on one connection set for them (no waiting on each commit's flush, memory for
 * index builds), each timed and logged by `step`; then `vacuum analyze`, as autovacuum would
 * have done by the time a shop had grown so: statistics, and the visibility map index-only scans need.
 */
export function bulkInsert<T>(url: string, log: (line: string) => void, fill: (step: Step, client: pg.Client) => Promise<T>): Promise<T> {
  return withClient(url, async (client) => {
    await client.query("set synchronous_commit = off; set maintenance_work_mem = '512MB'; set work_mem = '128MB'");
    const step = async (what: string, text: string, values: unknown[]) => {
      const t = performance.now();
      const { rowCount } = await client.query(text, values);
      log(`    ${what}: ${rowCount ?? 0} rows in ${((performance.now() - t) / 1000).toFixed(1)} s`);
    };
    const result = await fill(step, client);
    const t = performance.now();
    await client.query('vacuum analyze');
    log(`    vacuum analyze: ${((performance.now() - t) / 1000).toFixed(1)} s`);
    return result;
  });
}

// --- SQL expressions ---------------------------------------------------------------------------

/** A src/domain/kernel/ids.ts-shaped id: 12 hex of the row's milliseconds, 12 hex derived from `salt` (stable, so rows can refer to each other). */
export const idSql = (msExpr: string, salt: string) => `lpad(to_hex((${msExpr})::bigint), 12, '0') || substr(md5(${salt}), 1, 12)`;
export const tsSql = (msExpr: string) => `to_timestamp((${msExpr})::double precision / 1000)`;

/**
 * `length` characters of READABLE_ALPHABET spelling the number `expr` scrambled (times a prime
 * coprime with the alphabet's size, modulo its size to the `length`): distinct numbers, distinct codes.
 */
export function readableCodeSql(expr: string, length: number): string {
  const n = READABLE_ALPHABET.length;
  const scrambled = `(((${expr})::bigint * 2654435761 + 7919) % ${n ** length}::bigint)`;
  const digits = Array.from({ length }, (_, k) => `substr('${READABLE_ALPHABET}', (${scrambled} / ${n ** (length - 1 - k)}::bigint % ${n})::int + 1, 1)`);
  return digits.join(' || ');
}

// Forty first names, two of them with an m: an e-mail prefix "m" matches a twentieth of customers.
export const FIRST_NAMES = [
  'adam', 'alice', 'ben', 'chloe', 'daniel', 'emma', 'felix', 'grace', 'hugo', 'isabel', 'jack', 'julia', 'kevin', 'laura',
  'liam', 'maria', 'michael', 'nina', 'oliver', 'olivia', 'paul', 'quinn', 'rachel', 'sam', 'sophie', 'thomas', 'uma',
  'victor', 'wendy', 'xavier', 'yara', 'zoe', 'noah', 'hannah', 'ethan', 'lucas', 'ivy', 'omar', 'bella', 'carlos',
];
export const LAST_NAMES = ['smith', 'garcia', 'mueller', 'rossi', 'dubois', 'kowalski', 'nguyen', 'kim', 'silva', 'jensen', 'novak', 'tanaka', 'olsen', 'brown', 'lopez', 'martin', 'wilson', 'fischer', 'costa', 'patel'];
export const DOMAINS = ['gmail.com', 'outlook.com', 'yahoo.fr', 'web.de', 'proton.me'];
export const textArray = (items: readonly string[]) => `array[${items.map((s) => `'${s}'`).join(',')}]`;

export type Step = (what: string, text: string, values: unknown[]) => Promise<void>;

/**
 * One shop's rows. Customers are created over the first 30 days of a year, their ledger over the
 * rest; deliveries over the last 25 days; idempotency keys over 25 days, 80 % older than 24 hours.
 * Customer i's id is a function of (shop, i), so later statements refer to it without a join.
 */
async function generateShop(step: Step, client: pg.Client, shopId: string, shape: ShopShape, label: string): Promise<ScaleFacts['subscriptions']> {
  const now = Date.now();
  const t0 = now - 365 * DAY_MS;
  const customerStepMs = Math.floor((30 * DAY_MS) / shape.customers);
  const ledgerStart = t0 + 30 * DAY_MS;
  const ledgerStepMs = Math.max(1, Math.floor((330 * DAY_MS) / shape.activities));
  const customerMs = (i: string) => `${t0} + (${i}) * ${customerStepMs}::bigint`;
  const customerId = (i: string) => idSql(customerMs(i), `$1 || ':c' || (${i})`);
  const C = shape.customers;
  const N = shape.activities;
  // Entries 0, 5, 10, … of the older half are the heavy customer's; the others go round customers 1..C-1.
  const half = Math.floor(N / 2);
  const heavyEntries = Math.ceil(half / 5);
  const others = N - heavyEntries;
  // Customers 0 and those ending in 5 redeem on every second entry (-5, a discount code); the rest only add 10.
  const redeems = (i: string) => `((${i}) = 0 or (${i}) % 10 = 5)`;
  const balanceAfter = (i: string, j: string) => `case when ${redeems(i)} then 5 * ((${j}) / 2) + 10 * ((${j}) % 2) else 10 * (${j}) end`;
  const entriesOf = (i: string) =>
    `case when (${i}) = 0 then ${heavyEntries} when (${i}) - 1 < ${others} then (${others} - (${i})) / ${C - 1} + 1 else 0 end`;

  await step(`${label}: customers`, `
    insert into customers (id, shop_id, shopify_customer_id, email, birthday, points, created_at, updated_at)
    select ${customerId('i')}, $1, (${FIRST_SHOPIFY_ID} + i)::text,
      (case when i % 7 = 0 then initcap(f) else f end) || '.' || l || i || '@' || d,
      case when i % 3 = 0 then (1960 + i % 45)::text || '-' || lpad((1 + i % 12)::text, 2, '0') || '-' || lpad((1 + i % 28)::text, 2, '0') end,
      ${balanceAfter('i', entriesOf('i'))},
      ${tsSql(customerMs('i'))}, ${tsSql(customerMs('i'))}
    from generate_series(0, ${C - 1}) i,
      lateral (select (${textArray(FIRST_NAMES)})[1 + i % ${FIRST_NAMES.length}] as f,
        (${textArray(LAST_NAMES)})[1 + (i / ${FIRST_NAMES.length}) % ${LAST_NAMES.length}] as l,
        (${textArray(DOMAINS)})[1 + i % ${DOMAINS.length}] as d) names`, [shopId]);

  // Entry g belongs to customer ci as its j-th (from 1), in time order: seq order is time order.
  const entryMs = `${ledgerStart} + g * ${ledgerStepMs}::bigint`;
  await step(`${label}: activities`, `
    insert into activities (id, shop_id, customer_id, type, setting_type, description, note, old_points, new_points, created_at, updated_at)
    select ${idSql(entryMs, "$1 || ':a' || g")}, $1, ${customerId('ci')},
      case when redemption then 'redeem_points' else 'add_points' end,
      case when redemption then 'redemption' else 'api' end,
      case when redemption then '5 off' else 'order #' || (100000 + g) end, null,
      ${balanceAfter('ci', 'j - 1')}, ${balanceAfter('ci', 'j')},
      ${tsSql(entryMs)}, ${tsSql(entryMs)}
    from (
      select g, ci, j, ${redeems('ci')} and j % 2 = 0 as redemption
      from generate_series(0, ${N - 1}) g,
        lateral (select g < ${half} and g % 5 = 0 as heavy,
          case when g < ${half} then g - g / 5 - 1 else g - ${heavyEntries} end as h) kind,
        lateral (select case when heavy then 0 else 1 + h % ${C - 1} end as ci,
          case when heavy then g / 5 + 1 else h / ${C - 1} + 1 end as j) place
    ) entries
    order by g`, [shopId]);

  // Every ledger entry's event, relayed long ago (as the relay leaves them).
  await step(`${label}: outbox events`, `
    insert into outbox_events (id, shop_id, type, data, created_at, relayed_at)
    select 'evt_' || substr(md5(a.id), 1, 24), a.shop_id,
      case when a.type = 'redeem_points' then 'redemptions/created' else 'points/added' end,
      jsonb_build_object('_id', a.id, 'type', a.type, 'settingType', a.setting_type, 'description', a.description, 'note', a.note,
        'oldPoints', a.old_points, 'newPoints', a.new_points, 'customer', a.customer_id, 'shop', a.shop_id,
        'createdAt', a.created_at, 'updatedAt', a.updated_at),
      a.created_at, a.created_at + interval '40 milliseconds'
    from activities a where a.shop_id = $1 order by a.seq`, [shopId]);

  const reward = await client.query<{ id: string }>("select id from points_redemptions where shop_id = $1 and reward_value = 5", [shopId]);
  await step(`${label}: discount codes`, `
    insert into discount_codes (id, shop_id, customer_id, reward_id, activity_id, code, type, value, currency, variant_id, points_amount, expires_at, created_at)
    select ${idSql('extract(epoch from a.created_at) * 1000', "a.id || ':d'")}, a.shop_id, a.customer_id, $2, a.id,
      'SAVE' || ${readableCodeSql('a.seq', 10)}, 'amount', 5, null, null, 5, null, a.created_at
    from activities a where a.shop_id = $1 and a.type = 'redeem_points' order by a.seq`, [shopId, reward.rows[0]!.id]);

  // Referral codes: the referrer's, and one customer in 25 (the ordinary customer among them).
  await step(`${label}: referral codes`, `
    insert into referral_codes (customer_id, shop_id, code, created_at)
    select ${customerId('i')}, $1, ${readableCodeSql('i', 8)}, ${tsSql(`${customerMs('i')} + 1000`)}
    from generate_series(0, ${C - 1}) i where i = ${ROLES.referrer} or i % 25 = ${ROLES.ordinary}`, [shopId]);

  const refereeStep = Math.floor((C - 3) / shape.referees);
  await step(`${label}: referrals`, `
    insert into referrals (id, shop_id, referee_id, referrer_id, referral_code, status, created_at, updated_at)
    select ${idSql(`${customerMs('r')} + 500`, "$1 || ':r' || r")}, $1, ${customerId('r')}, ${customerId(String(ROLES.referrer))},
      ${readableCodeSql(String(ROLES.referrer), 8)}, true, ${tsSql(`${customerMs('r')} + 500`)}, ${tsSql(`${customerMs('r')} + 500`)}
    from generate_series(0, ${shape.referees - 1}) k, lateral (select 3 + k * ${refereeStep} as r) referee
    order by k`, [shopId]);

  // Orders of the time before the program earned on them: paid, no points; customer 1 + k % (C - 1).
  const orderMs = `${ledgerStart} + k * ${Math.max(1, Math.floor((330 * DAY_MS) / Math.max(1, shape.orders)))}::bigint`;
  await step(`${label}: orders`, `
    insert into orders (id, shop_id, customer_id, order_id, currency, subtotal_minor, shipping_minor, tax_minor, total_minor, refunded_minor,
      status, line_items, processed_at, state_hash, created_at, updated_at)
    select ${idSql(orderMs, "$1 || ':o' || k")}, $1, ${customerId(`1 + k % ${C - 1}`)}, 'bulk-' || k, 'USD', 4250, 499, 340, 5089, 0,
      'paid', '[{"productId":"tee","variantId":null,"collectionIds":[],"quantity":2,"price":"15.00","discount":"0.00","refundedQuantity":0,"giftCard":false},{"productId":"mug","variantId":null,"collectionIds":[],"quantity":1,"price":"12.50","discount":"0.00","refundedQuantity":0,"giftCard":false}]'::jsonb,
      ${tsSql(orderMs)}, md5('o' || k), ${tsSql(orderMs)}, ${tsSql(orderMs)}
    from generate_series(0, ${shape.orders - 1}) k
    order by k`, [shopId]);

  // Subscriptions by SQL: their secrets are sealed with the server's SECRETS_KEY, which each bench
  // server draws afresh, and no bench request makes an event they would deliver.
  const subscriptions = { customers: newBenchId(), redemptions: newBenchId(), deletedPoints: newBenchId() };
  await client.query(
    `insert into webhook_subscriptions (id, shop_id, topic, callback_url) values
      ($2, $1, 'customers/*', 'https://hooks.shop.example/loyalty/customers'),
      ($3, $1, 'redemptions/created', 'https://hooks.shop.example/loyalty/redemptions')`,
    [shopId, subscriptions.customers, subscriptions.redemptions],
  );
  await client.query(
    `insert into webhook_secrets (id, subscription_id, sealed_secret)
     select substr(md5(id || ':secret'), 1, 24), id, 'unsealable: written by bench/lib/scale-data.ts' from webhook_subscriptions where shop_id = $1`,
    [shopId],
  );
  const D = shape.deliveries;
  await insertDeliveries(step, label, shopId, subscriptions, { count: D, newestAgoMs: 0, spanMs: 25 * DAY_MS, salt: 'd', now });
  await insertIdempotencyKeys(step, label, shopId, { count: shape.idempotencyKeys, expiredShare: 0.8, salt: 'k', now });
  return subscriptions;
}

function newBenchId(): string {
  return Date.now().toString(16).padStart(12, '0').slice(-12) + randomBytes(6).toString('hex');
}

/**
 * `count` finished deliveries (95 % succeeded with one attempt, 4 % failed after three, 1 %
 * cancelled), newest `newestAgoMs` ago, spread over `spanMs` before that: 60 % to the deleted
 * 'points/*' subscription, 30 % 'customers/*', 10 % 'redemptions/created'. Nothing is due.
 */
export async function insertDeliveries(
  step: Step,
  label: string,
  shopId: string,
  subscriptions: ScaleFacts['subscriptions'],
  o: { count: number; newestAgoMs: number; spanMs: number; salt: string; now: number },
): Promise<void> {
  const oldest = o.now - o.newestAgoMs - o.spanMs;
  const ms = `${oldest} + k * ${Math.max(1, Math.floor(o.spanMs / o.count))}::bigint`;
  await step(`${label}: webhook deliveries`, `
    insert into webhook_deliveries (id, shop_id, subscription_id, event_id, topic, status, created_at, updated_at, payload,
      due_at, next_attempt_at, attempt_count, scheduled_attempts, last_attempt_at, last_response_status, last_error)
    select id, $1, sub, event_id, topic, status, at, at + interval '2 seconds',
      json_build_object('id', event_id, 'type', topic, 'timestamp', at, 'shopId', $1::text,
        'data', json_build_object('_id', substr(md5(id), 1, 24), 'customer', substr(md5(id), 9, 24), 'points', k % 5000))::text,
      null, null, attempts, attempts, case when attempts > 0 then at + interval '1 second' end,
      case status when 'succeeded' then 200 when 'failed' then 503 end,
      case when status = 'failed' then 'HTTP 503' end
    from (
      select k, ${idSql(ms, `$1 || ':${o.salt}' || k`)} as id, ${tsSql(ms)} as at,
        'evt_' || substr(md5($1 || ':${o.salt}e' || k), 1, 24) as event_id,
        case when k % 10 < 6 then $4 when k % 10 < 9 then $2 else $3 end as sub,
        case when k % 10 < 6 then 'points/added' when k % 10 < 9 then (case when k % 3 = 0 then 'customers/updated' else 'customers/created' end)
          else 'redemptions/created' end as topic,
        case when k % 100 < 95 then 'succeeded' when k % 100 < 99 then 'failed' else 'cancelled' end as status,
        case when k % 100 < 95 then 1 when k % 100 < 99 then 3 else 0 end as attempts
      from generate_series(0, ${o.count - 1}) k
    ) d
    order by k`, [shopId, subscriptions.customers, subscriptions.redemptions, subscriptions.deletedPoints]);
  await step(`${label}: delivery attempts`, `
    insert into webhook_delivery_attempts (id, delivery_id, attempted_at, trigger, url, response_status, duration_ms, error, response_body)
    select ${idSql("extract(epoch from d.created_at) * 1000 + n * 60000", "d.id || ':' || n")}, d.id, d.created_at + n * interval '1 minute', 'scheduled',
      'https://hooks.shop.example/loyalty', case when d.status = 'succeeded' then 200 else 503 end, 40 + n,
      case when d.status = 'failed' then 'HTTP 503' end, case when d.status = 'succeeded' then 'ok' else 'unavailable' end
    from webhook_deliveries d, generate_series(1, d.attempt_count) n
    where d.shop_id = $1 and d.created_at between ${tsSql(String(oldest))} and ${tsSql(String(o.now - o.newestAgoMs))}`, [shopId]);
}

/** `count` completed idempotency keys over the last 25 days, `expiredShare` of them older than 24 hours. */
export async function insertIdempotencyKeys(
  step: Step,
  label: string,
  shopId: string,
  o: { count: number; expiredShare: number; salt: string; now: number },
): Promise<void> {
  const expired = Math.round(o.count * o.expiredShare);
  const fresh = o.count - expired;
  // Expired: 2 to 25 days old; fresh: the last 20 hours.
  const ms = `case when k < ${expired} then ${o.now - 2 * DAY_MS} - k * ${Math.floor((23 * DAY_MS) / Math.max(1, expired))}::bigint
    else ${o.now} - (k - ${expired}) * ${Math.floor((20 * 60 * 60 * 1000) / Math.max(1, fresh))}::bigint end`;
  await step(`${label}: idempotency keys`, `
    insert into idempotency_keys (shop_id, key, request_hash, response_status, response_body, created_at, completed_at)
    select $1, 'order-' || md5($1 || ':${o.salt}' || k), md5('h' || k) || md5('H' || k), 200,
      '{"success":true,"message":"Points added"}', ${tsSql(ms)}, ${tsSql(ms)}
    from generate_series(0, ${o.count - 1}) k`, [shopId]);
}

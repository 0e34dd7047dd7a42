// Scale (issue 16): does a request cost the same in a shop of a million customers as in a shop of a
// thousand? Every list and lookup of REST and GraphQL, at LARGE and SMALL in turns, for equal result
// sizes (same page width, a page that is full in both, deep pages and cursors in LARGE); then the
// purges' effect on concurrent writes and an empty purge's duration, at LARGE; then the customers
// import of a 1,000,000-line file: its rate over the file and the CLI's peak memory.
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createWriteStream, existsSync } from 'node:fs';
import { rename } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { Pool } from 'undici';
import { loadConfig } from '../../src/config.js';
import { type DB, openDatabase } from '../../src/db/database.js';
import { createCustomerAccessToken } from '../../src/domain/customers/customer-access-tokens.js';
import { changePoints } from '../../src/domain/ledger/points.js';
import { purgeRelayedOutboxEvents } from '../../src/domain/kernel/events.js';
import { encodeCursor, encodeTimeCursor } from '../../src/domain/kernel/pagination.js';
import { purgeExpiredIdempotencyKeys } from '../../src/domain/ledger/idempotency.js';
import { purgeDeliveries } from '../../src/webhooks/delivery-queue.js';
import { combine, type HttpLoad, inTurns, percentile, summarize, warmUp } from '../lib/load.js';
import { connect } from '../lib/postgres.js';
import { ensureScaleDatabase, FIRST_SHOPIFY_ID, HISTORY, historyOrder, insertDeliveries, insertIdempotencyKeys, ROLES, type ScaleDatabase, type ScaleSize } from '../lib/scale-data.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';
import { type ServerProcess, startServer } from '../lib/server.js';
import { timeCliImport } from '../lib/cli-import.js';
import { fmt, formatTable } from '../lib/table.js';
import { insightsQuery } from './insights.js';
import { STOREFRONT_QUERY } from './storefront.js';

const TARGETS = { ratio: 2, purgeWriteRatio: 0.8, emptyPurgeMs: 20, importSeconds: 120, importRssMiB: 200, writeRatio: 1.5, refundP99Ms: 50, insightsP99Ms: 100, lookupMultiple: 2 };
/** What one request may spend on its samples at one size: a request taking seconds gets fewer than `samples`. */
const TIME_BUDGET_MS = 8_000;
const MIN_SAMPLES = 5;
const ROUNDS = 5;
const DAY_MS = 24 * 60 * 60 * 1000;

// --- the requests --------------------------------------------------------------------------------

/** Where a request goes in one database: identifiers, deep cursors and page numbers differ by size. */
type Targets = {
  size: ScaleSize;
  heavy: string;
  referrer: string;
  ordinary: string;
  ordinaryEmail: string;
  /** A failed delivery (three attempts), the oldest. */
  deliveryId: string;
  subscriptionId: string;
  /** The 5-point reward (redemptions of it). */
  rewardId: string;
  cursors: { activities: string; discountCodes: string; referees: string; customers: string; customersM: string; deliveries: string };
};

type Call = { method: 'GET' | 'POST'; path: string; body?: unknown; headers?: Record<string, string> };
/**
 * The servers run with the contract's fixed per-shop limits (the webhook endpoints': 30 and 60 a
 * minute) raised, so those requests get as many samples as the others: at one a second, a p99
 * would be the slowest of ten.
 */
const FIXED_LIMIT_MULTIPLIER = '1000';
/** The writes part's 8 connections on one shop, and its storefront tokens, are never refused either. */
const SERVER_ENV = {
  RATE_LIMIT_FIXED_MULTIPLIER: FIXED_LIMIT_MULTIPLIER,
  RATE_LIMIT_PER_MINUTE: '100000000',
  STOREFRONT_RATE_PER_CUSTOMER: '1000000000',
  STOREFRONT_RATE_PER_IP: '1000000000',
};

type Probe = {
  name: string;
  /** The request at each size. */
  call: (t: Targets) => Call;
  /** Rows in the answer (edges at every depth for GraphQL). */
  rows: (body: any) => number;
};

const LARGE_AND_SMALL = <T,>(large: T, small: T) => (t: Targets) => (t.size === 'large' ? large : small);

const query = (params: Record<string, string | number>) => `?${new URLSearchParams(Object.entries(params).map(([k, v]) => [k, String(v)]))}`;
const rest = (path: string, params: Record<string, string | number> = {}): Call => ({ method: 'GET', path: `/rest-api/v1${path}${Object.keys(params).length ? query(params) : ''}` });
const gql = (text: string, variables: Record<string, unknown> = {}): Call => ({ method: 'POST', path: '/graphql', body: { query: text, variables } });

/** Every edge in a GraphQL answer, at any depth (a nested page's edges count too). */
function countEdges(value: unknown): number {
  if (Array.isArray(value)) return value.reduce((n: number, v) => n + countEdges(v), 0);
  if (!value || typeof value !== 'object') return 0;
  let n = 0;
  for (const [key, v] of Object.entries(value)) {
    if (key === 'edges' && Array.isArray(v)) n += v.length;
    if (key === 'attempts' && Array.isArray(v)) n += v.length;
    n += countEdges(v);
  }
  return n;
}
const edges = (body: any) => countEdges(body.data);
const one = (body: any) => (Object.values(body.data ?? {})[0] ? 1 : 0);

const ACTIVITY = '_id type settingType description oldPoints newPoints createdAt';
const CUSTOMER = '_id shopifyCustomerId email birthday points createdAt updatedAt';
const REFEREE = 'id status referralCode email points shopifyCustomerId latestActivity createdAt';
const DELIVERY = 'id eventId subscriptionId topic status attemptCount lastAttemptAt lastResponseStatus createdAt';
const PAGE_INFO = 'pageInfo { hasNextPage endCursor }';

const CUSTOMER_PAGE = (field: string, fields: string) => `query($id: String!, $first: Int, $after: String) {
  customer(identifier: $id) { _id ${field}(first: $first, after: $after) { edges { cursor node { ${fields} } } ${PAGE_INFO} } } }`;
const CUSTOMERS = `query($first: Int, $after: String, $prefix: String) {
  customers(first: $first, after: $after, emailPrefix: $prefix) { edges { cursor node { ${CUSTOMER} } } ${PAGE_INFO} } }`;
// Page widths written out: the cost limit counts a variable's as 250.
const CUSTOMERS_NESTED = `{ customers(first: 20) { edges { node { _id email
  activities(first: 5) { edges { node { _id newPoints } } }
  discountCodes(first: 5) { edges { node { _id code } } }
  referees(first: 5) { edges { node { id email } } } } } } }`;
const DELIVERIES = `query($first: Int, $after: String, $status: WebhookDeliveryStatus, $subscriptionId: ID, $topic: String) {
  webhookDeliveries(first: $first, after: $after, status: $status, subscriptionId: $subscriptionId, topic: $topic) {
    edges { cursor node { ${DELIVERY} } } ${PAGE_INFO} } }`;
const DELIVERIES_ATTEMPTS = `query($first: Int) { webhookDeliveries(first: $first) { edges { node { id status
  attempts { id attemptedAt responseStatus durationMs } } } } }`;

/**
 * Each request at both sizes with the same page width, on a page that is full at both: the deep
 * page or cursor is LARGE's (page 400 of a referrer's 100,000 referees, say), against a page of the
 * same width at SMALL; a filter that matches nothing matches nothing at both.
 */
const PROBES: Probe[] = [
  // REST: lookups
  { name: 'REST GET /referral (by e-mail)', call: (t) => rest('/referral', { customerIdentifier: t.ordinaryEmail }), rows: (b) => (b.data?.referralCode ? 1 : 0) },
  { name: 'REST GET /referral (by shop id)', call: (t) => rest('/referral', { customerIdentifier: t.ordinary }), rows: (b) => (b.data?.referralCode ? 1 : 0) },
  { name: 'REST GET /pointsRedemptions', call: (t) => rest('/pointsRedemptions', { customerIdentifier: t.ordinary, page: 1, pageSize: 250 }), rows: (b) => b.pointsRedemptions.length },
  { name: 'REST GET /webhooks/topics', call: () => rest('/webhooks/topics'), rows: (b) => b.topics.length },
  { name: 'REST GET /webhooks/subscriptions', call: () => rest('/webhooks/subscriptions'), rows: (b) => b.subscriptions.length },
  { name: 'REST GET /webhooks/deliveries/:id (3 attempts)', call: (t) => rest(`/webhooks/deliveries/${t.deliveryId}`), rows: (b) => 1 + b.delivery.attempts.length },
  // REST: lists by page number
  { name: 'REST /referral/referee p1 (250)', call: (t) => rest('/referral/referee', { customerIdentifier: t.referrer, page: 1, pageSize: 250 }), rows: (b) => b.data.length },
  {
    name: 'REST /referral/referee p400 | p1 (250)',
    call: (t) => rest('/referral/referee', { customerIdentifier: t.referrer, page: LARGE_AND_SMALL(400, 1)(t), pageSize: 250 }),
    rows: (b) => b.data.length,
  },
  { name: 'REST /webhooks/deliveries p1 (250)', call: () => rest('/webhooks/deliveries', { page: 1, pageSize: 250 }), rows: (b) => b.deliveries.length },
  {
    // The deepest numbered page (page * pageSize <= 10,000); past it, the cursor.
    name: 'REST /webhooks/deliveries p40 | p2 (250)',
    call: (t) => rest('/webhooks/deliveries', { page: LARGE_AND_SMALL(40, 2)(t), pageSize: 250 }),
    rows: (b) => b.deliveries.length,
  },
  {
    name: 'REST /webhooks/deliveries (250), deep cursor',
    call: (t) => rest('/webhooks/deliveries', { after: t.cursors.deliveries, pageSize: 250 }),
    rows: (b) => b.deliveries.length,
  },
  { name: 'REST /webhooks/deliveries status=pending (0 rows)', call: () => rest('/webhooks/deliveries', { status: 'pending', pageSize: 50 }), rows: (b) => b.deliveries.length },
  { name: 'REST /webhooks/deliveries status=failed (20)', call: () => rest('/webhooks/deliveries', { status: 'failed', pageSize: 20 }), rows: (b) => b.deliveries.length },
  {
    name: 'REST /webhooks/deliveries subscription p100 | p1 (100)',
    call: (t) => rest('/webhooks/deliveries', { subscriptionId: t.subscriptionId, page: LARGE_AND_SMALL(100, 1)(t), pageSize: 100 }),
    rows: (b) => b.deliveries.length,
  },
  {
    name: 'REST /webhooks/deliveries topic=points/* p40 | p1 (250)',
    call: (t) => rest('/webhooks/deliveries', { topic: 'points/*', page: LARGE_AND_SMALL(40, 1)(t), pageSize: 250 }),
    rows: (b) => b.deliveries.length,
  },
  // GraphQL: lookups
  { name: 'GQL customer (by e-mail)', call: (t) => gql(`query($id: String!) { customer(identifier: $id) { ${CUSTOMER} referralCode } }`, { id: t.ordinaryEmail }), rows: one },
  { name: 'GQL customer (by shop id)', call: (t) => gql(`query($id: String!) { customer(identifier: $id) { ${CUSTOMER} referralCode } }`, { id: t.ordinary }), rows: one },
  {
    name: 'GQL webhookDelivery { attempts payload }',
    call: (t) => gql(`query($id: ID!) { webhookDelivery(id: $id) { ${DELIVERY} payload attempts { id responseStatus } } }`, { id: t.deliveryId }),
    rows: (b) => one(b) + edges(b),
  },
  { name: 'GQL shop, apiKeys', call: () => gql('{ shop { id name } apiKeys { prefix active createdAt } }'), rows: (b) => 1 + b.data.apiKeys.length },
  { name: 'GQL webhookSubscriptions', call: () => gql('{ webhookSubscriptions(first: 20) { edges { node { id topic status callbackUrl } } } }'), rows: edges },
  {
    name: 'GQL pointsRedemptions(customerIdentifier)',
    call: (t) => gql('query($c: String) { pointsRedemptions(first: 20, customerIdentifier: $c) { edges { node { _id name rewardValue redeemable } } } }', { c: t.ordinary }),
    rows: edges,
  },
  // GraphQL: a customer's connections, first page and after a deep cursor
  { name: 'GQL customer.activities (50), heavy', call: (t) => gql(CUSTOMER_PAGE('activities', ACTIVITY), { id: t.heavy, first: 50 }), rows: edges },
  { name: 'GQL customer.activities (50), heavy, deep cursor', call: (t) => gql(CUSTOMER_PAGE('activities', ACTIVITY), { id: t.heavy, first: 50, after: t.cursors.activities }), rows: edges },
  { name: 'GQL customer.activities (4), ordinary', call: (t) => gql(CUSTOMER_PAGE('activities', ACTIVITY), { id: t.ordinary, first: 4 }), rows: edges },
  { name: 'GQL customer.discountCodes (50), heavy', call: (t) => gql(CUSTOMER_PAGE('discountCodes', '_id code value pointsAmount createdAt'), { id: t.heavy, first: 50 }), rows: edges },
  {
    name: 'GQL customer.discountCodes (50), deep cursor',
    call: (t) => gql(CUSTOMER_PAGE('discountCodes', '_id code value pointsAmount createdAt'), { id: t.heavy, first: 50, after: t.cursors.discountCodes }),
    rows: edges,
  },
  { name: 'GQL customer.referees (250)', call: (t) => gql(CUSTOMER_PAGE('referees', REFEREE), { id: t.referrer, first: 250 }), rows: edges },
  { name: 'GQL customer.referees (250), deep cursor', call: (t) => gql(CUSTOMER_PAGE('referees', REFEREE), { id: t.referrer, first: 250, after: t.cursors.referees }), rows: edges },
  // GraphQL: customers
  { name: 'GQL customers (250)', call: () => gql(CUSTOMERS, { first: 250 }), rows: edges },
  { name: 'GQL customers (250), deep cursor', call: (t) => gql(CUSTOMERS, { first: 250, after: t.cursors.customers }), rows: edges },
  { name: 'GQL customers(emailPrefix "m") (20)', call: () => gql(CUSTOMERS, { first: 20, prefix: 'm' }), rows: edges },
  { name: 'GQL customers(emailPrefix "m") (20), deep cursor', call: (t) => gql(CUSTOMERS, { first: 20, prefix: 'm', after: t.cursors.customersM }), rows: edges },
  { name: 'GQL customers(emailPrefix "mz") (0 rows)', call: () => gql(CUSTOMERS, { first: 20, prefix: 'mz' }), rows: edges },
  { name: 'GQL customers (20) { activities, codes, referees (5) }', call: () => gql(CUSTOMERS_NESTED), rows: edges },
  // GraphQL: deliveries
  { name: 'GQL webhookDeliveries (50)', call: () => gql(DELIVERIES, { first: 50 }), rows: edges },
  { name: 'GQL webhookDeliveries (50), deep cursor', call: (t) => gql(DELIVERIES, { first: 50, after: t.cursors.deliveries }), rows: edges },
  { name: 'GQL webhookDeliveries(status PENDING) (0 rows)', call: () => gql(DELIVERIES, { first: 50, status: 'pending' }), rows: edges },
  { name: 'GQL webhookDeliveries(status FAILED) (20)', call: () => gql(DELIVERIES, { first: 20, status: 'failed' }), rows: edges },
  { name: 'GQL webhookDeliveries(subscriptionId) (50)', call: (t) => gql(DELIVERIES, { first: 50, subscriptionId: t.subscriptionId }), rows: edges },
  { name: 'GQL webhookDeliveries(topic "points/*") (50)', call: () => gql(DELIVERIES, { first: 50, topic: 'points/*' }), rows: edges },
  { name: 'GQL webhookDeliveries (20) { attempts }', call: () => gql(DELIVERIES_ATTEMPTS, { first: 20 }), rows: edges },
  // A write, for scale: one balance change among a million customers vs a thousand.
  {
    name: 'REST POST /points/add',
    call: (t) => ({ method: 'POST', path: '/rest-api/v1/points/add', body: { customerIdentifier: t.ordinary, amount: 1, description: 'scale bench' } }),
    rows: (b) => (b.activity ? 1 : 0),
  },
];

/** Identifiers and deep cursors of one database, read from it (so they follow its data as it is now). */
async function targetsOf(db: ScaleDatabase): Promise<Targets> {
  const { facts } = db;
  const large = facts.size === 'large';
  const client = await connect(db.url);
  try {
    const shop = facts.shopId;
    const customerId = async (role: number) =>
      (await client.query<{ id: string; email: string }>('select id, email from customers where shop_id = $1 and shopify_customer_id = $2', [shop, String(FIRST_SHOPIFY_ID + role)])).rows[0]!;
    const heavy = await customerId(ROLES.heavy);
    const referrer = await customerId(ROLES.referrer);
    const ordinary = await customerId(ROLES.ordinary);
    // The key of the row at `offset` in a list's order: a cursor as deep as a client paging that far would hold.
    const seqAt = async (text: string, values: unknown[]) => encodeCursor([Number((await client.query<{ seq: string }>(text, values)).rows[0]!.seq)]);
    const activities = await seqAt('select seq from activities where customer_id = $1 order by seq desc offset $2 limit 1', [heavy.id, large ? 400_000 : 500]);
    const discountCodes = await seqAt('select seq from discount_codes where customer_id = $1 order by seq desc offset $2 limit 1', [heavy.id, large ? 200_000 : 250]);
    const referees = await seqAt('select seq from referrals where referrer_id = $1 order by seq offset $2 limit 1', [referrer.id, large ? 99_000 : 25]);
    const emailAt = async (prefix: string, offset: number) => {
      const { rows } = await client.query<{ email: string; id: string }>(
        "select lower(email) as email, id from customers where shop_id = $1 and lower(email) like $2 || '%' order by lower(email), id offset $3 limit 1",
        [shop, prefix, offset],
      );
      return encodeCursor([rows[0]!.email, rows[0]!.id]);
    };
    const customers = await emailAt('', large ? 900_000 : 500);
    const customersM = await emailAt('m', large ? 40_000 : 20);
    const delivery = (
      await client.query<{ created_at: Date; id: string }>(
        'select created_at, id from webhook_deliveries where shop_id = $1 order by created_at desc, id desc offset $2 limit 1',
        // SMALL has 500: the row at 249 leaves a full page of 250 after it, as LARGE's does.
        [shop, large ? 400_000 : 249],
      )
    ).rows[0]!;
    const failed = (await client.query<{ id: string }>("select id from webhook_deliveries where shop_id = $1 and status = 'failed' order by created_at limit 1", [shop])).rows[0]!;
    const reward = (await client.query<{ id: string }>('select id from points_redemptions where shop_id = $1 and reward_value = 5', [shop])).rows[0]!;
    return {
      size: facts.size,
      heavy: String(FIRST_SHOPIFY_ID + ROLES.heavy),
      referrer: String(FIRST_SHOPIFY_ID + ROLES.referrer),
      ordinary: String(FIRST_SHOPIFY_ID + ROLES.ordinary),
      ordinaryEmail: ordinary.email.toUpperCase(),
      deliveryId: failed.id,
      subscriptionId: facts.subscriptions.customers,
      rewardId: reward.id,
      cursors: { activities, discountCodes, referees, customers, customersM, deliveries: encodeTimeCursor(delivery) },
    };
  } finally {
    await client.end();
  }
}

type Side = { server: ServerProcess; pool: Pool; apiKey: string; targets: Targets };
type Sample = { ms: number; rows: number; error?: string };

async function send(side: Side, call: Call, rowsOf: (body: any) => number): Promise<Sample> {
  const started = performance.now();
  const res = await side.pool.request({
    method: call.method,
    path: call.path,
    headers: { authorization: `Bearer ${side.apiKey}`, ...(call.body ? { 'content-type': 'application/json' } : {}), ...call.headers },
    body: call.body ? JSON.stringify(call.body) : undefined,
  });
  const text = await res.body.text();
  const ms = performance.now() - started;
  if (res.statusCode !== 200) return { ms, rows: 0, error: `${res.statusCode} ${text.slice(0, 200)}` };
  const body = JSON.parse(text);
  if (body.errors) return { ms, rows: 0, error: JSON.stringify(body.errors).slice(0, 200) };
  return { ms, rows: rowsOf(body) };
}

type ProbeResult = { name: string; rows: Record<ScaleSize, number>; latencies: Record<ScaleSize, number[]>; error?: string };

/** One request at both sizes: warm-up, then rounds in which each size takes its turn (first in alternate rounds). */
async function measureProbe(probe: Probe, sides: Record<ScaleSize, Side>, samples: number): Promise<ProbeResult> {
  const result: ProbeResult = { name: probe.name, rows: { large: 0, small: 0 }, latencies: { large: [], small: [] } };
  const sizes: ScaleSize[] = ['large', 'small'];
  let slowest = 0;
  for (let i = 0; i < 2; i++) {
    for (const size of sizes) {
      const s = await send(sides[size], probe.call(sides[size].targets), probe.rows);
      if (s.error) return { ...result, error: `${size}: ${s.error}` };
      result.rows[size] = s.rows;
      slowest = Math.max(slowest, s.ms);
    }
  }
  const count = Math.max(MIN_SAMPLES, Math.min(samples, Math.floor(TIME_BUDGET_MS / Math.max(slowest, 1))));
  const perRound = Math.ceil(count / ROUNDS);
  for (let round = 0; round < ROUNDS; round++) {
    for (const size of round % 2 ? [...sizes].reverse() : sizes) {
      for (let i = 0; i < perRound; i++) {
        const s = await send(sides[size], probe.call(sides[size].targets), probe.rows);
        if (s.error) return { ...result, error: `${size}: ${s.error}` };
        result.latencies[size].push(s.ms);
      }
    }
  }
  return result;
}

async function runLists(sides: Record<ScaleSize, Side>, samples: number): Promise<{ table: string; over: number; failed: number }> {
  const rows: Array<Array<string | number>> = [];
  let over = 0;
  let failed = 0;
  for (const probe of PROBES) {
    const r = await measureProbe(probe, sides, samples);
    if (r.error) {
      failed++;
      rows.push([r.name, '-', '-', '-', '-', '-', '-', '-', `FAILED ${r.error}`]);
      process.stdout.write(`  ${r.name}: FAILED ${r.error}\n`);
      continue;
    }
    const small = summarize(r.latencies.small);
    const large = summarize(r.latencies.large);
    const p50 = large.p50 / small.p50;
    const p99 = large.p99 / small.p99;
    const marks = [p50 > TARGETS.ratio || p99 > TARGETS.ratio ? '> 2' : '', r.rows.large === r.rows.small ? '' : 'rows differ'].filter(Boolean).join(', ');
    if (p99 > TARGETS.ratio) over++;
    const rowCount = r.rows.large === r.rows.small ? String(r.rows.large) : `${r.rows.large} | ${r.rows.small}`;
    rows.push([r.name, rowCount, r.latencies.large.length, fmt.ms(small.p50), fmt.ms(small.p99), fmt.ms(large.p50), fmt.ms(large.p99), fmt.ratio(p50), fmt.ratio(p99), marks]);
    process.stdout.write(`  ${r.name}: ${fmt.ms(small.p99)} | ${fmt.ms(large.p99)} p99 (${fmt.ratio(p99)})\n`);
  }
  const table = formatTable(['request (LARGE | SMALL where they differ)', 'rows', 'samples', 'SMALL p50', 'SMALL p99', 'LARGE p50', 'LARGE p99', 'p50 ratio', 'p99 ratio', ''], rows);
  return { table, over, failed };
}

// --- writes and the engine's per-customer reads (issue 38) ------------------------------------------

/** Connections of the writes part: the issue's measure. */
const WRITE_CONNECTIONS = 8;
const WRITE_ROUNDS = 4;
const WRITE_ROUND_SEC = 3;
/** Refunds take $2 at a time from the history customer's oldest orders (at LARGE the oldest 1,000 of 5,000, at SMALL all 100). */
const REFUND_ORDERS = { large: 1_000, small: HISTORY.small.orders } as const;
/** Added to the history customer's balance before the part, so its deductions never run out. */
const HISTORY_TOP_UP = 200_000;
const STOREFRONT_TOKENS = 200;

type WriteProbe = {
  name: string;
  connections: number;
  load: (side: WriteSide) => Omit<HttpLoad, 'amount' | 'connections'>;
};
type WriteSide = Side & { db: ScaleDatabase; customers: number; tokens: string[]; refunded: Map<string, number> };

/**
 * points/add also on the same 1,000 customers at both sizes: SMALL's writes are soon all a
 * customer's second of the day, LARGE's random ones nearly all a first (a new active-member marker
 * and tier day, pages not yet read): this variant shows what the tables' size alone costs.
 */
const SAME_POOL = 1_000;
const randomCustomer = (side: WriteSide, pool = side.customers) => String(FIRST_SHOPIFY_ID + 1 + Math.floor(Math.random() * (Math.min(pool, side.customers) - 1)));
const json = (side: WriteSide) => ({ 'content-type': 'application/json', authorization: `Bearer ${side.apiKey}` });

/** $2 more refunded on the next of the oldest orders, round robin: every request a real change, each clawing back points. */
function refunds(side: WriteSide): Pick<HttpLoad, 'method' | 'body' | 'path'> {
  const orders = [...side.refunded.keys()];
  let next = 0;
  let current = orders[0]!;
  return {
    method: 'PUT',
    body: () => {
      current = orders[next++ % orders.length]!;
      const cents = side.refunded.get(current)! + 200;
      side.refunded.set(current, cents);
      // Two requests for one order may cross (8 connections round 100 orders at SMALL): the later state wins by its time.
      return JSON.stringify({ ...historyOrder((cents / 100).toFixed(2)), sourceUpdatedAt: new Date().toISOString() });
    },
    path: () => `/rest-api/v1/orders/${current}`,
  };
}

const WRITE_PROBES = {
  pointsAdd: {
    name: 'REST POST /points/add (random customers)',
    connections: WRITE_CONNECTIONS,
    load: (side) => ({ url: `${side.server.url}/rest-api/v1/points/add`, headers: json(side), body: () => JSON.stringify({ customerIdentifier: randomCustomer(side), amount: 15 }) }),
  },
  pointsAddFew: {
    name: 'REST POST /points/add (customers 1 to 1,000 at both sizes)',
    connections: WRITE_CONNECTIONS,
    load: (side) => ({ url: `${side.server.url}/rest-api/v1/points/add`, headers: json(side), body: () => JSON.stringify({ customerIdentifier: randomCustomer(side, SAME_POOL), amount: 15 }) }),
  },
  refund: {
    name: 'REST PUT /orders: $2 more refunded, history customer',
    connections: WRITE_CONNECTIONS,
    load: (side) => ({ url: `${side.server.url}/rest-api/v1/orders/x`, headers: json(side), ...refunds(side) }),
  },
  refundIdle: {
    name: 'the same, 1 connection (an idle server)',
    connections: 1,
    load: (side) => ({ url: `${side.server.url}/rest-api/v1/orders/x`, headers: json(side), ...refunds(side) }),
  },
  substract: {
    name: 'REST POST /points/substract 1, history customer',
    connections: WRITE_CONNECTIONS,
    load: (side) => ({ url: `${side.server.url}/rest-api/v1/points/substract`, headers: json(side), body: () => JSON.stringify({ customerIdentifier: HISTORY.customer, amount: 1 }) }),
  },
  redeem: {
    name: 'REST POST /pointsRedemptions (5 points), history customer',
    connections: WRITE_CONNECTIONS,
    load: (side) => ({
      url: `${side.server.url}/rest-api/v1/pointsRedemptions`,
      headers: json(side),
      body: () => JSON.stringify({ customerIdentifier: HISTORY.customer, pointsAmount: 5, rewardId: side.targets.rewardId }),
    }),
  },
  insights: {
    name: 'GQL shop { insights } 90 days, 8 readers',
    connections: WRITE_CONNECTIONS,
    load: (side) => {
      const to = new Date();
      const variables = { from: new Date(to.getTime() - 90 * DAY_MS).toISOString(), to: to.toISOString() };
      return { url: `${side.server.url}/graphql`, headers: json(side), body: () => JSON.stringify({ query: insightsQuery(false), variables }) };
    },
  },
  plain: {
    name: 'GQL customer { _id points } (a plain lookup)',
    connections: WRITE_CONNECTIONS,
    load: (side) => ({
      url: `${side.server.url}/graphql`,
      headers: json(side),
      body: () => JSON.stringify({ query: 'query($id: String!) { customer(identifier: $id) { _id points } }', variables: { id: randomCustomer(side) } }),
    }),
  },
  tier: {
    name: 'REST GET /vip/tiers/customer',
    connections: WRITE_CONNECTIONS,
    load: (side) => ({
      url: `${side.server.url}/rest-api/v1/vip/tiers/customer`,
      method: 'GET',
      headers: { authorization: `Bearer ${side.apiKey}` },
      path: () => `/rest-api/v1/vip/tiers/customer${query({ customerIdentifier: randomCustomer(side) })}`,
    }),
  },
  storefront: {
    name: 'storefront me { tier, progress } + rewards',
    connections: WRITE_CONNECTIONS,
    load: (side) => ({
      url: `${side.server.url}/storefront/graphql`,
      headers: { 'content-type': 'application/json' },
      body: () => JSON.stringify({ query: STOREFRONT_QUERY }),
      signed: () => ({ authorization: `Bearer ${side.tokens[Math.floor(Math.random() * side.tokens.length)]}` }),
    }),
  },
} satisfies Record<string, WriteProbe>;

/**
 * A shop's steady state: what the writes touch at random (customers, their tiers and lots, the
 * ledger's and the markers' indexes) in PostgreSQL's buffers, as a server sized by
 * docs/operations.md holds them after a while, not read in by the first turns. With pg_prewarm
 * (PostgreSQL's contrib) when the server has it; without, the turns warm them up themselves.
 */
async function prewarm(client: pg.Client): Promise<void> {
  try {
    await client.query('create extension if not exists pg_prewarm');
  } catch {
    return;
  }
  await client.query(`
    select sum(pg_prewarm(c.oid)) from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where n.nspname = 'public' and (c.relname in ('customers', 'tier_members', 'tier_metric_totals', 'point_lots')
      or (c.relkind = 'i' and (c.relname like 'customers%' or c.relname = 'activities_pkey' or c.relname like 'tier\_%'
        or c.relname like 'point\_lots%' or c.relname like 'insight\_active\_days%')))`);
}

/** What the writes part needs beyond the lists' targets: tokens, the history customer's refunds so far. */
async function writeSide(side: Side, db: ScaleDatabase): Promise<WriteSide> {
  const client = await connect(db.url);
  const refunded = new Map<string, number>();
  try {
    // Every shop's subscriptions (the neighbours' too) have secrets written unsealable (see
    // scale-data.ts), and this part makes events they match (redemptions): disabled, so the worker
    // attempts nothing beside the load and logs no error at each attempt.
    await client.query("update webhook_subscriptions set status = 'disabled', disabled_reason = 'scale bench: secret not sealed' where status <> 'disabled'");
    await client.query("update webhook_deliveries set status = 'cancelled' where status in ('pending', 'retrying')");
    await prewarm(client);
    const { rows } = await client.query<{ order_id: string; refunded_minor: string }>(
      `select o.order_id, o.refunded_minor from orders o join customers c on c.id = o.customer_id
       where c.shop_id = $1 and c.shopify_customer_id = $2 order by o.seq limit $3`,
      [db.facts.shopId, HISTORY.customer, REFUND_ORDERS[db.facts.size]],
    );
    for (const r of rows) refunded.set(r.order_id, Number(r.refunded_minor));
  } finally {
    await client.end();
  }
  const { db: kysely, close } = await openDatabase({ url: db.url, poolSize: 2 });
  const tokens: string[] = [];
  try {
    await changePoints(kysely, db.facts.shopId, 'add', { customerIdentifier: HISTORY.customer, amount: HISTORY_TOP_UP });
    for (let i = 0; i < STOREFRONT_TOKENS; i++) {
      const customers = db.facts.shape.customers;
      const customerIdentifier = String(FIRST_SHOPIFY_ID + 1 + Math.floor(Math.random() * (customers - 1)));
      tokens.push((await createCustomerAccessToken(kysely, db.facts.shopId, { customerIdentifier, expiresInSeconds: 86_400 })).accessToken);
    }
  } finally {
    await close();
  }
  return { ...side, db, customers: db.facts.shape.customers, tokens, refunded };
}

/** Each request at both sizes at its connections, SMALL and LARGE taking turns; p50/p99 and the ratios, and the issue's targets. */
async function runWrites(sides: Record<ScaleSize, WriteSide>): Promise<{ table: string; targets: string; missed: number }> {
  const rows: Array<Array<string | number>> = [];
  const measured = new Map<string, Record<ScaleSize, { p50: number; p99: number }>>();
  for (const probe of Object.values(WRITE_PROBES)) {
    const loads = {
      small: { ...probe.load(sides.small), connections: probe.connections },
      large: { ...probe.load(sides.large), connections: probe.connections },
    };
    const rates = { small: (await warmUp(loads.small, 1)).rate, large: (await warmUp(loads.large, 1)).rate };
    process.stdout.write(`  ${probe.name}\n`);
    const turns = await inTurns(loads, rates, { rounds: WRITE_ROUNDS, roundSec: WRITE_ROUND_SEC });
    const small = combine(turns.small);
    const large = combine(turns.large);
    const failed = small.failed + large.failed;
    measured.set(probe.name, { small, large });
    const p99 = large.p99 / small.p99;
    rows.push([probe.name, probe.connections, small.ok + large.ok, fmt.ms(small.p50), fmt.ms(small.p99), fmt.ms(large.p50), fmt.ms(large.p99), fmt.ratio(large.p50 / small.p50), fmt.ratio(p99),
      [p99 > TARGETS.writeRatio ? `> ${TARGETS.writeRatio}` : '', failed ? `${failed} FAILED: ${small.failures ?? ''} ${large.failures ?? ''}` : ''].filter(Boolean).join(', ')]);
  }
  const table = formatTable(['request', 'conns', 'answers', 'SMALL p50', 'SMALL p99', 'LARGE p50', 'LARGE p99', 'p50 ratio', 'p99 ratio', ''], rows);
  const at = (probe: WriteProbe) => measured.get(probe.name)!;
  const ratio = (probe: WriteProbe) => at(probe).large.p99 / at(probe).small.p99;
  const p = WRITE_PROBES;
  const checks: Array<[string, number, string]> = [
    ['points/add p99 LARGE / SMALL', ratio(p.pointsAdd), `<= ${TARGETS.writeRatio}`],
    ['points/add p99 LARGE / SMALL, the same 1,000 customers', ratio(p.pointsAddFew), `<= ${TARGETS.writeRatio}`],
    ['refund p99 LARGE / SMALL, 8 connections', ratio(p.refund), `<= ${TARGETS.writeRatio}`],
    ['refund p99 at LARGE, 1 connection (ms)', at(p.refundIdle).large.p99, `< ${TARGETS.refundP99Ms}`],
    ['refund p99 LARGE / SMALL, 1 connection', ratio(p.refundIdle), `<= ${TARGETS.writeRatio}`],
    ['substract p99 LARGE / SMALL', ratio(p.substract), `<= ${TARGETS.writeRatio}`],
    ['redemption p99 LARGE / SMALL', ratio(p.redeem), `<= ${TARGETS.writeRatio}`],
    ['insights p99 at LARGE, 8 readers (ms)', at(p.insights).large.p99, `< ${TARGETS.insightsP99Ms}`],
    ['insights p99 LARGE / SMALL', ratio(p.insights), `<= ${TARGETS.writeRatio}`],
    ['tier lookup p50 / plain lookup p50, LARGE', at(p.tier).large.p50 / at(p.plain).large.p50, `<= ${TARGETS.lookupMultiple}`],
    ['tier lookup p50 / plain lookup p50, SMALL', at(p.tier).small.p50 / at(p.plain).small.p50, `<= ${TARGETS.lookupMultiple}`],
    ['storefront me p50 / plain lookup p50, LARGE', at(p.storefront).large.p50 / at(p.plain).large.p50, `<= ${TARGETS.lookupMultiple}`],
    ['storefront me p50 / plain lookup p50, SMALL', at(p.storefront).small.p50 / at(p.plain).small.p50, `<= ${TARGETS.lookupMultiple}`],
  ];
  let missed = 0;
  const targetRows = checks.map(([name, value, target]) => {
    const [op, bound] = target.split(' ') as ['<=' | '<', string];
    const met = op === '<' ? value < Number(bound) : value <= Number(bound);
    if (!met) missed++;
    return [name, name.endsWith('(ms)') ? fmt.ms(value) : fmt.ratio(value), target, met ? 'met' : 'MISSED'];
  });
  return { table, targets: formatTable(['target', 'measured', 'bound', ''], targetRows), missed };
}

// --- purges --------------------------------------------------------------------------------------

type Purge = {
  name: string;
  /** Tops the purgeable rows up to the same amount before each measured purge, by SQL. */
  prepare(client: pg.Client, db: ScaleDatabase, now: number): Promise<void>;
  run(db: DB): Promise<number>;
};

const OLD_DELIVERIES = 200_000;
const EXPIRED_KEYS = 800_000;

function purgesFor(retentionDays: number): Purge[] {
  return [
    {
      name: 'webhook deliveries',
      async prepare(client, db, now) {
        const before = new Date(now - retentionDays * DAY_MS);
        const { rows } = await client.query<{ n: string }>('select count(*) as n from webhook_deliveries where created_at < $1', [before]);
        const missing = OLD_DELIVERIES - Number(rows[0]!.n);
        if (missing <= 0) return;
        // 40 to 60 days old, ids and event ids of their own (a previous run's may remain).
        await insertDeliveries(quietStep(client), 'old', db.facts.shopId, db.facts.subscriptions, {
          count: missing, newestAgoMs: (retentionDays + 10) * DAY_MS, spanMs: 20 * DAY_MS, salt: `p${now}`, now,
        });
      },
      run: (db) => purgeDeliveries(db, new Date(Date.now() - retentionDays * DAY_MS)),
    },
    {
      name: 'idempotency keys',
      async prepare(client, db, now) {
        const { rows } = await client.query<{ n: string }>("select count(*) as n from idempotency_keys where created_at < now() - interval '24 hours'");
        const missing = EXPIRED_KEYS - Number(rows[0]!.n);
        if (missing <= 0) return;
        await insertIdempotencyKeys(quietStep(client), 'old', db.facts.shopId, { count: missing, expiredShare: 1, salt: `p${now}`, now });
      },
      run: (db) => purgeExpiredIdempotencyKeys(db),
    },
    outboxPurge(),
  ];
}

const OLD_EVENTS = 500_000;
/** Relayed events kept in the table (LARGE starts with one per ledger entry); topped up when below. */
const KEPT_EVENTS = 4_000_000;

/**
 * The outbox purge walks events in the order they were written, so each turn purges the next
 * OLD_EVENTS of them: its cutoff is the creation time of the one after them.
 */
function outboxPurge(): Purge {
  let before = new Date(0);
  return {
    name: 'relayed outbox events',
    async prepare(client) {
      const { rows } = await client.query<{ n: string }>('select count(*) as n from outbox_events where relayed_at is not null');
      const missing = KEPT_EVENTS - Number(rows[0]!.n);
      if (missing > 0) {
        // Over a year old, relayed, written in time order after those already there.
        await client.query(
          `insert into outbox_events (id, shop_id, type, data, created_at, relayed_at)
           select 'evt_top' || md5(random()::text), (select id from shops order by id limit 1), 'points/added', '{}'::jsonb,
                  now() - interval '400 days' + i * interval '1 millisecond', now() - interval '400 days' + i * interval '1 millisecond'
           from generate_series(1, $1) i order by i`,
          [missing],
        );
      }
      const cutoff = await client.query<{ at: Date }>('select created_at as at from outbox_events where relayed_at is not null order by seq offset $1 limit 1', [OLD_EVENTS]);
      before = cutoff.rows[0]!.at;
    },
    run: (db) => purgeRelayedOutboxEvents(db, before),
  };
}

const quietStep = (client: pg.Client) => async (_what: string, text: string, values: unknown[]) => {
  await client.query(text, values);
};

/** Closed-loop points/add at `connections` concurrency until `until` resolves; successes per second and latencies. */
async function writeLoad(side: Side, customers: number, connections: number, until: Promise<unknown>, minMs: number) {
  let stop = false;
  const latencies: number[] = [];
  let failed = 0;
  const started = performance.now();
  const worker = async () => {
    while (!stop) {
      const s = await send(
        side,
        {
          method: 'POST',
          path: '/rest-api/v1/points/add',
          // As careful clients send writes: each claims a key in the table the purge deletes from.
          headers: { 'idempotency-key': randomUUID() },
          body: { customerIdentifier: String(FIRST_SHOPIFY_ID + Math.floor(Math.random() * customers)), amount: 1, description: 'scale bench purge' },
        },
        () => 1,
      );
      if (s.error) failed++;
      else latencies.push(s.ms);
    }
  };
  const workers = Array.from({ length: connections }, worker);
  await Promise.all([until, sleep(minMs)]);
  stop = true;
  await Promise.all(workers);
  const seconds = (performance.now() - started) / 1000;
  return { rate: latencies.length / seconds, seconds, ...summarize(latencies), failed };
}

async function runPurges(side: Side, db: ScaleDatabase, turns: number): Promise<string> {
  const retentionDays = loadConfig({ ...process.env, DATABASE_URL: db.url }).webhookRetentionDays;
  const purges = purgesFor(retentionDays);
  const client = await connect(db.url);
  const { db: kysely, close } = await openDatabase({ url: db.url, poolSize: 4 });
  const connections = 16;
  try {
    const rows: Array<Array<string | number>> = [];
    const ratios: number[] = [];
    let windowMs = 10_000;
    // Warm the write path first: the first turn should not pay for a cold server.
    await writeLoad(side, db.facts.shape.customers, connections, Promise.resolve(), 3_000);
    for (let turn = 1; turn <= turns; turn++) {
      const now = Date.now();
      for (const purge of purges) await purge.prepare(client, db, now);
      await client.query('analyze webhook_deliveries; analyze idempotency_keys; analyze outbox_events');
      await client.query('checkpoint');
      const without = await writeLoad(side, db.facts.shape.customers, connections, Promise.resolve(), windowMs);
      await client.query('checkpoint');
      const purged: Record<string, { rows: number; ms: number }> = {};
      const purging = (async () => {
        for (const purge of purges) {
          const t = performance.now();
          const n = await purge.run(kysely);
          purged[purge.name] = { rows: n, ms: performance.now() - t };
        }
      })();
      const during = await writeLoad(side, db.facts.shape.customers, connections, purging, 2_000);
      const purgeMs = Object.values(purged).reduce((n, p) => n + p.ms, 0);
      windowMs = Math.max(5_000, purgeMs);
      const ratio = during.rate / without.rate;
      ratios.push(ratio);
      rows.push([
        `turn ${turn}`,
        Object.entries(purged).map(([name, p]) => `${name} ${p.rows} in ${(p.ms / 1000).toFixed(1)} s`).join('; '),
        fmt.rate(without.rate), fmt.ms(without.p99), fmt.rate(during.rate), fmt.ms(during.p99), fmt.ratio(ratio),
      ]);
      process.stdout.write(`  purge turn ${turn}: ${fmt.rate(without.rate)} → ${fmt.rate(during.rate)} writes/s (${fmt.ratio(ratio)})\n`);
    }
    // Nothing left to purge now: what an idle purge run costs, once the rows just deleted are
    // vacuumed, as autovacuum does long before the next hourly run (before that, a run steps over
    // their dead index entries once; docs/operations.md "Retention").
    // An outbox purge stops at the first event younger than its cutoff, so events written out of
    // time order are left for the next run: finish every purge first.
    for (const purge of purges) while ((await purge.run(kysely)) > 0);
    await client.query('vacuum webhook_deliveries, idempotency_keys, outbox_events');
    const empty: Array<Array<string | number>> = [];
    for (const purge of purges) {
      const times: number[] = [];
      for (let i = 0; i < 5; i++) {
        const t = performance.now();
        const n = await purge.run(kysely);
        times.push(performance.now() - t);
        if (n !== 0) throw new Error(`the ${purge.name} purge found ${n} rows on its empty run`);
      }
      const sorted = Float64Array.from(times).sort();
      const median = percentile(sorted, 50);
      empty.push([`${purge.name}, nothing to purge`, fmt.ms(median), fmt.ms(sorted[sorted.length - 1]!), `< ${TARGETS.emptyPurgeMs} ms`, median < TARGETS.emptyPurgeMs ? 'met' : 'MISSED']);
    }
    const worst = Math.min(...ratios);
    return [
      `points/add (each with its own Idempotency-Key) at ${connections} connections on LARGE, without a purge, then while the purges run (one after the other: ${purges.map((p) => p.name).join(', ')}),`,
      `each turn after topping up ${OLD_DELIVERIES} deliveries older than the ${retentionDays}-day retention and ${EXPIRED_KEYS} expired idempotency keys by SQL; the outbox purge takes the next ${OLD_EVENTS} relayed events`,
      formatTable(['', 'purged', 'without: writes/s', 'p99', 'during: writes/s', 'p99', 'ratio'], rows),
      `write rate during / without a purge: worst turn ${fmt.ratio(worst)} (target >= ${TARGETS.purgeWriteRatio}: ${worst >= TARGETS.purgeWriteRatio ? 'met' : 'MISSED'})`,
      '',
      formatTable(['empty purge run (5 runs)', 'median', 'max', 'target', 'result'], empty),
    ].join('\n');
  } finally {
    await close();
    await client.end();
  }
}

// --- the customers import ------------------------------------------------------------------------

async function importFile(rows: number): Promise<string> {
  const file = path.join(os.tmpdir(), `bench-scale-customers-${rows}.ndjson`);
  if (existsSync(file)) return file;
  const out = createWriteStream(`${file}.partial`);
  for (let i = 0; i < rows; i++) {
    const line = JSON.stringify({
      shopifyCustomerId: String(8_000_000_000 + i),
      email: `${['Ada', 'ben', 'Maria', 'zoe', 'omar', 'Ivy', 'lucas', 'Nina'][i % 8]}.import${i}@example.org`,
      ...(i % 2 === 0 ? { points: i % 5000 } : {}),
      ...(i % 3 === 0 ? { birthday: `19${60 + (i % 40)}-0${1 + (i % 9)}-1${i % 10}` } : {}),
    });
    if (!out.write(`${line}\n`)) await once(out, 'drain');
  }
  out.end();
  await once(out, 'finish');
  await rename(`${file}.partial`, file);
  return file;
}

async function runImport(base: string, rows: number): Promise<string> {
  const t0 = performance.now();
  const file = await importFile(rows);
  process.stdout.write(`  import file ${file} ready in ${((performance.now() - t0) / 1000).toFixed(1)} s\n`);
  return timeCliImport({
    base,
    name: 'bench_scale_import',
    rows,
    command: (shopId) => ['customers', 'import', file, '--shop', shopId],
    title: `customers import of ${rows} NDJSON lines (half with points, a third with birthdays) into an empty shop on PostgreSQL, run as \`npm run cli -- customers import FILE --shop ID\``,
    targets: { seconds: TARGETS.importSeconds, rssMiB: TARGETS.importRssMiB },
  });
}

// --- the scenario --------------------------------------------------------------------------------

async function run(options: BenchOptions): Promise<boolean> {
  const scale = options.scale;
  const log = (line: string) => process.stdout.write(`${line}\n`);
  const started = performance.now();
  const large = await ensureScaleDatabase(options.databaseUrl, 'large', { rebuild: scale.rebuild, log });
  const small = await ensureScaleDatabase(options.databaseUrl, 'small', { rebuild: scale.rebuild, log });
  log(`  data ready in ${((performance.now() - started) / 1000).toFixed(0)} s (LARGE ${large.built ? 'built' : 'reused'}, built in ${large.buildSeconds.toFixed(0)} s; SMALL ${small.built ? 'built' : 'reused'}, built in ${small.buildSeconds.toFixed(0)} s)`);
  if (scale.buildOnly) return true;

  const report: string[] = [];
  let ok = true;
  const dbs: Record<ScaleSize, ScaleDatabase> = { large, small };
  const sides: Partial<Record<ScaleSize, Side>> = {};
  try {
    if (scale.parts.has('lists') || scale.parts.has('purge') || scale.parts.has('writes')) {
      for (const size of ['large', 'small'] as const) {
        const db = dbs[size];
        const server = await startServer({ databaseUrl: db.url, env: SERVER_ENV });
        sides[size] = { server, pool: new Pool(server.url, { connections: 16 }), apiKey: db.facts.apiKey, targets: await targetsOf(db) };
      }
    }
    if (scale.parts.has('lists')) {
      const lists = await runLists(sides as Record<ScaleSize, Side>, scale.samples);
      ok = lists.failed === 0 && ok;
      report.push(
        `every list and lookup, one request at a time, LARGE and SMALL taking turns in ${ROUNDS} rounds (up to ${scale.samples} samples each, fewer when slow: ${TIME_BUDGET_MS / 1000} s per request and size;`,
        `the webhook endpoints' fixed per-shop limits raised ${FIXED_LIMIT_MULTIPLIER}-fold, RATE_LIMIT_FIXED_MULTIPLIER, so they are sampled as the rest);`,
        'rows: what the answer holds (edges at every depth for GraphQL); "> 2": a LARGE/SMALL ratio over the target of 2',
        lists.table,
        `p99 ratio over ${TARGETS.ratio}: ${lists.over} of ${PROBES.length} requests${lists.failed ? `; ${lists.failed} FAILED` : ''}`,
      );
    }
    if (scale.parts.has('writes')) {
      const writeSides = { large: await writeSide(sides.large!, large), small: await writeSide(sides.small!, small) };
      const writes = await runWrites(writeSides);
      ok = writes.missed === 0 && ok;
      report.push(
        '',
        `writes and the engine's per-customer reads, ${WRITE_ROUNDS} rounds of ${WRITE_ROUND_SEC} s, SMALL and LARGE taking turns (a warm-up of 1 s each first);`,
        `the history customer: ${HISTORY.large.orders} orders and ${HISTORY.large.orders * (1 + HISTORY.creditsPerOrder)} ledger entries at LARGE, ${HISTORY.small.orders} and ${HISTORY.small.orders * (1 + HISTORY.creditsPerOrder)} at SMALL`,
        writes.table,
        '',
        writes.targets,
      );
    }
    if (scale.parts.has('purge')) {
      report.push('', await runPurges(sides.large!, large, scale.purgeTurns));
    }
    for (const side of Object.values(sides)) {
      const logged = side.server.logged();
      if (logged.length) report.push(`the server logged (last lines):\n${logged.map((l) => `    ${l.slice(0, 300)}`).join('\n')}`);
    }
  } finally {
    for (const side of Object.values(sides)) {
      await side.pool.close();
      await side.server.stop();
    }
  }
  if (scale.parts.has('import') && scale.importRows > 0) report.push('', await runImport(options.databaseUrl, scale.importRows));
  log(['', ...report, ''].join('\n'));
  return ok;
}

export const scale: Scenario = {
  name: 'scale',
  summary: 'every list and lookup at 1,000,000 customers vs 1,000 (LARGE/SMALL ratios), purges under writes, the customers import',
  run,
};

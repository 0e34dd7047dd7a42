// Storefront: the customer query a storefront widget sends (balance, tier and progress, 10 rewards
// with `redeemable`) on /storefront/graphql with customer access tokens, against the same read on
// /graphql with the shop's key (`customer(identifier)` and `pointsRedemptions(customerIdentifier)`),
// taking turns in the same run at the same connections, over many customers.
import { openDatabase } from '../../src/db/database.js';
import { createCustomerAccessToken } from '../../src/domain/customers/customer-access-tokens.js';
import { changePoints } from '../../src/domain/ledger/points.js';
import { upsertCustomer } from '../../src/domain/program/sign-up.js';
import { createTier } from '../../src/domain/program/tiers.js';
import { createPointsRedemption } from '../../src/domain/rewards/redemptions.js';
import { createShop } from '../../src/domain/shops/shops.js';
import { combine, inTurns, warmUp } from '../lib/load.js';
import { createIsolatedSchema } from '../lib/postgres.js';
import type { BenchOptions, Scenario } from '../lib/scenario.js';
import { startServer } from '../lib/server.js';
import { fmt, printReport, rateRatioRow } from '../lib/table.js';

const TARGET_RATIO = 0.8;
const ROUNDS = 6;
const REWARDS = 10;

const FIELDS = 'points pendingPoints tier { tier { name multiplier } } tierProgress { current next { name threshold } remaining }';
const REWARD_FIELDS = 'edges { node { _id name rewardValue redeemable } }';
/** The widget's first view (the scale bench sends it too). */
export const STOREFRONT_QUERY = `{ me { ${FIELDS} } rewards(first: ${REWARDS}) { ${REWARD_FIELDS} } }`;
const ADMIN_QUERY = `query($id: String!) { customer(identifier: $id) { ${FIELDS} } pointsRedemptions(customerIdentifier: $id, first: ${REWARDS}) { ${REWARD_FIELDS} } }`;

async function seed(url: string, customers: number) {
  const { db, close } = await openDatabase({ url, poolSize: 8 });
  try {
    const { shop, apiKey } = await createShop(db, 'Bench storefront shop');
    await createTier(db, shop.id, { name: 'Silver', threshold: '500', multiplier: '1.25' });
    await createTier(db, shop.id, { name: 'Gold', threshold: '2000', multiplier: '1.5' });
    for (let i = 0; i < REWARDS; i++) {
      await createPointsRedemption(db, shop.id, { name: `Reward ${i}`, type: 'amount', discountPrefix: `R${i}-`, rewardValue: 100 * (i + 1), discountValue: i + 1 });
    }
    const ids = Array.from({ length: customers }, (_, i) => `sf-${i}`);
    const tokens: string[] = [];
    for (let i = 0; i < ids.length; i += 8) {
      await Promise.all(
        ids.slice(i, i + 8).map(async (id, j) => {
          await upsertCustomer(db, shop.id, { shopifyCustomerId: id, email: `${id}@bench.example` });
          await changePoints(db, shop.id, 'add', { customerIdentifier: id, amount: 1 + (((i + j) * 37) % 3000) });
          tokens.push((await createCustomerAccessToken(db, shop.id, { customerIdentifier: id, expiresInSeconds: 86_400 })).accessToken);
        }),
      );
    }
    return { apiKey, ids, tokens };
  } finally {
    await close();
  }
}

async function run(options: BenchOptions): Promise<boolean> {
  const schema = await createIsolatedSchema(options.databaseUrl);
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    const nodeArgs = options.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`] : [];
    // Measure the service, not its refusals: the storefront limiters run, they just never say no.
    server = await startServer({ databaseUrl: schema.url, nodeArgs, env: { STOREFRONT_RATE_PER_CUSTOMER: '1000000000', STOREFRONT_RATE_PER_IP: '1000000000' } });
    const { apiKey, ids, tokens } = await seed(schema.url, options.customers);
    const pick = () => Math.floor(Math.random() * ids.length);
    const json = { 'content-type': 'application/json' };
    const loads = {
      admin: {
        url: `${server.url}/graphql`,
        connections: options.connections,
        headers: { ...json, authorization: `Bearer ${apiKey}` },
        body: () => JSON.stringify({ query: ADMIN_QUERY, variables: { id: ids[pick()] } }),
      },
      storefront: {
        url: `${server.url}/storefront/graphql`,
        connections: options.connections,
        headers: json,
        body: () => JSON.stringify({ query: STOREFRONT_QUERY }),
        // Each request is a random customer's: its own token.
        signed: () => ({ authorization: `Bearer ${tokens[pick()]}` }),
      },
    };
    // The answers must be what a widget needs, not errors: GraphQL answers errors with 200 too.
    for (const face of ['admin', 'storefront'] as const) {
      const headers = face === 'admin' ? loads.admin.headers : { ...loads.storefront.headers, ...loads.storefront.signed() };
      const res = await fetch(loads[face].url, { method: 'POST', headers, body: loads[face].body() });
      const body = (await res.json()) as { data?: Record<string, unknown>; errors?: unknown };
      if (!res.ok || body.errors || Object.values(body.data ?? {}).some((v) => v === null)) throw new Error(`${face}: ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
    }
    const rates = { admin: (await warmUp(loads.admin, options.warmupSec)).rate, storefront: (await warmUp(loads.storefront, options.warmupSec)).rate };
    const roundSec = Math.max(1, Math.round(options.durationSec / ROUNDS));
    const turns = await inTurns(loads, rates, { rounds: ROUNDS, roundSec });
    const admin = combine(turns.admin);
    const storefront = combine(turns.storefront);
    const checks = [{ name: 'every request answered 2xx', ok: admin.failed === 0 && storefront.failed === 0, detail: `${admin.failures ?? ''} ${storefront.failures ?? ''}`.trim() || 'none failed' }];
    return printReport({
      requests: [
        ['/graphql customer + pointsRedemptions (API key)', fmt.rate(admin.rate), fmt.ms(admin.p50), fmt.ms(admin.p99), admin.ok, admin.failed],
        ['/storefront/graphql me + rewards (token)', fmt.rate(storefront.rate), fmt.ms(storefront.p50), fmt.ms(storefront.p99), storefront.ok, storefront.failed],
      ],
      targets: [
        rateRatioRow(`storefront / admin rate, ${options.connections} connections`, turns.storefront, turns.admin, TARGET_RATIO),
        ['storefront / admin p99', fmt.ratio(storefront.p99 / admin.p99), '', '', ''],
      ],
      checks,
    });
  } finally {
    await server?.stop();
    await schema.drop();
  }
}

export const storefront: Scenario = {
  name: 'storefront',
  summary: 'the storefront widget query (balance, tier, 10 rewards) with customer tokens against the same admin query with the API key, in turns',
  run,
};

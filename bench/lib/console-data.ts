// The database of `npm run bench -- console` (issue 35): one shop of N customers (a million by
// default) with a VIP ladder that a tenth of them hold, and one customer whose page the console
// opens: 20,000 ledger entries, a discount code for every tenth, 200 orders, 500 referees. Bulk
// rows by SQL as bench/lib/scale-data.ts writes them (keeping a balance its last entry's
// new_points); the shop, its key and its tiers by the domain. Kept between runs like scale's.
import { openDatabase } from '../../src/db/database.js';
import { migrateToLatest } from '../../src/db/migrate.js';
import { createTier } from '../../src/domain/program/index.js';
import { createPointsRedemption } from '../../src/domain/rewards/index.js';
import { createShop } from '../../src/domain/shops/index.js';
import { bulkInsert, DOMAINS, ensureBuiltDatabase, FIRST_NAMES, idSql, LAST_NAMES, readableCodeSql, textArray, tsSql, withClient } from './scale-data.js';

/** Bump whenever the rows generated change: databases of another version are rebuilt. */
const CONSOLE_DATA_VERSION = 1;

export const PAGE_CUSTOMER = { entries: 20_000, codeEvery: 10, orders: 200, referees: 500 } as const;
/** Customer i's shop id; the page customer is customer 0. */
export const FIRST_CONSOLE_ID = 5_000_000_000;

export type ConsoleFacts = {
  customers: number;
  shopId: string;
  apiKey: string;
  /** The page customer's e-mail and one of its codes. */
  pageEmail: string;
  pageCode: string;
};

const DAY_MS = 24 * 60 * 60 * 1000;

export function consoleDatabase(base: string, customers: number, options: { rebuild?: boolean } = {}) {
  return ensureBuiltDatabase(base, `bench_console_${customers}`, CONSOLE_DATA_VERSION, (url, log) => build(url, customers, log), options);
}

async function build(url: string, customers: number, log: (line: string) => void): Promise<ConsoleFacts> {
  const { db, close } = await openDatabase({ url, poolSize: 2 });
  let shop: { shopId: string; apiKey: string };
  let rewardId: string;
  const tierIds: string[] = [];
  try {
    await migrateToLatest(db);
    const made = await createShop(db, 'Console bench');
    shop = { shopId: made.shop.id, apiKey: made.apiKey };
    rewardId = (await createPointsRedemption(db, shop.shopId, { name: '5 off', type: 'amount', discountPrefix: 'SAVE', rewardValue: 5, discountValue: 5 })).pointsRedemption._id;
    for (const [name, threshold] of [['Silver', '500'], ['Gold', '2000'], ['Platinum', '10000']] as const) {
      tierIds.push((await createTier(db, shop.shopId, { name, threshold })).tier.id);
    }
  } finally {
    await close();
  }

  await bulkInsert(url, log, async (step) => {
    const t0 = Date.now() - 365 * DAY_MS;
    const customerMs = (i: string) => `${t0} + (${i}) * ${Math.max(1, Math.floor((30 * DAY_MS) / customers))}::bigint`;
    const customerId = (i: string) => idSql(customerMs(i), `$1 || ':c' || (${i})`);
    const E = PAGE_CUSTOMER.entries;
    // The page customer's balance after its j-th entry: +10 each, -5 on every codeEvery-th (a redemption).
    const balance = (j: string) => `10 * (${j}) - 15 * ((${j}) / ${PAGE_CUSTOMER.codeEvery})`;

    await step('customers', `
      insert into customers (id, shop_id, shopify_customer_id, email, birthday, points, created_at, updated_at)
      select ${customerId('i')}, $1, (${FIRST_CONSOLE_ID} + i)::text,
        (case when i % 7 = 0 then initcap(f) else f end) || '.' || l || i || '@' || d,
        case when i % 3 = 0 then (1960 + i % 45)::text || '-' || lpad((1 + i % 12)::text, 2, '0') || '-' || lpad((1 + i % 28)::text, 2, '0') end,
        case when i = 0 then ${balance(String(E))} else 0 end,
        ${tsSql(customerMs('i'))}, ${tsSql(customerMs('i'))}
      from generate_series(0, ${customers - 1}) i,
        lateral (select (${textArray(FIRST_NAMES)})[1 + i % ${FIRST_NAMES.length}] as f,
          (${textArray(LAST_NAMES)})[1 + (i / ${FIRST_NAMES.length}) % ${LAST_NAMES.length}] as l,
          (${textArray(DOMAINS)})[1 + i % ${DOMAINS.length}] as d) names`, [shop.shopId]);

    // A tenth of the customers hold a tier (the page customer Platinum): the export joins them.
    await step('tier members', `
      insert into tier_members (customer_id, shop_id, tier_id, since)
      select ${customerId('i')}, $1, case when i = 0 then $4 when i % 20 = 0 then $3 else $2 end, now() - interval '30 days'
      from generate_series(0, ${customers - 1}, 10) i`, [shop.shopId, tierIds[0], tierIds[1], tierIds[2]]);

    const ledgerStart = t0 + 31 * DAY_MS;
    const entryMs = `${ledgerStart} + j * ${Math.floor((300 * DAY_MS) / E)}::bigint`;
    const redemption = `j % ${PAGE_CUSTOMER.codeEvery} = 0`;
    await step('the page customer\'s ledger', `
      insert into activities (id, shop_id, customer_id, type, setting_type, description, note, old_points, new_points, created_at, updated_at)
      select ${idSql(entryMs, "$1 || ':a' || j")}, $1, ${customerId('0')},
        case when ${redemption} then 'redeem_points' else 'add_points' end,
        case when ${redemption} then 'redemption' else 'api' end,
        case when ${redemption} then '5 off' else 'order #' || (100000 + j) end, null,
        ${balance('j - 1')}, ${balance('j')}, ${tsSql(entryMs)}, ${tsSql(entryMs)}
      from generate_series(1, ${E}) j order by j`, [shop.shopId]);

    await step('the page customer\'s discount codes', `
      insert into discount_codes (id, shop_id, customer_id, reward_id, activity_id, code, type, value, points_amount, status, expires_at,
        used_at, cancelled_at, created_at)
      select ${idSql('extract(epoch from a.created_at) * 1000', "a.id || ':d'")}, a.shop_id, a.customer_id, $2, a.id,
        'SAVE' || ${readableCodeSql('a.seq', 10)}, 'amount', 5, 5, s.status,
        case when s.status = 'expired' then a.created_at + interval '30 days' end,
        case when s.status = 'used' then a.created_at + interval '1 day' end,
        case when s.status = 'cancelled' then a.created_at + interval '2 days' end, a.created_at
      from activities a, lateral (select (array['issued', 'used', 'expired', 'cancelled'])[1 + a.seq % 4] as status) s
      where a.shop_id = $1 and a.type = 'redeem_points' order by a.seq`, [shop.shopId, rewardId]);

    const orderMs = `${ledgerStart} + k * ${Math.floor((300 * DAY_MS) / PAGE_CUSTOMER.orders)}::bigint`;
    await step('the page customer\'s orders', `
      insert into orders (id, shop_id, customer_id, order_id, currency, subtotal_minor, shipping_minor, tax_minor, total_minor, refunded_minor,
        status, line_items, processed_at, state_hash, points_earned, created_at, updated_at)
      select ${idSql(orderMs, "$1 || ':o' || k")}, $1, ${customerId('0')}, 'order-' || k, 'USD', 4200, 0, 0, 4200, 0,
        'paid', '[{"productId":"p-1","quantity":1,"price":"42.00"}]', ${tsSql(orderMs)}, md5(k::text), 42, ${tsSql(orderMs)}, ${tsSql(orderMs)}
      from generate_series(1, ${PAGE_CUSTOMER.orders}) k order by k`, [shop.shopId]);

    await step('the page customer\'s referral code and referees', `
      with code as (
        insert into referral_codes (customer_id, shop_id, code) values (${customerId('0')}, $1, 'PAGEREF1') returning code
      )
      insert into referrals (id, shop_id, referee_id, referrer_id, referral_code, status, created_at, updated_at)
      select ${idSql(`${customerMs('r')} + 500`, "$1 || ':r' || r")}, $1, ${customerId('r')}, ${customerId('0')}, (select code from code), true,
        ${tsSql(`${customerMs('r')} + 500`)}, ${tsSql(`${customerMs('r')} + 500`)}
      from generate_series(1, ${Math.min(PAGE_CUSTOMER.referees, customers - 1)}) r order by r`, [shop.shopId]);
  });

  return withClient(url, async (client) => {
    const facts = await client.query<{ email: string; code: string }>(
      `select c.email, (select code from discount_codes d where d.customer_id = c.id order by d.seq desc limit 1) as code
       from customers c where c.shop_id = $1 and c.shopify_customer_id = $2`,
      [shop.shopId, String(FIRST_CONSOLE_ID)],
    );
    return { customers, ...shop, pageEmail: facts.rows[0]!.email, pageCode: facts.rows[0]!.code };
  });
}

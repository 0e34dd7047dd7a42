// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

// Every list reads in proportion to the page it returns (issue 16, docs/architecture.md "Lists").
export async function up(db: Kysely<any>): Promise<void> {
  // A per-parent list (a customer's ledger or codes, a referrer's referees) is `where parent = $1
  // order by seq desc limit n`. With an index on seq alone the planner may walk it backwards,
  // filtering for the parent, and a customer whose entries are all old then costs a walk over
  // everyone else's newer ones. Keyed by (parent, seq), the only ordered path is the parent's range.
  for (const [table, parent] of [
    ['activities', 'customer_id'],
    ['discount_codes', 'customer_id'],
    ['referrals', 'referrer_id'],
  ] as const) {
    await sql`alter table ${sql.table(table)} drop constraint ${sql.ref(`${table}_pkey`)}`.execute(db);
    await sql`alter table ${sql.table(table)} add constraint ${sql.ref(`${table}_pkey`)} primary key (${sql.ref(parent)}, seq)`.execute(db);
  }
  await sql`drop index activities_customer_seq_idx`.execute(db);
  await sql`drop index discount_codes_customer_seq_idx`.execute(db);
  await sql`drop index referrals_referrer_seq_idx`.execute(db);

  // Customers are listed by lower(email) in byte order ("C"), so one index serves both the order
  // and an e-mail prefix range whatever the database's collation (a text_pattern_ops index serves
  // the prefix but not the order; the collation's order cannot serve a prefix).
  await sql`drop index customers_shop_email_prefix_idx`.execute(db);
  await sql`create index customers_shop_email_order_idx on customers (shop_id, (lower(email) collate "C"), id)`.execute(db);

  // The delivery list's filters (a topic, a topic group `points/*`), each in the list's order (newest first), the shop first so a
  // page's keys come from the index alone. The subscription one replaces the index on
  // subscription_id alone (cancel and resume now name the shop too).
  await sql`create index webhook_deliveries_shop_subscription_idx on webhook_deliveries (shop_id, subscription_id, created_at desc, id desc)`.execute(db);
  await sql`create index webhook_deliveries_shop_status_idx on webhook_deliveries (shop_id, status, created_at desc, id desc)`.execute(db);
  await sql`create index webhook_deliveries_shop_topic_idx on webhook_deliveries (shop_id, topic, created_at desc, id desc)`.execute(db);
  await sql`create index webhook_deliveries_shop_topic_group_idx on webhook_deliveries (shop_id, split_part(topic, '/', 1), created_at desc, id desc)`.execute(db);
  await sql`drop index webhook_deliveries_subscription_idx`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`create index webhook_deliveries_subscription_idx on webhook_deliveries (subscription_id, created_at desc, id desc)`.execute(db);
  await sql`drop index webhook_deliveries_shop_topic_group_idx`.execute(db);
  await sql`drop index webhook_deliveries_shop_topic_idx`.execute(db);
  await sql`drop index webhook_deliveries_shop_status_idx`.execute(db);
  await sql`drop index webhook_deliveries_shop_subscription_idx`.execute(db);
  await sql`drop index customers_shop_email_order_idx`.execute(db);
  await sql`create index customers_shop_email_prefix_idx on customers (shop_id, lower(email) text_pattern_ops, id)`.execute(db);
  await sql`create index referrals_referrer_seq_idx on referrals (referrer_id, seq)`.execute(db);
  await sql`create index discount_codes_customer_seq_idx on discount_codes (customer_id, seq)`.execute(db);
  await sql`create index activities_customer_seq_idx on activities (customer_id, seq)`.execute(db);
  for (const table of ['activities', 'discount_codes', 'referrals'] as const) {
    await sql`alter table ${sql.table(table)} drop constraint ${sql.ref(`${table}_pkey`)}`.execute(db);
    await sql`alter table ${sql.table(table)} add constraint ${sql.ref(`${table}_pkey`)} primary key (seq)`.execute(db);
  }
}

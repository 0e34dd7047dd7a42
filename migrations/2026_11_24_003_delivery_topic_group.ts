// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // A delivery's topic group (`points` of `points/added`) as a stored column: an index on the
  // expression serves the `points/*` filter, but a numbered page skips its offset through the table
  // (an expression cannot be read back from the index); on a column the skip is index-only.
  await sql`alter table webhook_deliveries add column topic_group text generated always as (split_part(topic, '/', 1)) stored`.execute(db);
  await sql`create index webhook_deliveries_shop_group_idx on webhook_deliveries (shop_id, topic_group, created_at desc, id desc)`.execute(db);
  await sql`drop index webhook_deliveries_shop_topic_group_idx`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`create index webhook_deliveries_shop_topic_group_idx on webhook_deliveries (shop_id, split_part(topic, '/', 1), created_at desc, id desc)`.execute(db);
  await sql`drop index webhook_deliveries_shop_group_idx`.execute(db);
  await sql`alter table webhook_deliveries drop column topic_group`.execute(db);
}

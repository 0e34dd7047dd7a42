// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // Daily work per shop (the birthday rule's run, then tier evaluation): the shop-local day to do
  // next, and the instant that day begins in the shop's time zone, when it falls due.
  await db.schema
    .createTable('shop_day_runs')
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id').onDelete('cascade'))
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('due_at', 'timestamptz', (c) => c.notNull())
    .addPrimaryKeyConstraint('shop_day_runs_pkey', ['shop_id', 'kind'])
    .execute();
  await db.schema.createIndex('shop_day_runs_due_idx').on('shop_day_runs').columns(['kind', 'due_at']).execute();
  // A day's birthdays of a shop, by month and day ('MM-DD'), without reading its other customers.
  await sql`create index customers_birthday_idx on customers (shop_id, right(birthday, 5)) where birthday is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index customers_birthday_idx`.execute(db);
  await db.schema.dropTable('shop_day_runs').execute();
}

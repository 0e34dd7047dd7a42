// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // Bumped by every change to what an order earns (place_order rules, currency, pendingDays): an
  // instance that cached the shop's program writes orders with it only while the version matches.
  await db.schema.alterTable('shops').addColumn('program_version', 'integer', (c) => c.notNull().defaultTo(sql`0`)).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('shops').dropColumn('program_version').execute();
}

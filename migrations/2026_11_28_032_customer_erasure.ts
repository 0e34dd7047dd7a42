// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 37, item 3: an erased customer stays as a tombstone (its ledger, orders and codes still add
 * up) whose e-mail, shop customer id and birthday are replaced; erased_at says it is one.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table customers add column erased_at timestamptz`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table customers drop column erased_at`.execute(db);
}

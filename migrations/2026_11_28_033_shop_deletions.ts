// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 37, item 5: a shop's deletion, requested with a grace period and done by the scheduler in
 * batches; next_table is where the batches have got to in the list of the shop's tables. No foreign
 * key to shops: the row outlives the shop as the record that it was deleted.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table shop_deletions (
      shop_id text primary key,
      requested_at timestamptz not null,
      due_at timestamptz not null,
      reason text not null,
      cancelled_at timestamptz,
      completed_at timestamptz,
      rows_deleted bigint not null default 0,
      next_table integer not null default 0
    )`.execute(db);
  // The scheduler's probe: only deletions still to do.
  await sql`create index shop_deletions_due on shop_deletions (due_at) where cancelled_at is null and completed_at is null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table shop_deletions`.execute(db);
}

// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // DESIGN.md "Scheduled and background work: every row fails alone": one table for every kind of
  // due work (a Shopify webhook, a pending row, a customer's expiry, a shop's day run, ...). An
  // item that failed waits here for its next try, or is set aside (set_aside_at) after the last;
  // the kinds' claims skip what waits. Rows exist only for failures: the table stays small.
  await sql`
    create table due_work_failures (
      kind text not null,
      item text not null,
      shop_id text not null references shops (id) on delete cascade,
      attempts int not null,
      reason text not null,
      first_failed_at timestamptz not null,
      last_failed_at timestamptz not null,
      next_attempt_at timestamptz not null,
      set_aside_at timestamptz,
      primary key (kind, item)
    )`.execute(db);
  // A shop's failures (the retry command, the shop's deletion).
  await sql`create index due_work_failures_shop_idx on due_work_failures (shop_id, kind)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table due_work_failures`.execute(db);
}

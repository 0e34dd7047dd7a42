// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 34, item 5: a shop's history brought from Shopify by bulk operations
 * (`npm run cli -- shopify import --since DATE`). One row per shop: the import under way or the last
 * one. `phase` says which bulk operation is being read (customers, then orders); its id, result URL
 * and object count are kept as soon as Shopify gives them, and `lines_applied` is committed with
 * each batch of lines applied, so a run killed at any point resumes from the line it reached.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table shopify_imports (
      shop_id text primary key references shops (id) on delete cascade,
      since timestamptz not null,
      phase text not null check (phase in ('customers', 'orders', 'done')),
      bulk_operation_id text,
      result_url text,
      object_count integer,
      lines_applied integer not null default 0,
      customers_applied integer not null default 0,
      orders_applied integer not null default 0,
      orders_skipped integer not null default 0,
      started_at timestamptz not null default now(),
      finished_at timestamptz,
      error text
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table shopify_imports`.execute(db);
}

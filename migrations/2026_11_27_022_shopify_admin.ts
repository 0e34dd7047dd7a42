// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 34: the Admin API side of the Shopify connector (DESIGN.md "Shopify, the Admin side").
 * - shopify_admin_connections: how the service signs in to a shop's store, an Admin API access
 *   token or a Dev Dashboard app's client id and secret (client-credentials grant, whose token,
 *   renewed before it lapses, is kept here too); secrets sealed; the scopes Shopify granted.
 * - shopify_webhook_registrations: each topic's subscription in Shopify, as the connection shows it.
 * - shopify_sync_jobs: everything we tell Shopify, queued per shop (one job per shop, kind and
 *   subject), claimed by leases, retried with backoff, and kept as failed with Shopify's reason.
 * - discount_codes.shopify_*: a code's sync state and its id in Shopify; pending from its insert
 *   when its shop is connected.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table shopify_admin_connections (
      shop_id text primary key references shops (id) on delete cascade,
      auth text not null check (auth in ('access_token', 'client_credentials')),
      access_token text,
      client_id text,
      client_secret text,
      token_expires_at timestamptz,
      scopes jsonb not null default '[]',
      connected_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create table shopify_webhook_registrations (
      shop_id text not null references shops (id) on delete cascade,
      topic text not null,
      state text not null check (state in ('pending', 'registered', 'failed')),
      shopify_id text,
      error text,
      updated_at timestamptz not null default now(),
      primary key (shop_id, topic)
    )`.execute(db);
  await sql`
    create table shopify_sync_jobs (
      id text primary key,
      shop_id text not null references shops (id) on delete cascade,
      kind text not null,
      subject text not null default '',
      due_at timestamptz not null default now(),
      attempts integer not null default 0,
      last_error text,
      failed_at timestamptz,
      created_at timestamptz not null default now(),
      unique (shop_id, kind, subject)
    )`.execute(db);
  // Claims read a shop's due jobs in order; failed jobs wait for the shop (or the CLI) and leave the index.
  await sql`create index shopify_sync_jobs_due_idx on shopify_sync_jobs (shop_id, due_at) where failed_at is null`.execute(db);
  await sql`
    alter table discount_codes
      add column shopify_sync text check (shopify_sync in ('pending', 'synced', 'failed')),
      add column shopify_id text,
      add column shopify_error text`.execute(db);
  // A code of a shop connected to the Admin API is pending from its first moment, in the
  // transaction that issues it (its creation job follows from the outbox): never shown as not synced.
  await sql`
    create function discount_codes_shopify_pending() returns trigger language plpgsql as $$
    begin
      if exists (select 1 from shopify_admin_connections where shop_id = new.shop_id) then
        new.shopify_sync := 'pending';
      end if;
      return new;
    end $$`.execute(db);
  await sql`
    create trigger discount_codes_shopify_pending before insert on discount_codes
    for each row execute function discount_codes_shopify_pending()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger discount_codes_shopify_pending on discount_codes`.execute(db);
  await sql`drop function discount_codes_shopify_pending()`.execute(db);
  await sql`alter table discount_codes drop column shopify_sync, drop column shopify_id, drop column shopify_error`.execute(db);
  await sql`drop table shopify_sync_jobs`.execute(db);
  await sql`drop table shopify_webhook_registrations`.execute(db);
  await sql`drop table shopify_admin_connections`.execute(db);
}

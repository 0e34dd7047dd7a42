// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // DESIGN.md "Storefront access": the origins whose pages may call /storefront/graphql for the
  // shop. A preflight carries no token, so it is answered for an origin some shop allows: the
  // GIN index finds one without a scan.
  await sql`alter table shops add column storefront_origins text[] not null default '{}'`.execute(db);
  await sql`create index shops_storefront_origins_idx on shops using gin (storefront_origins)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index shops_storefront_origins_idx`.execute(db);
  await sql`alter table shops drop column storefront_origins`.execute(db);
}

// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // DESIGN.md "Storefront access": a token for one customer, minted by the shop's backend, short-lived
  // and revocable. Stored as a SHA-256 hash, found by its public prefix (as API keys are); a deleted
  // customer takes their tokens along.
  await sql`
    create table customer_access_tokens (
      id text primary key,
      shop_id text not null references shops (id),
      customer_id text not null references customers (id) on delete cascade,
      prefix text not null unique,
      token_hash text not null,
      expires_at timestamptz not null,
      revoked_at timestamptz,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index customer_access_tokens_customer_idx on customer_access_tokens (customer_id)`.execute(db);
  // The retention loop deletes tokens a day after they expired (revoked ones expire too, within 24 h).
  await sql`create index customer_access_tokens_expires_idx on customer_access_tokens (expires_at, id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table customer_access_tokens`.execute(db);
}

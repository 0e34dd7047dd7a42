// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // DESIGN.md "The staff console": a person is one account by e-mail (lower-cased) with one
  // password hash (argon2id, its salt and parameters inside the string); memberships give them a
  // role in each shop they work for.
  await sql`
    create table staff_accounts (
      id text primary key,
      email text not null unique,
      name text not null,
      password_hash text not null,
      created_at timestamptz not null default now(),
      password_changed_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create table staff_memberships (
      shop_id text not null references shops (id),
      staff_id text not null references staff_accounts (id) on delete cascade,
      role text not null check (role in ('owner', 'program_manager', 'support', 'viewer')),
      created_at timestamptz not null default now(),
      primary key (shop_id, staff_id)
    )`.execute(db);
  await sql`create index staff_memberships_staff_idx on staff_memberships (staff_id)`.execute(db);
  // A session is signed in to one shop; its cookie's token is stored as a SHA-256 only. Removal
  // from the shop deletes its sessions (the foreign key to the membership).
  await sql`
    create table staff_sessions (
      id text primary key,
      token_hash text not null unique,
      shop_id text not null,
      staff_id text not null,
      created_at timestamptz not null default now(),
      last_seen_at timestamptz not null,
      expires_at timestamptz not null,
      foreign key (shop_id, staff_id) references staff_memberships (shop_id, staff_id) on delete cascade
    )`.execute(db);
  await sql`create index staff_sessions_staff_idx on staff_sessions (staff_id)`.execute(db);
  // The retention loop deletes sessions past their age, and links past their end, along these.
  await sql`create index staff_sessions_expires_idx on staff_sessions (expires_at, id)`.execute(db);
  // One-time links: an invite (to an e-mail, with a role, in a shop) or a password reset (of an
  // account). Stored as a SHA-256; used once (used_at), and only until expires_at.
  await sql`
    create table staff_link_tokens (
      id text primary key,
      token_hash text not null unique,
      kind text not null check (kind in ('invite', 'reset')),
      shop_id text not null references shops (id),
      email text,
      role text check (role in ('owner', 'program_manager', 'support', 'viewer')),
      staff_id text references staff_accounts (id) on delete cascade,
      expires_at timestamptz not null,
      used_at timestamptz,
      created_at timestamptz not null default now()
    )`.execute(db);
  await sql`create index staff_link_tokens_expires_idx on staff_link_tokens (expires_at, id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table staff_link_tokens`.execute(db);
  await sql`drop table staff_sessions`.execute(db);
  await sql`drop table staff_memberships`.execute(db);
  await sql`drop table staff_accounts`.execute(db);
}

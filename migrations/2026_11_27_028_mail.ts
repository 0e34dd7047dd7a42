// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 36: e-mails to customers through the shop's own SMTP server.
 * - shop_mail_settings: the server (its password sealed like webhook secrets), the sender, the
 *   switch for the whole shop and the kinds it sends.
 * - mail_messages: one row per (source, customer, kind), unique, so an e-mail is queued once
 *   whoever relays its event; the row is its queue entry (due_at, a lease while it is sent) and
 *   its record (status, attempts, last error, sent_at, the server's message id).
 * - mail_preferences: a customer's consent (unsubscribed_at), set by the unsubscribe link.
 * - mail_suppressions: addresses the shop's server refused permanently (5xx): never mailed again.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table shop_mail_settings (
      shop_id text primary key references shops (id) on delete cascade,
      enabled boolean not null default false,
      smtp_host text not null default '',
      smtp_port integer not null default 587 check (smtp_port between 1 and 65535),
      smtp_security text not null default 'starttls' check (smtp_security in ('tls', 'starttls', 'none')),
      smtp_user text,
      smtp_password_sealed text,
      from_name text not null default '',
      from_address text not null default '',
      kinds text[] not null default '{reward_issued,points_earned}',
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create table mail_messages (
      id text primary key,
      shop_id text not null references shops (id) on delete cascade,
      customer_id text not null references customers (id) on delete cascade,
      kind text not null,
      source text not null,
      data jsonb not null default '{}',
      status text not null default 'queued' check (status in ('queued', 'sent', 'failed', 'suppressed', 'skipped')),
      due_at timestamptz,
      attempts integer not null default 0,
      last_error text,
      to_address text,
      message_id text,
      sent_at timestamptz,
      created_at timestamptz not null default now(),
      updated_at timestamptz not null default now(),
      unique (source, customer_id, kind)
    )`.execute(db);
  // The queue: only rows with something due are in it.
  await sql`create index mail_messages_due_idx on mail_messages (shop_id, due_at) where due_at is not null`.execute(db);
  await sql`create index mail_messages_customer_idx on mail_messages (customer_id, created_at desc)`.execute(db);
  await sql`
    create table mail_preferences (
      customer_id text primary key references customers (id) on delete cascade,
      shop_id text not null references shops (id) on delete cascade,
      unsubscribed_at timestamptz,
      updated_at timestamptz not null default now()
    )`.execute(db);
  await sql`
    create table mail_suppressions (
      shop_id text not null references shops (id) on delete cascade,
      address text not null,
      reason text not null,
      created_at timestamptz not null default now(),
      primary key (shop_id, address)
    )`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table mail_suppressions`.execute(db);
  await sql`drop table mail_preferences`.execute(db);
  await sql`drop table mail_messages`.execute(db);
  await sql`drop table shop_mail_settings`.execute(db);
}

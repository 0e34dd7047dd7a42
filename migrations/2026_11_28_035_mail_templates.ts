// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 36, the rest of items 2-4:
 * - mail_templates: a shop's own subject and body for a kind of e-mail (none: the built-in one).
 * - shop_mail_settings.locale: the language dates and numbers are written in (null: English);
 *   customers have no locale of their own, so mail_preferences.locale overrides it per customer.
 * - mail_preferences.kinds_off: the kinds a customer opted out of, beside unsubscribing from all.
 * - mail_messages_settled_idx: the retention purge's walk over settled e-mails, oldest first.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table mail_templates (
      shop_id text not null references shops (id) on delete cascade,
      kind text not null,
      subject text not null,
      body text not null,
      updated_at timestamptz not null default now(),
      primary key (shop_id, kind)
    )`.execute(db);
  await sql`alter table shop_mail_settings add column locale text`.execute(db);
  await sql`alter table mail_preferences add column locale text`.execute(db);
  await sql`alter table mail_preferences add column kinds_off text[] not null default '{}'`.execute(db);
  await sql`create index mail_messages_settled_idx on mail_messages (updated_at, id) where due_at is null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index mail_messages_settled_idx`.execute(db);
  await sql`alter table mail_preferences drop column kinds_off`.execute(db);
  await sql`alter table mail_preferences drop column locale`.execute(db);
  await sql`alter table shop_mail_settings drop column locale`.execute(db);
  await sql`drop table mail_templates`.execute(db);
}

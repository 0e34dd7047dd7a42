// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 35, item 4: every change by a person or an API key, with who, when, what and the values
 * before and after, written in the change's own transaction (src/domain/audit). actor_label keeps
 * the e-mail or the key's prefix as it was, so a row still says who after the actor is removed
 * (hence no foreign key to them). Rows go after the shop's audit_retention_days (due-work kind
 * audit_purge).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table audit_log (
      id text primary key,
      shop_id text not null references shops (id),
      at timestamptz not null,
      actor_kind text not null check (actor_kind in ('staff', 'api_key')),
      actor_id text not null,
      actor_label text not null,
      kind text not null,
      subject_type text,
      subject_id text,
      before jsonb,
      after jsonb
    )`.execute(db);
  // Keyset pages newest first (and the purge's range of a shop's oldest rows), then the same
  // pages filtered by actor or by kind, each an index range.
  await sql`create index audit_log_page_idx on audit_log (shop_id, at desc, id desc)`.execute(db);
  await sql`create index audit_log_actor_idx on audit_log (shop_id, actor_id, at desc, id desc)`.execute(db);
  await sql`create index audit_log_kind_idx on audit_log (shop_id, kind, at desc, id desc)`.execute(db);
  await sql`alter table shops add column audit_retention_days int not null default 365 check (audit_retention_days between 7 and 3650)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`alter table shops drop column audit_retention_days`.execute(db);
  await sql`drop table audit_log`.execute(db);
}

// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 38, item 5: the storefront's first view read the shop's rewards in a statement of its
 * own, about as dear as a whole customer lookup, though they change only when staff change them.
 * Each instance now keeps a shop's pages of rewards while the shop's rewards_version is the one
 * its customer's statement read: every write of points_redemptions bumps it, in its transaction,
 * by this trigger (so no write path can forget it).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`alter table shops add column rewards_version bigint not null default 0`.execute(db);
  await sql`
    create function points_redemptions_version() returns trigger language plpgsql as $$
    begin
      update shops set rewards_version = rewards_version + 1 where id = case tg_op when 'DELETE' then old.shop_id else new.shop_id end;
      return null;
    end $$`.execute(db);
  await sql`
    create trigger points_redemptions_version after insert or update or delete on points_redemptions
    for each row execute function points_redemptions_version()`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop trigger points_redemptions_version on points_redemptions`.execute(db);
  await sql`drop function points_redemptions_version()`.execute(db);
  await sql`alter table shops drop column rewards_version`.execute(db);
}

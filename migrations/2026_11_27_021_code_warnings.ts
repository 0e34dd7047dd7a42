// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 33, item 3: a code's warning is due from a moment that depends on its shop (its
 * code_warning_days and time zone), so the code_warnings kind reads per shop that warns: the
 * shop's codes still to warn, by expiry. Warned and ended codes leave the index, so a pass reads
 * the codes due and no more, however many wait.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create index discount_codes_warning_idx on discount_codes (shop_id, expires_at)
    where status = 'issued' and warned_at is null and expires_at is not null`.execute(db);
  await sql`create index shops_code_warnings_idx on shops (id) where code_warning_days > 0`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index shops_code_warnings_idx`.execute(db);
  await sql`drop index discount_codes_warning_idx`.execute(db);
}

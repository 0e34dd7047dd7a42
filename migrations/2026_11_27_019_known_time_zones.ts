// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 31, item 2: settings used to take any zone Intl knows, and some PostgreSQL does not
 * (US/Pacific-New, Canada/East-Saskatchewan). A shop holding one has every write refused in SQL,
 * where its days are computed. Such a zone becomes the one Intl resolves it to (its canonical
 * name: America/Los_Angeles, America/Regina) when PostgreSQL knows that, else UTC: a program
 * that works, in place of one whose every write fails.
 */
export async function up(db: Kysely<any>): Promise<void> {
  const { rows } = await sql<{ id: string; timezone: string }>`
    select id, timezone from shops s where not exists (select 1 from pg_timezone_names z where z.name = s.timezone)`.execute(db);
  for (const shop of rows) {
    let canonical = 'UTC';
    try {
      canonical = new Intl.DateTimeFormat('en', { timeZone: shop.timezone }).resolvedOptions().timeZone;
    } catch {
      // Not a zone at all: UTC.
    }
    const known = await sql<{ name: string }>`select name from pg_timezone_names where name = ${canonical}`.execute(db);
    await sql`update shops set timezone = ${known.rows.length ? canonical : 'UTC'} where id = ${shop.id}`.execute(db);
  }
}

export async function down(): Promise<void> {
  // The zones it replaced were the ones that failed every write: nothing to restore.
}

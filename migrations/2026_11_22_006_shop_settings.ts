// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // Per-shop override of WEBHOOK_RETENTION_DAYS: finished delivery records of this shop older than
  // this many days are purged. Null means the server default. Bounds on the value are the
  // application's to choose; the database only refuses nonsense.
  await db.schema
    .alterTable('shops')
    .addColumn('webhook_retention_days', 'integer', (c) => c.check(sql`webhook_retention_days > 0`))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('shops').dropColumn('webhook_retention_days').execute();
}

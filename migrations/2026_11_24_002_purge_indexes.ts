// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // The retention purge walks deliveries with nothing due, oldest first, after the last (created_at,
  // id) it read: rows still due are not in this index, so the purge never reads them, and the id
  // orders the many rows one relay batch creates in the same millisecond. It replaces the index on
  // created_at alone, which only the purge used.
  await sql`create index webhook_deliveries_purge_idx on webhook_deliveries (created_at, id) where due_at is null`.execute(db);
  await sql`drop index webhook_deliveries_created_idx`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`create index webhook_deliveries_created_idx on webhook_deliveries (created_at)`.execute(db);
  await sql`drop index webhook_deliveries_purge_idx`.execute(db);
}

// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // Set when the relay has handed the event on (webhook fan-out, live bus). The partial index keeps
  // "what is still to relay" cheap however long the outbox grows.
  await db.schema.alterTable('outbox_events').addColumn('relayed_at', sql`timestamptz(3)`).execute();
  await sql`create index outbox_events_unrelayed_idx on outbox_events (seq) where relayed_at is null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index outbox_events_unrelayed_idx`.execute(db);
  await db.schema.alterTable('outbox_events').dropColumn('relayed_at').execute();
}

// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // What the delivery worker needs on top of migration 003's listing shape.
  //   payload:            the envelope exactly as signed and sent (minified JSON text, byte for byte)
  //   due_at:             when a worker should next pick the row up: the next scheduled attempt, "now"
  //                       for a replay, or the lease expiry while sending; null when nothing is due
  //   next_attempt_at:    the next *scheduled* attempt (null once succeeded, failed or cancelled)
  //   scheduled_attempts: how far along the retry schedule it is; attempt_count also counts replays
  //   lease_token:        the claim of the worker sending it; its finish only applies while it holds it
  //   replay_requested:   a manual attempt is waiting; current_trigger is what the claimed attempt is
  //   status_before_send: the status to hand back if a stopping worker gives the row up unsent
  await db.schema
    .alterTable('webhook_deliveries')
    .addColumn('payload', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('due_at', sql`timestamptz(3)`)
    .addColumn('next_attempt_at', sql`timestamptz(3)`)
    .addColumn('attempt_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('scheduled_attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('last_attempt_at', sql`timestamptz(3)`)
    .addColumn('last_response_status', 'integer')
    .addColumn('last_error', 'text')
    .addColumn('lease_token', 'text')
    .addColumn('replay_requested', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('current_trigger', 'text', (c) => c.notNull().defaultTo('scheduled').check(sql`current_trigger in ('scheduled', 'manual')`))
    .addColumn('status_before_send', 'text')
    .execute();
  await sql`create unique index webhook_deliveries_event_subscription_key on webhook_deliveries (event_id, subscription_id)`.execute(db);
  // The worker's queue: only rows with something due are in it.
  await sql`create index webhook_deliveries_due_idx on webhook_deliveries (due_at) where due_at is not null`.execute(db);
  await sql`create index webhook_deliveries_subscription_idx on webhook_deliveries (subscription_id, created_at desc, id desc)`.execute(db);
  // Retention purges by age.
  await sql`create index webhook_deliveries_created_idx on webhook_deliveries (created_at)`.execute(db);

  // One row per attempt, scheduled or manual; purged with its delivery.
  await db.schema
    .createTable('webhook_delivery_attempts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('delivery_id', 'text', (c) => c.notNull().references('webhook_deliveries.id').onDelete('cascade'))
    .addColumn('attempted_at', sql`timestamptz(3)`, (c) => c.notNull())
    .addColumn('trigger', 'text', (c) => c.notNull().check(sql`trigger in ('scheduled', 'manual')`))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('response_status', 'integer')
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('response_body', 'text')
    .execute();
  await sql`create index webhook_delivery_attempts_delivery_idx on webhook_delivery_attempts (delivery_id, attempted_at, id)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('webhook_delivery_attempts').execute();
  for (const index of ['webhook_deliveries_created_idx', 'webhook_deliveries_subscription_idx', 'webhook_deliveries_due_idx', 'webhook_deliveries_event_subscription_key']) {
    await sql`drop index ${sql.ref(index)}`.execute(db);
  }
  await db.schema
    .alterTable('webhook_deliveries')
    .dropColumn('payload')
    .dropColumn('due_at')
    .dropColumn('next_attempt_at')
    .dropColumn('attempt_count')
    .dropColumn('scheduled_attempts')
    .dropColumn('last_attempt_at')
    .dropColumn('last_response_status')
    .dropColumn('last_error')
    .dropColumn('lease_token')
    .dropColumn('replay_requested')
    .dropColumn('current_trigger')
    .dropColumn('status_before_send')
    .execute();
}

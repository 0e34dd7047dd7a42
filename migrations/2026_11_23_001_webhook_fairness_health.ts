// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // Endpoint health (DESIGN.md "Tenant isolation"):
  //   status:               enabled; probing (one attempt in flight at a time, after several
  //                         consecutive failures) until a success; disabled (nothing attempted, the
  //                         deliveries are kept) after failing without a success for days
  //   consecutive_failures: failed attempts since the last success
  //   failing_since:        the first of those failures; null while the last attempt succeeded
  //   disabled_reason:      why it was disabled; null unless disabled
  await db.schema
    .alterTable('webhook_subscriptions')
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('enabled').check(sql`status in ('enabled', 'probing', 'disabled')`))
    .addColumn('consecutive_failures', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('failing_since', sql`timestamptz(3)`)
    .addColumn('disabled_reason', 'text')
    .execute();
  // Fair claims walk each subscription's due rows oldest first, and count its attempts in flight.
  // This replaces the queue's index on due_at alone: with both, the planner would walk the whole
  // queue in due_at order filtering for one subscription, past another endpoint's whole backlog.
  await sql`create index webhook_deliveries_subscription_due_idx on webhook_deliveries (subscription_id, due_at) where due_at is not null`.execute(db);
  await sql`create index webhook_deliveries_sending_idx on webhook_deliveries (subscription_id, due_at) where status = 'sending'`.execute(db);
  await sql`drop index webhook_deliveries_due_idx`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`create index webhook_deliveries_due_idx on webhook_deliveries (due_at) where due_at is not null`.execute(db);
  await sql`drop index webhook_deliveries_sending_idx`.execute(db);
  await sql`drop index webhook_deliveries_subscription_due_idx`.execute(db);
  await db.schema
    .alterTable('webhook_subscriptions')
    .dropColumn('status')
    .dropColumn('consecutive_failures')
    .dropColumn('failing_since')
    .dropColumn('disabled_reason')
    .execute();
}

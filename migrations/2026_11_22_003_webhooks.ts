// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // Per-shop override of the configurable rate limit (points, redemptions, referrals, GraphQL);
  // null means the server default (RATE_LIMIT_PER_MINUTE).
  await db.schema
    .alterTable('shops')
    .addColumn('rate_limit_per_minute', 'integer', (c) => c.check(sql`rate_limit_per_minute > 0`))
    .execute();

  await db.schema
    .createTable('webhook_subscriptions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id'))
    .addColumn('topic', 'text', (c) => c.notNull())
    .addColumn('callback_url', 'text', (c) => c.notNull())
    .addColumn('previous_secret_valid_until', sql`timestamptz(3)`)
    .addColumn('created_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('webhook_subscriptions_shop_topic_url_key', ['shop_id', 'topic', 'callback_url'])
    .execute();
  await sql`create index webhook_subscriptions_shop_created_idx on webhook_subscriptions (shop_id, created_at desc, id desc)`.execute(db);

  // Signing secrets, AES-256-GCM sealed. The current one has expires_at null; secrets rotated out
  // stay valid until expires_at. Deleting the subscription deletes them.
  await db.schema
    .createTable('webhook_secrets')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('subscription_id', 'text', (c) => c.notNull().references('webhook_subscriptions.id').onDelete('cascade'))
    .addColumn('sealed_secret', 'text', (c) => c.notNull())
    .addColumn('created_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('expires_at', sql`timestamptz(3)`)
    .execute();
  await sql`create index webhook_secrets_subscription_idx on webhook_secrets (subscription_id, created_at desc)`.execute(db);

  // Delivery records outlive their subscription, so subscription_id is not a foreign key.
  // Only the shape the deliveries routes list; the delivery worker's migration extends it.
  await db.schema
    .createTable('webhook_deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id'))
    .addColumn('subscription_id', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text', (c) => c.notNull())
    .addColumn('topic', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) =>
      c.notNull().check(sql`status in ('pending', 'sending', 'succeeded', 'retrying', 'failed', 'cancelled')`),
    )
    .addColumn('created_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await sql`create index webhook_deliveries_shop_created_idx on webhook_deliveries (shop_id, created_at desc, id desc)`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['webhook_deliveries', 'webhook_secrets', 'webhook_subscriptions']) {
    await db.schema.dropTable(table).execute();
  }
  await db.schema.alterTable('shops').dropColumn('rate_limit_per_minute').execute();
}

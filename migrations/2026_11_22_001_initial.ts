// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('shops')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('created_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  // Keys are stored as SHA-256 hashes; `prefix` is the public part used to find the row.
  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id'))
    .addColumn('prefix', 'text', (c) => c.notNull().unique())
    .addColumn('key_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('revoked_at', sql`timestamptz(3)`)
    .execute();
  await db.schema.createIndex('api_keys_shop_idx').on('api_keys').column('shop_id').execute();

  await db.schema
    .createTable('customers')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id'))
    .addColumn('shopify_customer_id', 'text', (c) => c.notNull())
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('birthday', 'text')
    .addColumn('points', 'bigint', (c) => c.notNull().defaultTo(0).check(sql`points >= 0`))
    .addColumn('created_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('customers_shop_customer_id_key', ['shop_id', 'shopify_customer_id'])
    .execute();
  await sql`create unique index customers_shop_email_key on customers (shop_id, lower(email))`.execute(db);
  await sql`create index customers_shop_email_prefix_idx on customers (shop_id, lower(email) text_pattern_ops, id)`.execute(db);

  // The points ledger: append-only, one row per balance change.
  // `seq` orders a customer's entries exactly: it is drawn after the customer's row lock is taken,
  // whereas created_at (transaction start) can disagree with the order in which changes applied.
  await db.schema
    .createTable('activities')
    .addColumn('seq', 'bigserial', (c) => c.primaryKey())
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id'))
    .addColumn('customer_id', 'text', (c) => c.notNull().references('customers.id'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('setting_type', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    .addColumn('note', 'text')
    .addColumn('old_points', 'bigint', (c) => c.notNull())
    .addColumn('new_points', 'bigint', (c) => c.notNull())
    .addColumn('created_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createIndex('activities_customer_seq_idx')
    .on('activities')
    .columns(['customer_id', 'seq'])
    .execute();

  // Transactional outbox: written in the same transaction as the change it describes.
  await db.schema
    .createTable('outbox_events')
    .addColumn('seq', 'bigserial', (c) => c.primaryKey())
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('data', 'jsonb', (c) => c.notNull())
    .addColumn('created_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .execute();

  await db.schema
    .createTable('idempotency_keys')
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id'))
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('request_hash', 'text', (c) => c.notNull())
    .addColumn('response_status', 'integer')
    .addColumn('response_body', 'text')
    .addColumn('created_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('completed_at', sql`timestamptz(3)`)
    .addPrimaryKeyConstraint('idempotency_keys_pkey', ['shop_id', 'key'])
    .execute();
  await db.schema.createIndex('idempotency_keys_created_idx').on('idempotency_keys').column('created_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['idempotency_keys', 'outbox_events', 'activities', 'customers', 'api_keys', 'shops']) {
    await db.schema.dropTable(table).execute();
  }
}

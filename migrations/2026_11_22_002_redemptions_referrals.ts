// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // Ways to redeem points (the contract's "points redemption"). Array fields are jsonb lists of ids.
  await db.schema
    .createTable('points_redemptions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id'))
    .addColumn('status', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('discount_prefix', 'text', (c) => c.notNull())
    .addColumn('exchange_type', 'text', (c) => c.notNull())
    .addColumn('reward_value', 'integer', (c) => c.notNull().check(sql`reward_value > 0`))
    .addColumn('discount_value', sql`numeric(14, 2)`, (c) => c.notNull().check(sql`discount_value >= 0`))
    .addColumn('purchase_type', 'text', (c) => c.notNull())
    .addColumn('apply_product_option', 'text', (c) => c.notNull())
    .addColumn('apply_products', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('apply_collections', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('apply_variants', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('minimum_requirement_type', 'text', (c) => c.notNull())
    .addColumn('minimum_requirement_value', sql`numeric(14, 2)`)
    .addColumn('combinations', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('expire_date_type', 'text', (c) => c.notNull())
    .addColumn('expire_days', 'integer')
    .addColumn('expire_date', sql`timestamptz(3)`)
    .addColumn('sort_index', 'integer', (c) => c.notNull())
    .addColumn('created_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema
    .createIndex('points_redemptions_shop_sort_idx')
    .on('points_redemptions')
    .columns(['shop_id', 'sort_index', 'id'])
    .execute();

  // Codes issued by redemptions. reward_id has no foreign key on purpose: a code outlives the
  // configuration it came from (which may be deleted), and carries its own type and value.
  await db.schema
    .createTable('discount_codes')
    .addColumn('seq', 'bigserial', (c) => c.primaryKey())
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id'))
    .addColumn('customer_id', 'text', (c) => c.notNull().references('customers.id'))
    .addColumn('reward_id', 'text', (c) => c.notNull())
    .addColumn('activity_id', 'text', (c) => c.notNull().references('activities.id'))
    .addColumn('code', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('value', sql`numeric(14, 2)`, (c) => c.notNull())
    .addColumn('currency', 'text')
    .addColumn('variant_id', 'text')
    .addColumn('points_amount', 'integer', (c) => c.notNull())
    .addColumn('expires_at', sql`timestamptz(3)`)
    .addColumn('created_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('discount_codes_shop_code_key', ['shop_id', 'code'])
    .execute();
  await db.schema
    .createIndex('discount_codes_customer_seq_idx')
    .on('discount_codes')
    .columns(['customer_id', 'seq'])
    .execute();

  // One referral code per customer, unique per shop.
  await db.schema
    .createTable('referral_codes')
    .addColumn('customer_id', 'text', (c) => c.primaryKey().references('customers.id'))
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id'))
    .addColumn('code', 'text', (c) => c.notNull())
    .addColumn('created_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addUniqueConstraint('referral_codes_shop_code_key', ['shop_id', 'code'])
    .execute();

  // Who referred whom: a customer has at most one referrer (the unique referee_id).
  await db.schema
    .createTable('referrals')
    .addColumn('seq', 'bigserial', (c) => c.primaryKey())
    .addColumn('id', 'text', (c) => c.notNull().unique())
    .addColumn('shop_id', 'text', (c) => c.notNull().references('shops.id'))
    .addColumn('referee_id', 'text', (c) => c.notNull().unique().references('customers.id'))
    .addColumn('referrer_id', 'text', (c) => c.notNull().references('customers.id'))
    .addColumn('referral_code', 'text', (c) => c.notNull())
    .addColumn('status', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('created_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', sql`timestamptz(3)`, (c) => c.notNull().defaultTo(sql`now()`))
    .addCheckConstraint('referrals_not_self', sql`referee_id <> referrer_id`)
    .execute();
  await db.schema.createIndex('referrals_referrer_seq_idx').on('referrals').columns(['referrer_id', 'seq']).execute();

  // Per-shop referral rewards, granted when a referee signs up; 0 means no reward.
  await db.schema
    .alterTable('shops')
    .addColumn('referral_referrer_points', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('referral_referee_points', 'integer', (c) => c.notNull().defaultTo(0))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('shops').dropColumn('referral_referrer_points').dropColumn('referral_referee_points').execute();
  for (const table of ['referrals', 'referral_codes', 'discount_codes', 'points_redemptions']) {
    await db.schema.dropTable(table).execute();
  }
}

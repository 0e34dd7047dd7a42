// Frozen in time: a migration never imports from src/, so later code changes cannot rewrite history.
import { type Kysely, sql } from 'kysely';

/**
 * Issue 37, item 4: Shopify's compliance webhooks as the shop sees them answered. A data request
 * keeps the customer's export (`document`) for the shop to hand over; an erasure of that customer
 * empties it. `customer_id` is null when the shop did not know the customer.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    create table compliance_requests (
      id text primary key,
      shop_id text not null references shops(id) on delete cascade,
      topic text not null,
      outcome text not null,
      customer_id text references customers(id) on delete cascade,
      shopify_request_id text,
      orders_requested jsonb,
      document jsonb,
      received_at timestamptz not null
    )`.execute(db);
  await sql`create index compliance_requests_shop on compliance_requests (shop_id, received_at desc, id desc)`.execute(db);
  await sql`create index compliance_requests_customer on compliance_requests (customer_id) where customer_id is not null`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop table compliance_requests`.execute(db);
}

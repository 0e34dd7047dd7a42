import { type RawBuilder, sql } from 'kysely';
import { z } from 'zod';
import type { CustomerRow } from '../../db/schema.js';
import type { Queryable, Trx } from '../../db/transaction.js';
import { ConflictError, decodeCursor, encodeCursor, newId, NotFoundError, offsetPageSchema, type Page, type PageArgs, recordEvent } from '../kernel/index.js';

export type Customer = {
  _id: string;
  shopifyCustomerId: string;
  email: string;
  birthday: string | null;
  points: number;
  /** Earned from orders, not spendable until the shop's pendingDays have passed. */
  pendingPoints: number;
  createdAt: Date;
  updatedAt: Date;
};

/** The API's customer. A tombstone shows as its replaced values; erased_at is read by the data-rights export only. */
export function toCustomer(row: Omit<CustomerRow, 'erased_at'>): Customer {
  return {
    _id: row.id,
    shopifyCustomerId: row.shopify_customer_id,
    email: row.email,
    birthday: row.birthday,
    points: row.points,
    pendingPoints: row.pending_points,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

export const customerIdentifierSchema = z.string().trim().min(1).max(320);

export const customerInputSchema = z.strictObject({
  shopifyCustomerId: z.string().trim().min(1).max(64),
  email: z.email().max(320),
  birthday: z.iso.date().nullish(),
});
export type CustomerInput = z.input<typeof customerInputSchema>;

/**
 * What a `customerIdentifier` names: an e-mail when it contains `@` (matched case-insensitively,
 * so given here lowercased), otherwise the shop's own customer id.
 */
export function parseIdentifier(identifier: string): { email: string } | { shopifyCustomerId: string } {
  return identifier.includes('@') ? { email: identifier.toLowerCase() } : { shopifyCustomerId: identifier };
}

/**
 * Names one customer: a `customerIdentifier` as clients give it, or `{ id }`, the customer's own
 * id, as a customer access token carries it (the storefront never names a customer itself).
 */
export type CustomerKey = string | { id: string };

/** The condition naming the customer a `customerIdentifier` (or an id) names. */
export function matchesIdentifier(identifier: CustomerKey): RawBuilder<boolean> {
  if (typeof identifier !== 'string') return sql<boolean>`id = ${identifier.id}`;
  const named = parseIdentifier(identifier);
  return 'email' in named ? sql<boolean>`lower(email) = ${named.email}` : sql<boolean>`shopify_customer_id = ${named.shopifyCustomerId}`;
}

function selectByIdentifier(db: Queryable, shopId: string, identifier: CustomerKey) {
  return db.selectFrom('customers').selectAll().where('shop_id', '=', shopId).where(matchesIdentifier(identifier));
}

export async function findCustomer(db: Queryable, shopId: string, identifier: CustomerKey): Promise<CustomerRow | undefined> {
  return selectByIdentifier(db, shopId, identifier).executeTakeFirst();
}

export async function getCustomer(db: Queryable, shopId: string, identifier: CustomerKey): Promise<CustomerRow> {
  const row = await findCustomer(db, shopId, identifier);
  if (!row) throw customerNotFound(identifier);
  return row;
}

/**
 * Same lookup, taking the row lock that serialises every balance change of this customer.
 * FOR NO KEY UPDATE, not FOR UPDATE: it still excludes other balance changes but not the key-share
 * locks that inserting a row referencing this customer takes, so those cannot deadlock with it.
 */
export async function lockCustomer(db: Queryable, shopId: string, identifier: CustomerKey): Promise<CustomerRow> {
  const row = await selectByIdentifier(db, shopId, identifier).forNoKeyUpdate().executeTakeFirst();
  if (!row) throw customerNotFound(identifier);
  return row;
}

/** The shop's customers with these ids, in their order; null for an id the shop has not. */
export async function customersByIds(db: Queryable, shopId: string, ids: readonly string[]): Promise<Array<Customer | null>> {
  const rows = await db.selectFrom('customers').selectAll().where('shop_id', '=', shopId).where('id', '=', sql<string>`any(${[...ids]}::text[])`).execute();
  const byId = new Map(rows.map((row) => [row.id, toCustomer(row)]));
  return ids.map((id) => byId.get(id) ?? null);
}

/** The query of the contract's per-customer lists (GET /pointsRedemptions, GET /referral/referee). */
export const customerPageQuerySchema = offsetPageSchema.extend({ customerIdentifier: customerIdentifierSchema });

export function customerNotFound(identifier: CustomerKey) {
  // An id comes from a token whose customer was deleted since: no argument of the request named it.
  if (typeof identifier !== 'string') return new NotFoundError('customer_not_found', 'the customer of this token no longer exists');
  return new NotFoundError('customer_not_found', `no customer matches "${identifier}"`, ['customerIdentifier']);
}

/**
 * Creates the customer, or updates e-mail and birthday of the one with that shopifyCustomerId, in
 * the caller's transaction. A sign-up's points are the program's (upsertCustomerIn in
 * src/domain/program), which calls this. A customer imported from a program that knew no shop
 * customer id (Smile.io's export) is keyed by their e-mail; the first id that comes with that
 * e-mail (Shopify's customers/create or an order, a REST call) becomes theirs: the same person,
 * whose balance moved in, not a second customer refused for a taken e-mail.
 */
export async function saveCustomerIn(
  trx: Trx,
  shopId: string,
  data: z.output<typeof customerInputSchema>,
  /** This transaction holds its turn on the new customer already (below). */
  hasTurn = false,
): Promise<{ customer: Customer; created: boolean }> {
  const existing = await trx
    .selectFrom('customers')
    .selectAll()
    .where('shop_id', '=', shopId)
    .where('shopify_customer_id', '=', data.shopifyCustomerId)
    .forUpdate()
    .executeTakeFirst();
  if (!existing && !hasTurn) {
    // Upserts of one new customer take turns: the next waits here for the first's commit, then finds
    // the customer and updates it. Two inserts racing would meet on the e-mail's unique index too,
    // which ON CONFLICT (one arbiter, the shop's customer id) cannot turn into an update.
    await sql`select pg_advisory_xact_lock(hashtextextended(${`${shopId}/${data.shopifyCustomerId}`}, 0))`.execute(trx);
    return saveCustomerIn(trx, shopId, data, true);
  }
  // Under this id's turn: an e-mail-keyed customer takes the id (two ids racing for one such
  // customer: the second finds it keyed by the first's id, and is refused for the e-mail below).
  const found = existing ?? (await trx
    .selectFrom('customers')
    .selectAll()
    .where('shop_id', '=', shopId)
    .where(sql<string>`lower(email)`, '=', data.email.toLowerCase())
    .where('shopify_customer_id', '=', data.email.toLowerCase())
    .forUpdate()
    .executeTakeFirst());
  try {
    if (found) {
      const row = await trx
        .updateTable('customers')
        .set({
          shopify_customer_id: data.shopifyCustomerId,
          email: data.email,
          birthday: data.birthday === undefined ? found.birthday : data.birthday,
          updated_at: new Date(),
        })
        .where('id', '=', found.id)
        .returningAll()
        .executeTakeFirstOrThrow();
      const customer = toCustomer(row);
      await recordEvent(trx, shopId, 'customers/updated', customer);
      return { customer, created: false };
    }
    const row = await trx
      .insertInto('customers')
      .values({
        id: newId(),
        shop_id: shopId,
        shopify_customer_id: data.shopifyCustomerId,
        email: data.email,
        birthday: data.birthday ?? null,
      })
      // Another request created this customer since the read above (two Shopify webhooks of one new
      // customer, applied by two instances): the insert waited for it, and the upsert is now an update.
      .onConflict((oc) => oc.columns(['shop_id', 'shopify_customer_id']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (!row) return saveCustomerIn(trx, shopId, data, true);
    const customer = toCustomer(row);
    await recordEvent(trx, shopId, 'customers/created', customer);
    return { customer, created: true };
  } catch (err) {
    throw translateUniqueViolation(err);
  }
}

/** Maps the database's unique-constraint failures on customers to domain conflicts. */
export function translateUniqueViolation(err: unknown): unknown {
  const e = err as { code?: string; constraint?: string; message?: string };
  if (e?.code !== '23505') return err;
  const text = `${e.constraint ?? ''} ${e.message ?? ''}`;
  if (text.includes('customers_shop_email_key')) {
    return new ConflictError('email_taken', 'another customer of this shop has that e-mail', ['email']);
  }
  if (text.includes('customers_shop_customer_id_key')) {
    return new ConflictError('customer_exists', 'a customer with that shopifyCustomerId exists', ['shopifyCustomerId']);
  }
  return err;
}

/**
 * Customers ordered by lower-cased e-mail in byte order ("C" collation, whatever the database's),
 * optionally those whose e-mail starts with `emailPrefix`: one index serves both the order and the
 * prefix, which is a range of that order.
 */
export async function listCustomers(
  db: Queryable,
  shopId: string,
  args: PageArgs & { emailPrefix?: string | null | undefined },
): Promise<Page<Customer>> {
  const emailKey = sql<string>`(lower(email) collate "C")`;
  let query = db.selectFrom('customers').selectAll().select(emailKey.as('email_key')).where('shop_id', '=', shopId);
  if (args.emailPrefix) {
    const [from, to] = prefixRange(args.emailPrefix.toLowerCase());
    query = query.where(emailKey, '>=', from);
    if (to !== null) query = query.where(emailKey, '<', to);
  }
  if (args.after) {
    const [email = '', id = ''] = decodeCursor(args.after, 2);
    query = query.where(sql<boolean>`(${emailKey}, id) > (${email}, ${id})`);
  }
  const rows = await query
    .orderBy(emailKey)
    .orderBy('id')
    .limit(args.first + 1)
    .execute();
  const items = rows.slice(0, args.first).map((row) => ({
    node: toCustomer(row),
    cursor: encodeCursor([row.email_key, row.id]),
  }));
  return { items, hasNextPage: rows.length > args.first };
}

/**
 * The strings starting with `prefix`, as a range of code-point (= UTF-8 byte) order: from the
 * prefix to the prefix with its last character's successor; null when nothing can follow it.
 */
export function prefixRange(prefix: string): [string, string | null] {
  const chars = [...prefix];
  const last = chars.pop()!.codePointAt(0)!;
  // Skip the surrogate block: its code points cannot be sent as text.
  const next = last + 1 === 0xd800 ? 0xe000 : last + 1;
  return [prefix, next > 0x10ffff ? null : chars.join('') + String.fromCodePoint(next)];
}

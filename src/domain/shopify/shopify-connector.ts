import { isUtf8 } from 'node:buffer';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { type Insertable, type RawBuilder, sql, type SqlBool } from 'kysely';
import { z } from 'zod';
import type { DB } from '../../db/database.js';
import { GROUP_COMMIT, groupCommit } from '../../db/group-commit.js';
import { lastTimeKey, purgeInBatches, type PurgeOptions, type TimeKey } from '../../db/purge.js';
import type { ShopifyInboxRow, ShopifyInboxTable } from '../../db/schema.js';
import { inTransaction, type Queryable, type Trx } from '../../db/transaction.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { customerInputSchema } from '../customers/index.js';
import { ConflictError, decodeCursor, DomainError, type DueWork, encodeCursor, failedItems, type FailingItems, failingItems, invalidCursor, newId, NotFoundError, type Page, type PageArgs, parseInput, pathToUnstorable, retrySetAside, RuleViolationError, runClaimed, type SecretBox, UnauthenticatedError, UNSTORABLE_MESSAGE, validationErrorFrom } from '../kernel/index.js';
import { upsertOrder } from '../orders/index.js';
import { upsertCustomerIn } from '../program/index.js';
import { adminConnected, collectionsForOrder, forgetCollection, knownCollections, forgetProduct, refreshProductCollections, requestCollectionsReconcile } from './product-collections.js';
import {
  customerInput, orderProductIds, orderPut, parseShopifyCompliance, parseShopifyCustomer, parseShopifyJson, parseShopifyOrder, parseShopifyRefund, parseShopifyResource,
  type ShopifyComplianceRequest, type ShopifyCustomer, type ShopifyOrder, type ShopifyRefund,
} from './shopify-payloads.js';

/**
 * The Shopify connector (DESIGN.md "Shopify connector"): Shopify's webhooks in, the same domain
 * calls out. A webhook is authenticated (HMAC of its raw body with the shop's secret), stored in an
 * inbox (committed before Shopify gets its 200) and applied after by the scheduler, so a slow or
 * failing apply never makes Shopify wait or retry, and a crash between the two loses nothing.
 */

export const SHOPIFY_TOPICS = [
  'orders/create', 'orders/paid', 'orders/updated', 'orders/cancelled', 'refunds/create', 'customers/create', 'customers/update',
  // Which collections products are in (product-collections.ts), for earning rules' collection lists.
  'products/create', 'products/update', 'products/delete', 'collections/update', 'collections/delete',
] as const;
/**
 * Shopify's mandatory compliance webhooks (docs/data-rights.md): set in the app's configuration, not
 * registered per shop, and answered by capabilities above this one (ComplianceAnswer).
 */
export const SHOPIFY_COMPLIANCE_TOPICS = ['customers/data_request', 'customers/redact', 'shop/redact'] as const;
const ACCEPTED_TOPICS: readonly string[] = [...SHOPIFY_TOPICS, ...SHOPIFY_COMPLIANCE_TOPICS];

/**
 * Answers a compliance webhook inside the transaction that marks it applied. Given at composition
 * (src/app.ts): the answers (an export, an erasure, the shop's deletion) belong to data-rights,
 * which itself imports this capability.
 */
export type ComplianceAnswer = (trx: Trx, shopId: string, request: ShopifyComplianceRequest, now: Date) => Promise<void>;

/** Shopify retries a failed delivery for 48 hours; anything triggered longer ago is a replay. */
export const SHOPIFY_REPLAY_WINDOW_MS = 72 * 60 * 60 * 1000;
/**
 * Processed webhooks are kept this long: past Shopify's 48 hours of retries and our 72-hour replay
 * window, so a redelivery is still recognised by its id; what they said of orders stays in shopify_orders.
 */
export const SHOPIFY_INBOX_RETENTION_DAYS = 7;

// --- the shop's connection -----------------------------------------------------------------------

export type ShopifyConnection = { shopDomain: string | null; webhookSecretSet: boolean };

const shopDomainSchema = z
  .string()
  .trim()
  .toLowerCase()
  .regex(/^[a-z0-9][a-z0-9-]*\.myshopify\.com$/, 'the shop\'s myshopify.com domain, such as my-shop.myshopify.com');

export const shopifyConnectionInputSchema = z.strictObject({
  shopDomain: shopDomainSchema,
  /** The app's client secret (or the webhook signing secret Shopify shows); omitted keeps the stored one. */
  webhookSecret: z.string().min(8).max(512).optional(),
});

export async function getShopifyConnection(db: Queryable, shopId: string): Promise<ShopifyConnection> {
  const row = await db.selectFrom('shops').select(['shopify_domain', 'shopify_webhook_secret']).where('id', '=', shopId).executeTakeFirstOrThrow();
  return { shopDomain: row.shopify_domain, webhookSecretSet: row.shopify_webhook_secret !== null };
}

/** Connects the shop to its Shopify store; the secret is sealed (SecretBox) and never shown again. */
export async function setShopifyConnection(db: DB, secrets: SecretBox, shopId: string, input: unknown, actor?: Actor): Promise<ShopifyConnection> {
  const data = parseInput(shopifyConnectionInputSchema, input);
  const changes = {
    shopify_domain: data.shopDomain,
    // The first connection is when the program starts for Shopify's customers (signUpBonusSince's default).
    shopify_connected_at: sql<Date>`coalesce(shopify_connected_at, now())`,
    ...(data.webhookSecret !== undefined ? { shopify_webhook_secret: secrets.seal(data.webhookSecret, sealContext(shopId)) } : {}),
  };
  try {
    return await inTransaction(db, async (trx) => {
      // Locked before it is read: the before is the value this change replaces.
      await trx.selectFrom('shops').select('id').where('id', '=', shopId).forUpdate().execute();
      const before = await getShopifyConnection(trx, shopId);
      await trx.updateTable('shops').set(changes).where('id', '=', shopId).execute();
      const after = await getShopifyConnection(trx, shopId);
      // The secret itself never: whether one is set is the change.
      await recordAudit(trx, shopId, actor, { kind: 'shopifySettings.update', subject: { type: 'shop', id: shopId }, before, after });
      return after;
    });
  } catch (err) {
    if ((err as { code?: unknown }).code === '23505') throw new ConflictError('shopify_domain_taken', `${data.shopDomain} is connected to another shop`, ['shopDomain']);
    throw err;
  }
}

const sealContext = (shopId: string) => `shopify-webhook-secret:${shopId}`;

// --- receiving -----------------------------------------------------------------------------------

export type ShopifyDelivery = {
  shopDomain: string;
  topic: string;
  webhookId: string;
  /** Base64 HMAC-SHA256 of the raw body (X-Shopify-Hmac-Sha256). */
  hmac: string;
  /** X-Shopify-Triggered-At, when sent. */
  triggeredAt: Date | null;
  rawBody: Buffer;
};

export type Receipt = { status: 'accepted' | 'duplicate' | 'rejected'; id: string; reason?: string };

/**
 * Authenticates a delivery and stores it; the caller answers Shopify once this resolves (the row
 * is committed). A second delivery of a webhook id is a duplicate and stores nothing. A delivery
 * that is authentic but cannot be applied (a topic we do not handle, a replay from days ago, a body
 * that is not JSON) is stored as rejected, with its reason, for the shop to see. One the database
 * could not store (storableBody) is refused, and stores nothing.
 */
export async function receiveShopifyWebhook(db: DB, secrets: SecretBox, delivery: ShopifyDelivery, now = new Date()): Promise<Receipt> {
  const shop = await db
    .selectFrom('shops')
    .select(['id', 'shopify_webhook_secret'])
    .where('shopify_domain', '=', delivery.shopDomain.trim().toLowerCase())
    .executeTakeFirst();
  // A domain no shop is connected to is answered as a bad signature is, after the same work (a
  // secret opened, the body's HMAC): neither the answer nor its time tells which domains are connected.
  const sealed = shop?.shopify_webhook_secret ? { secret: shop.shopify_webhook_secret, context: sealContext(shop.id) } : { secret: decoySecret(secrets), context: DECOY_CONTEXT };
  const authentic = hmacMatches(secrets.open(sealed.secret, sealed.context), delivery.rawBody, delivery.hmac);
  if (!shop?.shopify_webhook_secret || !authentic) {
    throw new UnauthenticatedError('shopify_signature_invalid', 'X-Shopify-Hmac-Sha256 does not match the body signed with the shop\'s Shopify webhook secret', ['X-Shopify-Hmac-Sha256']);
  }

  const { text, body } = storableBody(delivery.rawBody);
  let reason = rejectionOf(delivery, now);
  if (body === undefined) reason ??= 'the body is not JSON';
  const id = newId();
  const stored = await storeInInbox(db, {
    id,
    shop_id: shop.id,
    webhook_id: delivery.webhookId,
    topic: delivery.topic,
    body: text,
    shopify_order_id: orderIdOf(delivery.topic, body),
    received_at: now,
    next_attempt_at: now,
    ...(reason ? { processed_at: now, error: reason } : {}),
  });
  if (!stored) {
    const first = await db.selectFrom('shopify_inbox').select('id').where('shop_id', '=', shop.id).where('webhook_id', '=', delivery.webhookId).executeTakeFirstOrThrow();
    return { status: 'duplicate', id: first.id };
  }
  return reason ? { status: 'rejected', id, reason } : { status: 'accepted', id };
}

/** How deep a webhook body's JSON may nest. Shopify's nest a few levels; 100,000 would overflow PostgreSQL's jsonb parser and our own walks. */
export const SHOPIFY_BODY_MAX_DEPTH = 64;

/**
 * The body as text and as JSON (undefined: not JSON, stored as rejected), or a 400 for a body the
 * database cannot store: bytes that are not UTF-8 or hold a NUL (no text column takes one), JSON
 * nested deeper than SHOPIFY_BODY_MAX_DEPTH, or a string or key jsonb refuses (a \u0000 escape, a
 * lone surrogate), as REST and GraphQL refuse it. Accepted, such a body would fail on every try.
 */
function storableBody(raw: Buffer): { text: string; body: unknown } {
  const refuse = (path: PropertyKey[], message: string) => validationErrorFrom([{ path: ['body', ...path], message }]);
  if (!isUtf8(raw)) throw refuse([], 'the body is not valid UTF-8');
  if (raw.includes(0)) throw refuse([], 'the body holds a NUL byte (0x00), which no JSON text can');
  const text = raw.toString('utf8');
  // Counted on the text, before anything walks the value recursively.
  if (nestsDeeperThan(text, SHOPIFY_BODY_MAX_DEPTH)) throw refuse([], `the body nests deeper than ${SHOPIFY_BODY_MAX_DEPTH} levels`);
  let body: unknown;
  try {
    body = parseShopifyJson(text);
  } catch {
    return { text, body: undefined };
  }
  const bad = pathToUnstorable(body);
  if (bad) throw refuse(bad, UNSTORABLE_MESSAGE);
  return { text, body };
}

/** Whether JSON text opens more than `max` arrays and objects inside one another (strings skipped). */
function nestsDeeperThan(text: string, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash escapes the next character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > max) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/** An unknown domain's delivery is checked against a secret no one knows, sealed once per SecretBox. */
const DECOY_CONTEXT = 'shopify-webhook-secret:none';
const decoys = new WeakMap<SecretBox, string>();
function decoySecret(secrets: SecretBox): string {
  let sealed = decoys.get(secrets);
  if (!sealed) decoys.set(secrets, (sealed = secrets.seal(randomBytes(32).toString('hex'), DECOY_CONTEXT)));
  return sealed;
}

/**
 * Stores a webhook in the inbox, unless its id was stored before (then false). Concurrent
 * deliveries share one INSERT (group commit): under a burst from Shopify, one commit's WAL flush
 * serves many acceptances instead of one each.
 */
function storeInInbox(db: DB, row: Insertable<ShopifyInboxTable>): Promise<boolean> {
  let write = inboxWriters.get(db);
  if (!write) {
    write = groupCommit({
      ...GROUP_COMMIT,
      // A repeat of one webhook id waits for the next statement, where it finds the first stored.
      key: (r: Insertable<ShopifyInboxTable>) => `${r.shop_id} ${r.webhook_id}`,
      write: async (rows) => {
        const inserted = await db.insertInto('shopify_inbox').values(rows).onConflict((oc) => oc.columns(['shop_id', 'webhook_id']).doNothing()).returning('id').execute();
        const ids = new Set(inserted.map((r) => r.id));
        return rows.map((r) => ids.has(r.id));
      },
    });
    inboxWriters.set(db, write);
  }
  return write(row);
}
const inboxWriters = new WeakMap<DB, (row: Insertable<ShopifyInboxTable>) => Promise<boolean>>();

function hmacMatches(secret: string, rawBody: Buffer, given: string): boolean {
  const expected = createHmac('sha256', secret).update(rawBody).digest();
  const actual = Buffer.from(given, 'base64');
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

function rejectionOf(delivery: ShopifyDelivery, now: Date): string | undefined {
  if (!ACCEPTED_TOPICS.includes(delivery.topic)) return `topic ${delivery.topic} is not handled (handled: ${ACCEPTED_TOPICS.join(', ')})`;
  if (delivery.triggeredAt && now.getTime() - delivery.triggeredAt.getTime() > SHOPIFY_REPLAY_WINDOW_MS) {
    return `triggered at ${delivery.triggeredAt.toISOString()}, more than ${SHOPIFY_REPLAY_WINDOW_MS / 3_600_000} hours ago: a replay, not applied`;
  }
  return undefined;
}

/** The Shopify order a body (as parseShopifyJson reads it: an id past 2^53 is its digits) is about, so the order's webhooks can be read together. */
function orderIdOf(topic: string, body: unknown): string | null {
  const b = body as { id?: unknown; order_id?: unknown } | null;
  const value = topic.startsWith('orders/') ? b?.id : topic === 'refunds/create' ? b?.order_id : undefined;
  return typeof value === 'number' || typeof value === 'string' ? String(value) : null;
}

// --- applying ------------------------------------------------------------------------------------

/** Stored webhooks waiting to be applied: done by the scheduler, one transaction each; compliance webhooks answered by `answer`. */
export function createShopifyInbox(answer: ComplianceAnswer): DueWork {
  return {
    name: 'shopify_inbox',
    async runDue(db: DB, now: Date, limit: number): Promise<number> {
      const failing = await failingItems(db, 'shopify_inbox', now);
      let done = 0;
      while (done < limit && (await applyNext(db, now, failing, answer)) !== undefined) done++;
      return done;
    },
    async oldestDue(db: DB, now: Date): Promise<Date | null> {
      const row = await dueWebhooks(db, now, await failedItems(db, 'shopify_inbox')).select('next_attempt_at').limit(1).executeTakeFirst();
      return row?.next_attempt_at ?? null;
    },
  };
}

/** Stored webhooks not applied yet whose try is due at `now`, the longest waiting first, none of `skip` (their last try failed). */
function dueWebhooks(db: Queryable, now: Date, skip: readonly string[]) {
  let query = db.selectFrom('shopify_inbox').where('processed_at', 'is', null).where('next_attempt_at', '<=', now);
  if (skip.length) query = query.where('id', 'not in', skip);
  return query.orderBy('next_attempt_at').orderBy('id');
}

/**
 * Claims the next due webhook (SKIP LOCKED: once, on any instance) and applies it in the same
 * transaction, so it is marked done exactly when its effects commit. A rule's refusal is final and
 * recorded on the row; any other failure (the database refusing what the body holds, a bug) is a
 * failure of this webhook alone (runClaimed): tried again later, then set aside as `failed`.
 */
function applyNext(db: DB, now: Date, failing: FailingItems, answer: ComplianceAnswer): Promise<number | undefined> {
  return runClaimed(db, now, failing, {
    claim: (trx, skip) => dueWebhooks(trx, now, skip).selectAll().limit(1).forUpdate().skipLocked().execute(),
    keyOf: (row) => ({ item: row.id, shopId: row.shop_id }),
    work: (trx, [row]) => applyWebhook(trx, row!, now, answer),
    // The shop's list shows every try and the last reason; processed_at stays null (not applied).
    onFailure: (trx, row, failure) =>
      trx.updateTable('shopify_inbox').set({ attempts: sql`attempts + 1`, error: failure.reason }).where('id', '=', row.id).where('processed_at', 'is', null).execute(),
  });
}

async function applyWebhook(trx: Trx, row: ShopifyInboxRow, now: Date, answer: ComplianceAnswer): Promise<number> {
  const done = (error: string | null) => trx.updateTable('shopify_inbox').set({ attempts: row.attempts + 1, error, processed_at: now }).where('id', '=', row.id).execute();
  let fact: Fact;
  try {
    fact = factOf(row);
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    await done(`${err.code}: ${err.message}`);
    return 1;
  }
  let apply: () => Promise<string | undefined>;
  if (fact.kind === 'customer') {
    const { customer } = fact;
    apply = () => applyCustomer(trx, row.shop_id, customer);
  } else if (fact.kind === 'catalogue') {
    apply = () => applyCatalogue(trx, row.shop_id, fact, now);
  } else if (fact.kind === 'compliance') {
    apply = async () => {
      await answer(trx, row.shop_id, fact.request, now);
      return undefined;
    };
  } else {
    // What Shopify said of the order stays known even if applying it is refused: later webhooks build on it.
    const facts = await recordFact(trx, row.shop_id, fact);
    // A guest's order is refused whatever its lines: it waits for nothing.
    const collections = facts.latest?.customer ? await collectionsForOrder(trx, row.shop_id, orderProductIds(facts.latest), row.received_at, now) : { collections: new Map(), waitFor: [] };
    if (collections.waitFor.length) {
      // Tried again shortly, with the reason on its row: the sync worker is reading those products' collections.
      const error = `waiting for Shopify to say which collections product${collections.waitFor.length > 1 ? 's' : ''} ${collections.waitFor.join(', ')} ${collections.waitFor.length > 1 ? 'are' : 'is'} in`;
      await trx.updateTable('shopify_inbox').set({ next_attempt_at: new Date(now.getTime() + COLLECTIONS_RETRY_MS), error }).where('id', '=', row.id).execute();
      return 1;
    }
    apply = () => applyOrder(trx, row.shop_id, facts, collections.collections, now, row.id);
  }
  // A rule's refusal undoes the apply only, under its own savepoint; anything else undoes it all.
  await sql`savepoint apply`.execute(trx);
  try {
    await done((await apply()) ?? null);
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    await sql`rollback to savepoint apply`.execute(trx);
    await done(`${err.code}: ${err.message}`);
  }
  return 1;
}

/** A webhook's body, checked to be what its topic says; `raw` is it parsed, `text` as Shopify sent it. */
type Fact =
  | { kind: 'customer'; customer: ShopifyCustomer }
  | { kind: 'catalogue'; topic: string; id: string }
  | { kind: 'compliance'; request: ShopifyComplianceRequest }
  | { kind: 'order'; shopifyOrderId: string; order: ShopifyOrder; raw: unknown; text: string }
  | { kind: 'refund'; shopifyOrderId: string; refund: ShopifyRefund; raw: unknown; text: string };

function factOf(row: ShopifyInboxRow): Fact {
  const raw = parseShopifyJson(row.body);
  if (row.topic === 'customers/create' || row.topic === 'customers/update') return { kind: 'customer', customer: parseShopifyCustomer(raw) };
  if ((SHOPIFY_COMPLIANCE_TOPICS as readonly string[]).includes(row.topic)) {
    return { kind: 'compliance', request: parseShopifyCompliance(row.topic as ShopifyComplianceRequest['topic'], raw) };
  }
  if (row.topic.startsWith('products/') || row.topic.startsWith('collections/')) {
    return { kind: 'catalogue', topic: row.topic, id: parseShopifyResource(raw, row.topic.startsWith('products/') ? 'product' : 'collection').id };
  }
  if (row.topic === 'refunds/create') {
    const refund = parseShopifyRefund(raw);
    return { kind: 'refund', shopifyOrderId: refund.order_id, refund, raw, text: row.body };
  }
  const order = parseShopifyOrder(raw);
  return { kind: 'order', shopifyOrderId: order.id, order, raw, text: row.body };
}

/** How much newer a state is than the one stored (ms; positive when there is none). */
const ahead = (order: ShopifyOrder, stored: ShopifyOrder | undefined) => (stored ? Date.parse(order.updated_at) - Date.parse(stored.updated_at) : 1);

/** What Shopify has said of one order: its latest body (by updated_at), if any yet, and every refund once. */
type OrderFacts = { latest: ShopifyOrder | undefined; refunds: ShopifyRefund[] };

/**
 * Adds an order's or a refund's body to what Shopify has said of the order (shopify_orders, its
 * row locked: one order's webhooks apply one at a time), and returns all of it. Bodies are stored
 * as Shopify sent them and read back as text: the database drivers parse jsonb with JSON.parse,
 * which would round the ids past 2^53. A body of the same updated_at as the stored one replaces it
 * unless `sameStateWins` is false (the history import: a webhook's own body is kept over it).
 */
async function recordFact(trx: Trx, shopId: string, fact: Extract<Fact, { shopifyOrderId: string }>, sameStateWins = true): Promise<OrderFacts> {
  const key = { shop_id: shopId, shopify_order_id: fact.shopifyOrderId };
  const write = (changes: { refunds: RawBuilder<unknown> } | { order_body: RawBuilder<unknown> }) =>
    trx.updateTable('shopify_orders').set(changes).where('shop_id', '=', key.shop_id).where('shopify_order_id', '=', key.shopify_order_id).execute();
  await trx.insertInto('shopify_orders').values(key).onConflict((oc) => oc.columns(['shop_id', 'shopify_order_id']).doNothing()).execute();
  const stored = await trx
    .selectFrom('shopify_orders')
    .select([sql<string | null>`order_body::text`.as('order_body'), sql<string>`refunds::text`.as('refunds')])
    .where('shop_id', '=', key.shop_id)
    .where('shopify_order_id', '=', key.shopify_order_id)
    .forUpdate()
    .executeTakeFirstOrThrow();
  let latest = stored.order_body === null ? undefined : parseShopifyOrder(parseShopifyJson(stored.order_body));
  let refunds = parseShopifyJson(stored.refunds) as Record<string, unknown>;
  if (fact.kind === 'refund') {
    refunds = { ...refunds, [fact.refund.id]: fact.raw };
    await write({ refunds: sql`refunds || jsonb_build_object(${fact.refund.id}::text, ${fact.text}::jsonb)` });
  } else if (ahead(fact.order, latest) > 0 || (ahead(fact.order, latest) === 0 && sameStateWins)) {
    // A state older than the one stored (webhooks come in any order) adds nothing.
    latest = fact.order;
    await write({ order_body: sql`${fact.text}::jsonb` });
  }
  return { latest, refunds: Object.values(refunds).map(parseShopifyRefund) };
}

/** When the customer signed up with the shop, as Shopify says (null: it does not say). */
const signedUpAt = (customer: { created_at?: string | null }) => (customer.created_at ? new Date(customer.created_at) : null);

/**
 * Records a customer's state as the latest one applied, unless a newer one was (then false: this
 * one is older and changes nothing), or the same one and `sameStateWins` is false. The row lock
 * orders one customer's states; a state without updated_at cannot be placed and always applies.
 */
async function isNewestCustomerState(trx: Trx, shopId: string, customer: { id: string; updated_at?: string | null }, sameStateWins = true): Promise<boolean> {
  if (!customer.updated_at) return true;
  const row = await trx
    .insertInto('shopify_customers')
    .values({ shop_id: shopId, shopify_customer_id: customer.id, updated_at: new Date(customer.updated_at) })
    .onConflict((oc) =>
      oc
        .columns(['shop_id', 'shopify_customer_id'])
        .doUpdateSet({ updated_at: (eb) => eb.ref('excluded.updated_at') })
        .where('shopify_customers.updated_at', sameStateWins ? '<=' : '<', (eb) => eb.ref('excluded.updated_at')),
    )
    .returning('shop_id')
    .executeTakeFirst();
  return row !== undefined;
}

/** customers/create and customers/update: the customer's e-mail, unless a newer state of theirs was applied already. */
async function applyCustomer(trx: Trx, shopId: string, customer: ShopifyCustomer, sameStateWins = true): Promise<undefined> {
  if (!(await isNewestCustomerState(trx, shopId, customer, sameStateWins))) return undefined;
  await upsertCustomerIn(trx, shopId, parseInput(customerInputSchema, customerInput(customer)), { signedUpAt: signedUpAt(customer) });
  return undefined;
}

/** How soon an order waiting for its products' collections is tried again. */
const COLLECTIONS_RETRY_MS = 1_000;

/** products/* and collections/*: what the service knows of the catalogue follows (product-collections.ts); without an Admin connection it knows nothing. */
async function applyCatalogue(trx: Trx, shopId: string, fact: Extract<Fact, { kind: 'catalogue' }>, now: Date): Promise<undefined> {
  if (!(await adminConnected(trx, shopId))) return undefined;
  if (fact.topic === 'products/delete') await forgetProduct(trx, shopId, fact.id, now);
  else if (fact.topic === 'collections/delete') await forgetCollection(trx, shopId, fact.id);
  else if (fact.topic === 'collections/update') await requestCollectionsReconcile(trx, shopId, now);
  else await refreshProductCollections(trx, shopId, fact.id);
  return undefined;
}

/**
 * Creates the customer an order names when the shop does not know them yet, from the order's
 * customer object (Shopify does not order its webhooks: the order may come before
 * customers/create). Shared by the connector and the orders import of Shopify's orders.
 */
export async function ensureOrderCustomer(trx: Trx, shopId: string, order: ShopifyOrder): Promise<void> {
  const { customer } = order;
  if (!customer) return;
  const known = await trx.selectFrom('customers').select('id').where('shop_id', '=', shopId).where('shopify_customer_id', '=', customer.id).executeTakeFirst();
  if (known) return;
  // The order's customer is the newest state known of them: a customers/update older than it changes nothing.
  await isNewestCustomerState(trx, shopId, customer);
  const input = parseInput(customerInputSchema, customerInput({ id: customer.id, email: customer.email ?? order.email }));
  await upsertCustomerIn(trx, shopId, input, { signedUpAt: signedUpAt(customer) });
}

/**
 * Applies the order as everything Shopify has said of it: its latest body with every refund once,
 * so any arrival order gives the same state. A refund that comes before its order is kept with the
 * order's facts and its webhook marked as waiting for the order (`inboxId`); the order's first
 * webhook applies it, and its waiting refunds then read as applied.
 */
async function applyOrder(trx: Trx, shopId: string, facts: OrderFacts, collections: ReadonlyMap<string, readonly string[]>, now: Date, inboxId: string): Promise<undefined> {
  if (!facts.latest) {
    await trx.updateTable('shopify_inbox').set({ awaits_order: true }).where('id', '=', inboxId).execute();
    return undefined;
  }
  await applyOrderFacts(trx, shopId, { latest: facts.latest, refunds: facts.refunds }, collections, now);
  return undefined;
}

/** The order rebuilt from its facts and applied, its lines in the collections known for their products. */
async function applyOrderFacts(
  trx: Trx,
  shopId: string,
  { latest, refunds }: { latest: ShopifyOrder; refunds: ShopifyRefund[] },
  collections: ReadonlyMap<string, readonly string[]>,
  now: Date,
): Promise<void> {
  const { orderId, body } = orderPut(latest, refunds, collections);
  await ensureOrderCustomer(trx, shopId, latest);
  await upsertOrder(trx, shopId, orderId, body, now);
  if (refunds.length > 0) {
    await trx.updateTable('shopify_inbox').set({ awaits_order: false }).where('shop_id', '=', shopId).where('shopify_order_id', '=', orderId).where('awaits_order', '=', true).execute();
  }
}

/**
 * An order of the shop's history (its Admin API state in the webhooks' shape, `text` that shape as
 * JSON), added to what the webhooks said of it and applied the same way: an order imported and
 * delivered by a webhook, in either order, is one order and earns once. A webhook's body of the
 * same `updated_at` is kept over the import's (it is Shopify's own REST shape, refunds line by line).
 */
export async function applyImportedOrder(trx: Trx, shopId: string, order: ShopifyOrder, text: string, now: Date): Promise<void> {
  const facts = await recordFact(trx, shopId, { kind: 'order', shopifyOrderId: order.id, order, raw: undefined, text }, false);
  const latest = facts.latest ?? order;
  // History does not wait for catalogue reads: it earns by the collections known when it comes in.
  await applyOrderFacts(trx, shopId, { latest, refunds: facts.refunds }, await knownCollections(trx, shopId, orderProductIds(latest)), now);
}

/** A customer of the shop's history, applied as customers/create is, unless the same state or a newer one was applied already. */
export const applyImportedCustomer = (trx: Trx, shopId: string, customer: ShopifyCustomer) => applyCustomer(trx, shopId, customer, false);

/**
 * Deletes webhooks processed before `before` (SHOPIFY_INBOX_RETENTION_DAYS ago, in the retention
 * loop): what they said of orders is kept in shopify_orders.
 * Walks the processed ones oldest first, in bounded batches (purgeInBatches).
 */
export async function purgeProcessedShopifyWebhooks(db: DB, before: Date, options: PurgeOptions = {}): Promise<number> {
  return purgeInBatches<TimeKey>(options, async (position, limit) => {
    // `= any(array(…))`, not `in (…)`: the batch's rows by their key, never a pass over the table.
    const { rows } = await sql<{ id: string; processed_at: Date }>`
      delete from shopify_inbox
      where id = any(array(
        select id from shopify_inbox
        where processed_at is not null and processed_at < ${before}
          ${position ? sql`and (processed_at, id) > (${position.at}, ${position.id})` : sql``}
        order by processed_at, id
        limit ${limit}))
      returning id, processed_at`.execute(db);
    return { deleted: rows.length, next: rows.length < limit ? null : lastTimeKey(rows, (r) => ({ at: r.processed_at, id: r.id })) };
  });
}

// --- the shop's view -----------------------------------------------------------------------------

export type ShopifyWebhook = {
  _id: string;
  webhookId: string;
  topic: string;
  shopifyOrderId: string | null;
  receivedAt: Date;
  /**
   * waiting (not applied yet, or to be tried again: see `error`), waiting_for_order (a refund before its order), applied, rejected (a rule or the
   * body refused it, with `error`), or failed (set aside after its last try, with `error`: see
   * shopifyWebhookRetry).
   */
  status: 'waiting' | 'waiting_for_order' | 'applied' | 'rejected' | 'failed';
  attempts: number;
  error: string | null;
  processedAt: Date | null;
};

type ListedRow = ShopifyInboxRow & { set_aside: SqlBool };

function toShopifyWebhook(row: ListedRow): ShopifyWebhook {
  const status = row.processed_at !== null ? (row.error !== null ? 'rejected' : row.awaits_order ? 'waiting_for_order' : 'applied') : row.set_aside ? 'failed' : 'waiting';
  return { _id: row.id, webhookId: row.webhook_id, topic: row.topic, shopifyOrderId: row.shopify_order_id, receivedAt: row.received_at, status, attempts: row.attempts, error: row.error, processedAt: row.processed_at };
}

/** The shop's webhooks, each with whether its failure set it aside (due_work_failures). */
function listedWebhooks(db: Queryable, shopId: string) {
  return db
    .selectFrom('shopify_inbox as i')
    .leftJoin('due_work_failures as f', (join) => join.on('f.kind', '=', 'shopify_inbox').onRef('f.item', '=', 'i.id'))
    .selectAll('i')
    .select((eb) => eb('f.set_aside_at', 'is not', null).as('set_aside'))
    .where('i.shop_id', '=', shopId);
}

/** The webhooks the shop's Shopify store sent, newest first. */
export async function listShopifyWebhooks(db: Queryable, shopId: string, args: PageArgs): Promise<Page<ShopifyWebhook>> {
  let query = listedWebhooks(db, shopId);
  if (args.after) {
    const [at = '', id = ''] = decodeCursor(args.after, 2);
    const after = new Date(at);
    if (Number.isNaN(after.getTime())) throw invalidCursor();
    query = query.where(sql<boolean>`(i.received_at, i.id) < (${after}, ${id})`);
  }
  const rows = await query.orderBy('i.received_at', 'desc').orderBy('i.id', 'desc').limit(args.first + 1).execute();
  const items = rows.slice(0, args.first).map((row) => ({ node: toShopifyWebhook(row), cursor: encodeCursor([row.received_at.toISOString(), row.id]) }));
  return { items, hasNextPage: rows.length > items.length };
}

/**
 * Gives a webhook set aside as failed its tries again (the next pass claims it), once the cause
 * is fixed: it is `waiting` again. Only a failed webhook can be retried.
 */
export async function retryShopifyWebhook(db: DB, shopId: string, id: string, actor?: Actor): Promise<ShopifyWebhook> {
  return inTransaction(db, async (trx) => {
    const retried = await retrySetAside(trx, { kind: 'shopify_inbox', shopId, item: id });
    const row = await listedWebhooks(trx, shopId).where('i.id', '=', id).executeTakeFirst();
    if (!row) throw new NotFoundError('shopify_webhook_not_found', `no Shopify webhook with id ${id}`, ['id']);
    const webhook = toShopifyWebhook(row);
    if (!retried) throw new RuleViolationError('shopify_webhook_not_failed', `the webhook is ${webhook.status}: only a failed one can be tried again`, ['id']);
    await recordAudit(trx, shopId, actor, { kind: 'shopifyWebhook.retry', subject: { type: 'shopifyWebhook', id }, before: { status: 'failed' }, after: { status: webhook.status } });
    return webhook;
  });
}

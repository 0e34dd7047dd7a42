import type { Trx, Queryable } from '../../db/transaction.js';
import type { DB } from '../../db/database.js';
import { cancelDiscountCode } from '../codes/index.js';
import { ConflictError } from '../kernel/index.js';
import { enqueueSyncJobs, type NewSyncJob } from './sync-jobs.js';

/**
 * Codes in Shopify (DESIGN.md "Shopify, the Admin side"; issue 34, item 3): each code issued to a
 * customer of a shop with an Admin connection is created in Shopify, limited to that customer and
 * to one use, on its reward's terms; a code that ends here (cancelled, expired) is deactivated
 * there. The jobs come from the outbox (the relay calls `queueCodeSync` in its transaction), so a
 * code is never issued without its job, nor its job written for a code that rolled back.
 */

type CodeEvent = { shopId: string; type: string; data: unknown };

/** The outbox relay's part: jobs for the codes its batch of events issued or ended, in shops connected to Shopify's Admin API. */
export async function queueCodeSync(trx: Trx, events: readonly CodeEvent[]): Promise<void> {
  const wanted = events.filter((e) => e.type === 'redemptions/created' || e.type === 'redemptions/cancelled' || e.type === 'redemptions/expired');
  if (wanted.length === 0) return;
  const shopIds = [...new Set(wanted.map((e) => e.shopId))];
  const connected = new Set((await trx.selectFrom('shopify_admin_connections').select('shop_id').where('shop_id', 'in', shopIds).execute()).map((r) => r.shop_id));
  const jobs: NewSyncJob[] = [];
  for (const event of wanted) {
    if (!connected.has(event.shopId)) continue;
    const codeId = (event.data as { _id?: unknown })._id;
    if (typeof codeId !== 'string') continue;
    // The code is pending already (a trigger marks the codes of connected shops as they are issued).
    jobs.push({ shopId: event.shopId, kind: event.type === 'redemptions/created' ? 'code_create' : 'code_deactivate', subject: codeId });
  }
  await enqueueSyncJobs(trx, jobs);
}

/** A Shopify id from ours: ids given bare (as order webhooks carry them) or already global. */
export const gid = (type: string, id: string) => (id.startsWith('gid://') ? id : `gid://shopify/${type}/${id}`);

/** The mutation a code needs, and its input, on Shopify's terms. */
export type ShopifyDiscount = { mutation: 'basic' | 'free_shipping'; input: Record<string, unknown> };

export type CodeToSync = {
  id: string;
  shopId: string;
  code: string;
  status: string;
  shopifySync: string | null;
  shopifyId: string | null;
  discount: ShopifyDiscount;
};

const COMBINES: Record<string, string> = { order_discounts: 'orderDiscounts', product_discounts: 'productDiscounts', shipping_discounts: 'shippingDiscounts' };

/** What a code's discount in Shopify is made of: the code, its customer's Shopify id, its reward's terms. */
export type CodeTermsRow = {
  code: string;
  type: string;
  value: string | number;
  variant_id: string | null;
  expires_at: Date | null;
  created_at: Date;
  shopify_customer_id: string | null;
  name: string | null;
  apply_product_option: string | null;
  apply_products: unknown;
  apply_collections: unknown;
  apply_variants: unknown;
  minimum_requirement_type: string | null;
  minimum_requirement_value: string | number | null;
  combinations: unknown;
};

/** The code and what Shopify is to be told of it; undefined when it is gone. */
export async function codeToSync(db: Queryable, shopId: string, codeId: string): Promise<CodeToSync | undefined> {
  return (await codesToSync(db, shopId, [codeId])).get(codeId);
}

/** The codes (by id) and what Shopify is to be told of each, in one query for a batch of jobs; gone ones are missing. */
export async function codesToSync(db: Queryable, shopId: string, codeIds: readonly string[]): Promise<Map<string, CodeToSync>> {
  if (codeIds.length === 0) return new Map();
  const rows = await db
    .selectFrom('discount_codes as c')
    .innerJoin('customers as cu', 'cu.id', 'c.customer_id')
    .leftJoin('points_redemptions as r', 'r.id', 'c.reward_id')
    .select([
      'c.id', 'c.code', 'c.status', 'c.type', 'c.value', 'c.variant_id', 'c.expires_at', 'c.created_at', 'c.shopify_sync', 'c.shopify_id',
      'cu.shopify_customer_id', 'r.name', 'r.apply_product_option', 'r.apply_products', 'r.apply_collections', 'r.apply_variants',
      'r.minimum_requirement_type', 'r.minimum_requirement_value', 'r.combinations',
    ])
    .where('c.shop_id', '=', shopId)
    .where('c.id', 'in', codeIds)
    .execute();
  return new Map(
    rows.map((row) => [row.id, { id: row.id, shopId, code: row.code, status: row.status, shopifySync: row.shopify_sync, shopifyId: row.shopify_id, discount: shopifyDiscountOf(row) }]),
  );
}

const list = (v: unknown) => (Array.isArray(v) ? (v as string[]) : []);

/**
 * A code's discount on Shopify's terms (issue 34, item 3): one use, once per customer, limited to
 * its customer, from its issue to its expiry; amount and percentage codes on the reward's
 * products, collections or variants, with its minimum and its combinations; shipping codes free
 * shipping up to their value (0: all of it); a free product 100 % off its variant.
 */
export function shopifyDiscountOf(row: CodeTermsRow): ShopifyDiscount {
  const combinations = list(row.combinations);
  const id = row.shopify_customer_id;
  const shopifyCustomer = id && /^\d+$/.test(id) ? gid('Customer', id) : id && /^gid:\/\/shopify\/Customer\/\d+$/.test(id) ? id : null;
  const common: Record<string, unknown> = {
    title: row.name ? `${row.name} (${row.code})` : row.code,
    code: row.code,
    startsAt: row.created_at.toISOString(),
    endsAt: row.expires_at?.toISOString() ?? null,
    usageLimit: 1,
    appliesOncePerCustomer: true,
    // Limited to its customer where Shopify knows them; one we know by another id (an e-mail, a key of the shop's own) cannot be named.
    context: shopifyCustomer ? { customers: { add: [shopifyCustomer] } } : { all: 'ALL' },
    combinesWith: Object.fromEntries(Object.entries(COMBINES).map(([ours, theirs]) => [theirs, combinations.includes(ours)])),
  };
  const minimum = row.minimum_requirement_value === null ? null : String(row.minimum_requirement_value);
  if (row.minimum_requirement_type === 'purchase_amount' && minimum !== null) common.minimumRequirement = { subtotal: { greaterThanOrEqualToSubtotal: minimum } };
  if (row.minimum_requirement_type === 'quantity' && minimum !== null) common.minimumRequirement = { quantity: { greaterThanOrEqualToQuantity: minimum.split('.')[0] } };

  const value = String(row.value);
  if (row.type === 'shipping') {
    return { mutation: 'free_shipping', input: { ...common, destination: { all: true }, ...(Number(value) > 0 ? { maximumShippingPrice: value } : {}) } };
  }
  if (row.type === 'free_product') {
    return { mutation: 'basic', input: { ...common, customerGets: { value: { percentage: 1 }, items: { products: { productVariantsToAdd: [gid('ProductVariant', row.variant_id ?? '')] } } } } };
  }
  const items =
    row.apply_product_option === 'products'
      ? { products: { productsToAdd: list(row.apply_products).map((p) => gid('Product', p)), productVariantsToAdd: list(row.apply_variants).map((v) => gid('ProductVariant', v)) } }
      : row.apply_product_option === 'collections'
        ? { collections: { add: list(row.apply_collections).map((c) => gid('Collection', c)) } }
        : { all: true };
  // Shopify takes a percentage as a fraction (0.1 for 10 %); our codes keep it in percent, exactly.
  const off = row.type === 'percentage' ? { percentage: percentFraction(value) } : { discountAmount: { amount: value, appliesOnEachItem: false } };
  return { mutation: 'basic', input: { ...common, customerGets: { value: off, items } } };
}

/** "12.5" (percent) as the fraction Shopify's Float wants, 0.125, from its decimal digits rather than by float division. */
export function percentFraction(percent: string): number {
  const [whole = '0', frac = ''] = percent.split('.');
  const padded = whole.padStart(3, '0');
  return Number(`${padded.slice(0, -2)}.${padded.slice(-2)}${frac}`);
}

/** The code ended before it reached Shopify: it never will. */
export async function unsyncCode(db: Queryable, codeId: string): Promise<void> {
  await db.updateTable('discount_codes').set({ shopify_sync: null }).where('id', '=', codeId).where('shopify_sync', '=', 'pending').execute();
}

/** Shopify confirmed the code: it is usable at the checkout. */
export async function recordCodeSynced(db: Queryable, codeId: string, shopifyId: string): Promise<void> {
  await db.updateTable('discount_codes').set({ shopify_sync: 'synced', shopify_id: shopifyId, shopify_error: null }).where('id', '=', codeId).execute();
}

/**
 * Shopify refused the code (or every try failed): it cannot be used at the checkout, so it is
 * cancelled here and its points go back to its customer (never lost); Shopify's reason is kept.
 * A code that ended meanwhile (used, expired) keeps its state.
 */
export async function recordCodeRefused(db: DB, shopId: string, codeId: string, code: string, reason: string): Promise<void> {
  // Cancelled first: whoever reads `failed` finds the code cancelled and its points back.
  try {
    await cancelDiscountCode(db, shopId, code, { returnPoints: true });
  } catch (err) {
    if (!(err instanceof ConflictError)) throw err;
  }
  await db.updateTable('discount_codes').set({ shopify_sync: 'failed', shopify_error: reason.slice(0, 1000) }).where('id', '=', codeId).execute();
}

import type { Insertable } from 'kysely';
import type { CodeStatus, DiscountCodeRow, DiscountCodesTable, ShopifySyncState } from '../../db/schema.js';
import type { Queryable, Trx } from '../../db/transaction.js';
import { newId, type Page, type PageArgs, pageBySeq, pagesBySeq, randomString, READABLE_ALPHABET, type SeqList } from '../kernel/index.js';

/** The reward types a code can be for; a code has its reward's. */
export const REDEMPTION_TYPES = ['amount', 'percentage', 'shipping', 'free_product'] as const;
export type RedemptionType = (typeof REDEMPTION_TYPES)[number];

/** Random characters after the prefix: 31^10 ≈ 8·10^14 codes per prefix, so guessing one is hopeless. */
export const DISCOUNT_CODE_RANDOM_LENGTH = 10;
const ISSUE_ATTEMPTS = 5;

/** A discount code issued by a redemption: the `redemptions/created` event's data. */
export type DiscountCode = {
  _id: string;
  code: string;
  /** The discount: an amount, a percentage, or a shipping / product value, per `type`. */
  value: number;
  type: RedemptionType;
  /** The `currencyActive` of the redemption, if one was given. */
  currency: string | null;
  /** The product variant of a free_product reward. */
  variantId: string | null;
  /** The `_id` of the redemption option (reward) it came from. */
  reward: string;
  pointsAmount: number;
  /** The customer `_id`. */
  customer: string;
  /** The `_id` of the redeem_points ledger entry. */
  activity: string;
  expiresAt: Date | null;
  createdAt: Date;
  /** Its life: issued, then exactly one of used, expired, cancelled (code-states.ts). */
  status: CodeStatus;
  usedAt: Date | null;
  /** The shop's id of the order that used it. */
  orderId: string | null;
  /** Used by an order of another customer than the one it was issued to: the checkout let it through. */
  usedByOtherCustomer: boolean;
  cancelledAt: Date | null;
  /** Its points came back to the customer (a refund_redemption entry): cancelled, expired or its order refunded, as the shop decides. */
  pointsReturned: boolean;
  /** Its copy in Shopify's checkout: pending until Shopify confirms it, then synced; failed when Shopify refused it (then cancelled, its points back). Null: the shop has no Shopify Admin connection. */
  shopifySync: ShopifySyncState | null;
  /** Its id in Shopify (gid://shopify/DiscountCodeNode/…), once synced. */
  shopifyId: string | null;
  /** Why Shopify refused it. */
  shopifyError: string | null;
};

export function toDiscountCode(row: DiscountCodeRow): DiscountCode {
  return {
    _id: row.id,
    code: row.code,
    value: Number(row.value),
    type: row.type as RedemptionType,
    currency: row.currency,
    variantId: row.variant_id,
    reward: row.reward_id,
    pointsAmount: row.points_amount,
    customer: row.customer_id,
    activity: row.activity_id,
    expiresAt: row.expires_at,
    createdAt: row.created_at,
    status: row.status,
    usedAt: row.used_at,
    orderId: row.order_id,
    usedByOtherCustomer: row.other_customer,
    cancelledAt: row.cancelled_at,
    pointsReturned: row.returned_activity_id !== null,
    shopifySync: row.shopify_sync,
    shopifyId: row.shopify_id,
    shopifyError: row.shopify_error,
  };
}

export type NewDiscountCode = Omit<Insertable<DiscountCodesTable>, 'seq' | 'id' | 'code'> & { prefix: string };

export function randomCodePart(): string {
  return randomString(DISCOUNT_CODE_RANDOM_LENGTH, READABLE_ALPHABET);
}

/**
 * Inserts a code `prefix + random`, unique per shop. ON CONFLICT DO NOTHING leaves the caller's
 * transaction usable when a code is taken, so a collision just draws another one.
 */
export async function issueDiscountCode(
  trx: Trx,
  values: NewDiscountCode,
  nextRandomPart: () => string = randomCodePart,
): Promise<DiscountCode> {
  const { prefix, ...columns } = values;
  for (let attempt = 0; attempt < ISSUE_ATTEMPTS; attempt++) {
    const row = await trx
      .insertInto('discount_codes')
      .values({ ...columns, id: newId(), code: prefix + nextRandomPart() })
      .onConflict((oc) => oc.columns(['shop_id', 'code']).doNothing())
      .returningAll()
      .executeTakeFirst();
    if (row) return toDiscountCode(row);
  }
  throw new Error(`no free discount code with prefix "${prefix}" after ${ISSUE_ATTEMPTS} attempts`);
}

/** A customer's discount codes, newest first. */
function codesOf(db: Queryable, shopId: string): SeqList<DiscountCodeRow> {
  return {
    table: 'discount_codes',
    parent: 'customer_id',
    rowsOf: (customerId) => db.selectFrom('discount_codes').selectAll().where('shop_id', '=', shopId).where('customer_id', '=', customerId),
    column: 'seq',
    direction: 'desc',
  };
}

export function listDiscountCodes(db: Queryable, shopId: string, customerId: string, args: PageArgs): Promise<Page<DiscountCode>> {
  return pageBySeq(db, customerId, codesOf(db, shopId), args, toDiscountCode);
}

/** Who reads a code: the shop (its API key), or the code's own customer (the storefront). */
export type CodeReader = 'shop' | 'customer';

/**
 * A code as `reader` may see it. An order of another customer that used the code is that
 * customer's: its customer sees that the code was used, when, and by another customer, not which order.
 */
function codeAsSeenBy(code: DiscountCode, reader: CodeReader): DiscountCode {
  return reader === 'customer' && code.usedByOtherCustomer ? { ...code, orderId: null } : code;
}

/** listDiscountCodes for many customers in one statement, in the order of `customerIds`, as `reader` may see them. */
export function listDiscountCodesOfCustomers(
  db: Queryable,
  shopId: string,
  customerIds: readonly string[],
  args: PageArgs,
  reader: CodeReader = 'shop',
): Promise<Array<Page<DiscountCode>>> {
  return pagesBySeq(db, customerIds, codesOf(db, shopId), args, (row) => codeAsSeenBy(toDiscountCode(row), reader));
}

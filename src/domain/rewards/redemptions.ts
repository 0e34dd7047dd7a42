import { sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../../db/database.js';
import type { PointsRedemptionRow } from '../../db/schema.js';
import { inTransaction, type Queryable } from '../../db/transaction.js';
import { type Actor, changedFields, recordAudit } from '../audit/index.js';
import { type Customer, customerIdentifierSchema, type CustomerKey, customerPageQuerySchema, getCustomer, lockCustomer } from '../customers/index.js';
import { decodeCursor, encodeCursor, invalidCursor, isId, newId, NotFoundError, offsetOf, type Page, type PageArgs, parseInput, recordEvent, RuleViolationError, ValidationError } from '../kernel/index.js';
import { type Activity, applyBalanceChange, MAX_AMOUNT } from '../ledger/index.js';
import { type DiscountCode, issueDiscountCode, REDEMPTION_TYPES, type RedemptionType } from '../codes/index.js';

// The contract names some values of these enumerations; the rest fill the gaps the way
// Shopify discounts (which the codes end up as) model them.
export const EXCHANGE_TYPES = ['fixed', 'variable'] as const;
export const PURCHASE_TYPES = ['one_time', 'subscription', 'both'] as const;
export const APPLY_PRODUCT_OPTIONS = ['all', 'collections', 'products'] as const;
export const MINIMUM_REQUIREMENT_TYPES = ['none', 'purchase_amount', 'quantity'] as const;
export const EXPIRE_DATE_TYPES = ['none', 'days', 'date'] as const;
/** Which other discount classes a code combines with (`combinations`). */
export const DISCOUNT_COMBINATIONS = ['order_discounts', 'product_discounts', 'shipping_discounts'] as const;

/** Discount values (and the variable exchange's product) stay below this, in cents-exact numbers. */
export const MAX_DISCOUNT_VALUE = 1_000_000_000;

/** The contract's points redemption record (a way to redeem), plus the values its enumerations need. */
export type PointsRedemption = {
  _id: string;
  /** Active, affordable for the customer in scope, and not past a fixed expiry date. */
  redeemable: boolean;
  status: boolean;
  name: string;
  type: RedemptionType;
  discountPrefix: string;
  exchangeType: (typeof EXCHANGE_TYPES)[number];
  /** Points per redemption (fixed), or per step (variable). */
  rewardValue: number;
  /** Discount per redemption (fixed), or per step (variable). */
  discountValue: number;
  purchaseType: (typeof PURCHASE_TYPES)[number];
  applyProductOption: (typeof APPLY_PRODUCT_OPTIONS)[number];
  applyProducts: string[];
  applyCollections: string[];
  applyVariants: string[];
  minimumRequirementType: (typeof MINIMUM_REQUIREMENT_TYPES)[number];
  minimumRequirementValue: number | null;
  combinations: Array<(typeof DISCOUNT_COMBINATIONS)[number]>;
  expireDateType: (typeof EXPIRE_DATE_TYPES)[number];
  /** Codes expire this many days after issue (expireDateType days). */
  expireDays: number | null;
  /** Codes expire at this instant (expireDateType date); the option cannot be redeemed after it. */
  expireDate: Date | null;
  sortIndex: number;
  createdAt: Date;
  updatedAt: Date;
};

const money = z
  .number()
  .min(0)
  .max(MAX_DISCOUNT_VALUE)
  .refine((v) => Math.abs(Math.round(v * 100) - v * 100) < 1e-6, 'at most 2 decimal places');
const idList = z.array(z.string().trim().min(1).max(255)).max(250);
const dateTime = z.union([z.date(), z.iso.datetime({ offset: true }).transform((s) => new Date(s))]);

const optionFields = {
  status: z.boolean(),
  name: z.string().trim().min(1).max(255),
  type: z.enum(REDEMPTION_TYPES),
  discountPrefix: z.string().trim().max(20).regex(/^[A-Za-z0-9_-]*$/, 'letters, digits, - and _ only'),
  exchangeType: z.enum(EXCHANGE_TYPES),
  rewardValue: z.number().int().min(1).max(MAX_AMOUNT),
  discountValue: money,
  purchaseType: z.enum(PURCHASE_TYPES),
  applyProductOption: z.enum(APPLY_PRODUCT_OPTIONS),
  applyProducts: idList,
  applyCollections: idList,
  applyVariants: idList,
  minimumRequirementType: z.enum(MINIMUM_REQUIREMENT_TYPES),
  minimumRequirementValue: money.nullable(),
  combinations: z.array(z.enum(DISCOUNT_COMBINATIONS)).max(DISCOUNT_COMBINATIONS.length),
  expireDateType: z.enum(EXPIRE_DATE_TYPES),
  expireDays: z.number().int().min(1).max(3650).nullable(),
  expireDate: dateTime.nullable(),
  sortIndex: z.number().int().min(0).max(1_000_000),
};

type OptionValues = { [K in keyof typeof optionFields]: z.output<(typeof optionFields)[K]> };

/** Rules across fields; values that the chosen types make meaningless are dropped, not refused. */
function checkOption(v: Omit<OptionValues, 'sortIndex'>, ctx: z.RefinementCtx) {
  const issue = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
  if (v.exchangeType === 'variable' && v.type !== 'amount') issue('exchangeType', 'variable exchange applies to amount discounts only');
  if ((v.type === 'amount' || v.type === 'percentage') && v.discountValue <= 0) issue('discountValue', `a ${v.type} discount needs a discountValue above 0`);
  if (v.type === 'percentage' && v.discountValue > 100) issue('discountValue', 'a percentage is at most 100');
  if (v.applyProductOption === 'collections' && v.applyCollections.length === 0) issue('applyCollections', 'name at least one collection');
  if (v.applyProductOption === 'products' && v.applyProducts.length + v.applyVariants.length === 0) issue('applyProducts', 'name at least one product or variant');
  if (v.minimumRequirementType !== 'none') {
    if (!v.minimumRequirementValue) issue('minimumRequirementValue', `required above 0 for ${v.minimumRequirementType}`);
    else if (v.minimumRequirementType === 'quantity' && !Number.isInteger(v.minimumRequirementValue)) issue('minimumRequirementValue', 'a quantity is a whole number');
  }
  if (v.expireDateType === 'days' && v.expireDays === null) issue('expireDays', 'required when expireDateType is days');
  if (v.expireDateType === 'date' && v.expireDate === null) issue('expireDate', 'required when expireDateType is date');
}

function normaliseOption<T extends Omit<OptionValues, 'sortIndex'>>(v: T): T {
  return {
    ...v,
    combinations: [...new Set(v.combinations)],
    minimumRequirementValue: v.minimumRequirementType === 'none' ? null : v.minimumRequirementValue,
    expireDays: v.expireDateType === 'days' ? v.expireDays : null,
    expireDate: v.expireDateType === 'date' ? v.expireDate : null,
  };
}

/** A new redemption option; everything but name, type, discountPrefix and rewardValue has a default. */
export const pointsRedemptionInputSchema = z
  .strictObject({
    ...optionFields,
    status: optionFields.status.default(true),
    discountPrefix: optionFields.discountPrefix.default(''),
    exchangeType: optionFields.exchangeType.default('fixed'),
    discountValue: optionFields.discountValue.default(0),
    purchaseType: optionFields.purchaseType.default('one_time'),
    applyProductOption: optionFields.applyProductOption.default('all'),
    applyProducts: idList.default([]),
    applyCollections: idList.default([]),
    applyVariants: idList.default([]),
    minimumRequirementType: optionFields.minimumRequirementType.default('none'),
    minimumRequirementValue: optionFields.minimumRequirementValue.default(null),
    combinations: optionFields.combinations.default([]),
    expireDateType: optionFields.expireDateType.default('none'),
    expireDays: optionFields.expireDays.default(null),
    expireDate: optionFields.expireDate.default(null),
    sortIndex: optionFields.sortIndex.optional(),
  })
  .superRefine(checkOption)
  .transform(normaliseOption);

/** A change to an option: any subset of its fields; the merged result must pass the create rules. */
export const pointsRedemptionUpdateSchema = z.strictObject(optionFields).partial();

/** A redemption by the customer a token names (the storefront): everything but the customer. */
export const ownRedeemSchema = z.strictObject({
  pointsAmount: z.number().int().min(1).max(MAX_AMOUNT),
  rewardId: z.string().refine(isId, 'expected a 24-character hex id'),
  variantId: z.string().trim().min(1).max(255).nullish(),
  currencyActive: z
    .string()
    .trim()
    .regex(/^[A-Za-z]{3}$/, 'expected a 3-letter currency code')
    .transform((s) => s.toUpperCase())
    .nullish(),
});

export const pointsRedeemSchema = ownRedeemSchema.extend({ customerIdentifier: customerIdentifierSchema });

function isRedeemable(row: PointsRedemptionRow, balance: number | null, now: Date): boolean {
  const expired = row.expire_date_type === 'date' && row.expire_date !== null && row.expire_date <= now;
  return row.status && !expired && balance !== null && balance >= row.reward_value;
}

/** `balance`: the points of the customer the flag is for; null when there is none (always false). */
export function toPointsRedemption(row: PointsRedemptionRow, balance: number | null, now = new Date()): PointsRedemption {
  return {
    _id: row.id,
    redeemable: isRedeemable(row, balance, now),
    status: row.status,
    name: row.name,
    type: row.type as PointsRedemption['type'],
    discountPrefix: row.discount_prefix,
    exchangeType: row.exchange_type as PointsRedemption['exchangeType'],
    rewardValue: row.reward_value,
    discountValue: Number(row.discount_value),
    purchaseType: row.purchase_type as PointsRedemption['purchaseType'],
    applyProductOption: row.apply_product_option as PointsRedemption['applyProductOption'],
    applyProducts: row.apply_products,
    applyCollections: row.apply_collections,
    applyVariants: row.apply_variants,
    minimumRequirementType: row.minimum_requirement_type as PointsRedemption['minimumRequirementType'],
    minimumRequirementValue: row.minimum_requirement_value === null ? null : Number(row.minimum_requirement_value),
    combinations: row.combinations as PointsRedemption['combinations'],
    expireDateType: row.expire_date_type as PointsRedemption['expireDateType'],
    expireDays: row.expire_days,
    expireDate: row.expire_date,
    sortIndex: row.sort_index,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

function toColumns(v: Omit<OptionValues, 'sortIndex'>) {
  return {
    status: v.status,
    name: v.name,
    type: v.type,
    discount_prefix: v.discountPrefix,
    exchange_type: v.exchangeType,
    reward_value: v.rewardValue,
    discount_value: v.discountValue,
    purchase_type: v.purchaseType,
    apply_product_option: v.applyProductOption,
    apply_products: JSON.stringify(v.applyProducts),
    apply_collections: JSON.stringify(v.applyCollections),
    apply_variants: JSON.stringify(v.applyVariants),
    minimum_requirement_type: v.minimumRequirementType,
    minimum_requirement_value: v.minimumRequirementValue,
    combinations: JSON.stringify(v.combinations),
    expire_date_type: v.expireDateType,
    expire_days: v.expireDays,
    expire_date: v.expireDate,
  };
}


async function getOptionRow(db: Queryable, shopId: string, id: string, field: string, forUpdate = false) {
  if (!isId(id)) throw new ValidationError(`${field}: expected a 24-character hex id`, [{ path: field, message: 'malformed id' }]);
  let query = db.selectFrom('points_redemptions').selectAll().where('shop_id', '=', shopId).where('id', '=', id);
  if (forUpdate) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw new NotFoundError('reward_not_found', `no points redemption with id ${id}`, [field]);
  return row;
}

export async function createPointsRedemption(db: DB, shopId: string, input: unknown, actor?: Actor): Promise<{ pointsRedemption: PointsRedemption }> {
  const { sortIndex, ...values } = parseInput(pointsRedemptionInputSchema, input);
  return inTransaction(db, async (trx) => {
    const row = await trx
      .insertInto('points_redemptions')
      .values({
        id: newId(),
        shop_id: shopId,
        ...toColumns(values),
        // Appended after the shop's last option unless a position is given.
        sort_index:
          sortIndex ?? sql<number>`(select coalesce(max(sort_index) + 1, 0) from points_redemptions where shop_id = ${shopId})`,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    const pointsRedemption = toPointsRedemption(row, null);
    await recordAudit(trx, shopId, actor, { kind: 'pointsRedemption.create', subject: { type: 'pointsRedemption', id: row.id }, after: pointsRedemption });
    return { pointsRedemption };
  });
}

export async function updatePointsRedemption(
  db: DB,
  shopId: string,
  id: string,
  input: unknown,
  actor?: Actor,
): Promise<{ pointsRedemption: PointsRedemption }> {
  const patch = parseInput(pointsRedemptionUpdateSchema, input);
  return inTransaction(db, async (trx) => {
    const current = toPointsRedemption(await getOptionRow(trx, shopId, id, 'id', true), null);
    const changes = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
    const { sortIndex, ...values } = parseInput(pointsRedemptionInputSchema, {
      ...Object.fromEntries(Object.keys(optionFields).map((k) => [k, current[k as keyof OptionValues]])),
      ...changes,
    });
    const row = await trx
      .updateTable('points_redemptions')
      .set({ ...toColumns(values), sort_index: sortIndex ?? current.sortIndex, updated_at: new Date() })
      .where('id', '=', current._id)
      .returningAll()
      .executeTakeFirstOrThrow();
    const pointsRedemption = toPointsRedemption(row, null);
    await recordAudit(trx, shopId, actor, { kind: 'pointsRedemption.update', subject: { type: 'pointsRedemption', id: row.id }, ...changedFields(current, pointsRedemption) });
    return { pointsRedemption };
  });
}

/** Deletes an option. Codes issued from it stay valid: they carry their own type and value. */
export async function deletePointsRedemption(db: DB, shopId: string, id: string, actor?: Actor): Promise<{ pointsRedemption: PointsRedemption }> {
  return inTransaction(db, async (trx) => {
    const row = await getOptionRow(trx, shopId, id, 'id', true);
    await trx.deleteFrom('points_redemptions').where('id', '=', row.id).execute();
    const pointsRedemption = toPointsRedemption(row, null);
    await recordAudit(trx, shopId, actor, { kind: 'pointsRedemption.delete', subject: { type: 'pointsRedemption', id: row.id }, before: pointsRedemption });
    return { pointsRedemption };
  });
}

function optionsOf(db: Queryable, shopId: string) {
  return db.selectFrom('points_redemptions').selectAll().where('shop_id', '=', shopId).orderBy('sort_index').orderBy('id');
}

/** GET /pointsRedemptions: one page of the shop's options by sortIndex, flagged for the customer. */
export async function pagePointsRedemptions(db: DB, shopId: string, query: unknown): Promise<PointsRedemption[]> {
  const { customerIdentifier, ...page } = parseInput(customerPageQuerySchema, query);
  const customer = await getCustomer(db, shopId, customerIdentifier);
  const rows = await optionsOf(db, shopId).offset(offsetOf(page)).limit(page.pageSize).execute();
  const now = new Date();
  return rows.map((row) => toPointsRedemption(row, customer.points, now));
}

/** The options as a keyset-paged list; `redeemable` is for `customerIdentifier` when given. */
export async function listPointsRedemptions(
  db: Queryable,
  shopId: string,
  /** `balance`: the customer's points, when the caller reads the customer anyway (the storefront's first view); else read by `customerIdentifier`. */
  args: PageArgs & { customerIdentifier?: CustomerKey | null | undefined; balance?: Promise<number> },
): Promise<Page<PointsRedemption>> {
  const who = typeof args.customerIdentifier === 'string' ? args.customerIdentifier.trim() : args.customerIdentifier;
  // The balance and the options at once: neither waits for the other.
  const [balance, rows] = await Promise.all([args.balance ?? (who == null ? null : getCustomer(db, shopId, who).then((c) => c.points)), optionsPage(db, shopId, args)]);
  return toOptionsPage(rows, args.first, balance);
}

/**
 * Pages of the shop's options this process read, by database handle, shop and page, with the
 * shop's rewards_version they were read at or after: every write of points_redemptions bumps it
 * (migration 2026_11_28_042), so a page kept under the version a request read is the shop's.
 * Bounded: past MAX_KEPT_PAGES the oldest goes.
 */
const keptPages = new WeakMap<object, Map<string, { version: string; rows: PointsRedemptionRow[] }>>();
const MAX_KEPT_PAGES = 1_000;

/**
 * The storefront's page of rewards for its customer. `version`: the shop's rewards_version, read
 * in the customer's statement (the first view's `me`); a page read at it is used again, so the
 * first view costs no statement for its rewards. Without it, as listPointsRedemptions.
 */
export async function storefrontRewards(
  db: Queryable,
  shopId: string,
  args: PageArgs & { balance: Promise<number>; version?: Promise<string> | undefined },
): Promise<Page<PointsRedemption>> {
  if (!args.version) return listPointsRedemptions(db, shopId, args);
  const version = await args.version;
  let pages = keptPages.get(db);
  if (!pages) keptPages.set(db, (pages = new Map()));
  const key = `${shopId}\n${args.first}\n${args.after ?? ''}`;
  let rows = pages.get(key)?.version === version ? pages.get(key)!.rows : undefined;
  if (!rows) {
    // Read after the version was: never older than it.
    rows = await optionsPage(db, shopId, args);
    pages.delete(key);
    if (pages.size >= MAX_KEPT_PAGES) pages.delete(pages.keys().next().value!);
    pages.set(key, { version, rows });
  }
  return toOptionsPage(rows, args.first, await args.balance);
}

/** One keyset page of the shop's options (and one more row: whether a next page exists). */
function optionsPage(db: Queryable, shopId: string, args: PageArgs): Promise<PointsRedemptionRow[]> {
  let query = optionsOf(db, shopId);
  if (args.after) {
    const [position = '', id = ''] = decodeCursor(args.after, 2);
    const sortIndex = Number(position);
    if (!Number.isSafeInteger(sortIndex)) throw invalidCursor();
    query = query.where((eb) =>
      eb.or([eb('sort_index', '>', sortIndex), eb.and([eb('sort_index', '=', sortIndex), eb('id', '>', id)])]),
    );
  }
  return query.limit(args.first + 1).execute();
}

function toOptionsPage(rows: readonly PointsRedemptionRow[], first: number, balance: number | null): Page<PointsRedemption> {
  const now = new Date();
  return {
    items: rows.slice(0, first).map((row) => ({ node: toPointsRedemption(row, balance, now), cursor: encodeCursor([row.sort_index, row.id]) })),
    hasNextPage: rows.length > first,
  };
}

/** The discount a redemption of `pointsAmount` buys, after the option's rules allow it. */
function discountFor(row: PointsRedemptionRow, pointsAmount: number, now: Date): number {
  if (!row.status) throw new RuleViolationError('reward_inactive', `"${row.name}" is not active`, ['rewardId']);
  if (row.expire_date_type === 'date' && row.expire_date && row.expire_date <= now) {
    throw new RuleViolationError('reward_expired', `"${row.name}" expired at ${row.expire_date.toISOString()}`, ['rewardId']);
  }
  const badAmount = (message: string) => new ValidationError(`pointsAmount: ${message}`, [{ path: 'pointsAmount', message }]);
  const discountValue = Number(row.discount_value);
  if (row.exchange_type !== 'variable') {
    if (pointsAmount !== row.reward_value) throw badAmount(`this reward costs exactly ${row.reward_value} points`);
    return discountValue;
  }
  if (pointsAmount % row.reward_value !== 0) throw badAmount(`must be a multiple of ${row.reward_value} points`);
  // Whole steps times a value with at most two decimals: round away the binary representation error.
  const value = Math.round((pointsAmount / row.reward_value) * discountValue * 100) / 100;
  if (value > MAX_DISCOUNT_VALUE) throw badAmount(`the discount would exceed ${MAX_DISCOUNT_VALUE}`);
  return value;
}

function expiryOf(row: PointsRedemptionRow, now: Date): Date | null {
  if (row.expire_date_type === 'days' && row.expire_days) return new Date(now.getTime() + row.expire_days * 86_400_000);
  if (row.expire_date_type === 'date') return row.expire_date;
  return null;
}

/**
 * Redeems points for a discount code: the deduction, its `redeem_points` ledger entry, the code
 * and the `redemptions/created` event commit together, under the customer's row lock.
 */
export async function redeemPoints(
  db: DB,
  shopId: string,
  input: unknown,
  actor?: Actor,
): Promise<Redeemed> {
  const data = parseInput(pointsRedeemSchema, input);
  return redeem(db, shopId, data.customerIdentifier, data, actor);
}

/** A redemption by the customer of a storefront's token (`input` names no customer). */
export async function redeemOwnPoints(db: DB, shopId: string, customerId: string, input: unknown): Promise<Redeemed> {
  return redeem(db, shopId, { id: customerId }, parseInput(ownRedeemSchema, input));
}

type Redeemed = { discountCode: DiscountCode; activity: Activity; customer: Customer };

/** `actor`: a person's or key's redemption through the admin schema; a customer's own has none. */
async function redeem(db: DB, shopId: string, who: CustomerKey, data: z.output<typeof ownRedeemSchema>, actor?: Actor): Promise<Redeemed> {
  return inTransaction(db, async (trx) => {
    const customer = await lockCustomer(trx, shopId, who);
    const option = await getOptionRow(trx, shopId, data.rewardId, 'rewardId');
    const now = new Date();
    const value = discountFor(option, data.pointsAmount, now);
    let variantId: string | null = null;
    if (option.type === 'free_product') {
      if (!data.variantId) {
        throw new ValidationError('variantId: required for a free_product reward', [{ path: 'variantId', message: 'required' }]);
      }
      if (option.apply_variants.length > 0 && !option.apply_variants.includes(data.variantId)) {
        throw new RuleViolationError('variant_not_eligible', `variant ${data.variantId} is not one this reward offers`, ['variantId']);
      }
      variantId = data.variantId;
    }
    if (data.pointsAmount > customer.points) {
      throw new RuleViolationError(
        'insufficient_points',
        `the customer has ${customer.points} points; the redemption needs ${data.pointsAmount}`,
        ['pointsAmount'],
      );
    }
    const change = await applyBalanceChange(trx, customer, {
      op: 'subtract',
      amount: data.pointsAmount,
      type: 'redeem_points',
      settingType: 'redemption',
      description: `Redeemed for "${option.name}"`,
      note: null,
    });
    const discountCode = await issueDiscountCode(trx, {
      prefix: option.discount_prefix,
      shop_id: shopId,
      customer_id: customer.id,
      reward_id: option.id,
      activity_id: change.activity._id,
      type: option.type,
      value,
      currency: data.currencyActive ?? null,
      variant_id: variantId,
      points_amount: data.pointsAmount,
      expires_at: expiryOf(option, now),
      created_at: now,
    });
    await recordEvent(trx, shopId, 'redemptions/created', discountCode);
    await recordAudit(trx, shopId, actor, {
      kind: 'points.redeem',
      subject: { type: 'customer', id: customer.id },
      before: { points: customer.points },
      after: { points: change.customer.points, activity: change.activity._id, code: discountCode.code, rewardId: option.id },
    }, now);
    return { discountCode, ...change };
  });
}

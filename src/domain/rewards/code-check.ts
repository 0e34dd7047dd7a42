import { z } from 'zod';
import type { Queryable } from '../../db/transaction.js';
import type { RedemptionType } from '../codes/index.js';
import { currencyExponent, currencySchema, formatMoney, MAX_MINOR, parseInput, parseMoney, validationErrorFrom } from '../kernel/index.js';
import type { APPLY_PRODUCT_OPTIONS, MINIMUM_REQUIREMENT_TYPES } from './redemptions.js';

/**
 * The checkout's question (DESIGN.md "Rewards at checkout"): what a code gives for a cart, by its
 * reward's terms, in exact money, changing nothing. `discountForCart` is the arithmetic over plain
 * data; `checkDiscountCode` reads the code and its reward and asks it.
 */

/** Why a code does not apply, in the order they are checked: the first that holds is the answer. */
export const CHECK_REASONS = [
  'code_not_found',
  'other_customer',
  'cancelled',
  'used',
  'expired',
  'currency_mismatch',
  'no_eligible_items',
  'minimum_not_met',
] as const;
export type CheckReason = (typeof CHECK_REASONS)[number];

/** A code's terms: its own type, value, currency and variant, and its reward's conditions. */
export type CodeTerms = {
  type: RedemptionType;
  /** The code's value as stored (numeric): an amount in the cart's currency, a percentage, or a shipping cap (0: all of it). */
  value: string | number;
  currency: string | null;
  /** The variant a free_product code gives. */
  variantId: string | null;
  applyProductOption: (typeof APPLY_PRODUCT_OPTIONS)[number];
  applyProducts: readonly string[];
  applyCollections: readonly string[];
  applyVariants: readonly string[];
  minimumRequirementType: (typeof MINIMUM_REQUIREMENT_TYPES)[number];
  minimumRequirementValue: string | number | null;
};

export type CartLine = { productId: string; variantId: string | null; collectionIds: readonly string[]; quantity: number; priceMinor: number };
/** A cart in integer minor units of its currency. */
export type Cart = { currency: string; lines: readonly CartLine[]; shippingMinor: number };

/** `lines`: indexes of the cart's lines the discount is on (none for shipping). */
export type CartDiscount = { applicable: true; discountMinor: number; lines: number[] } | { applicable: false; reason: CheckReason };

/** A non-negative decimal as an exact fraction units / scale ("12.5" is 125 / 10). */
function decimal(value: string | number): { units: bigint; scale: bigint } {
  const match = /^(\d+)(?:\.(\d+))?$/.exec(String(value));
  if (!match) throw new Error(`stored decimal ${String(value)} does not parse`);
  const [, whole, fraction = ''] = match;
  return { units: BigInt(whole! + fraction), scale: 10n ** BigInt(fraction.length) };
}

/** n / d rounded half up, for n ≥ 0, d > 0. */
const roundHalfUp = (n: bigint, d: bigint) => (2n * n + d) / (2n * d);

function isEligible(terms: CodeTerms, line: CartLine): boolean {
  if (line.quantity <= 0) return false;
  switch (terms.applyProductOption) {
    case 'all':
      return true;
    case 'collections':
      return line.collectionIds.some((id) => terms.applyCollections.includes(id));
    case 'products':
      return terms.applyProducts.includes(line.productId) || (line.variantId !== null && terms.applyVariants.includes(line.variantId));
  }
}

/**
 * What `terms` give for `cart`. The minimum requirement counts the eligible lines only (their
 * subtotal or their quantity), as Shopify's does for a discount on selected products or
 * collections. Amounts in the cart's currency are rounded half up to its minor unit; a discount is
 * never more than what it is on (the eligible lines, the shipping, the one free unit).
 */
export function discountForCart(terms: CodeTerms, cart: Cart): CartDiscount {
  if (terms.currency !== null && terms.currency !== cart.currency) return { applicable: false, reason: 'currency_mismatch' };
  const eligible = cart.lines.flatMap((line, index) => (isEligible(terms, line) ? [index] : []));
  if (eligible.length === 0) return { applicable: false, reason: 'no_eligible_items' };
  const minorUnit = 10n ** BigInt(currencyExponent(cart.currency));
  let subtotal = 0n;
  let quantity = 0n;
  for (const index of eligible) {
    const line = cart.lines[index]!;
    subtotal += BigInt(line.priceMinor) * BigInt(line.quantity);
    quantity += BigInt(line.quantity);
  }
  if (terms.minimumRequirementType !== 'none' && terms.minimumRequirementValue !== null) {
    const minimum = decimal(terms.minimumRequirementValue);
    // Compared as exact fractions: subtotal / minorUnit ≥ units / scale, quantity ≥ units / scale.
    const met =
      terms.minimumRequirementType === 'purchase_amount' ? subtotal * minimum.scale >= minimum.units * minorUnit : quantity * minimum.scale >= minimum.units;
    if (!met) return { applicable: false, reason: 'minimum_not_met' };
  }
  const value = decimal(terms.value);
  const applies = (discount: bigint, lines: number[]): CartDiscount => ({ applicable: true, discountMinor: Number(discount), lines });
  const atMost = (a: bigint, b: bigint) => (a < b ? a : b);
  switch (terms.type) {
    case 'amount':
      return applies(atMost(roundHalfUp(value.units * minorUnit, value.scale), subtotal), eligible);
    case 'percentage':
      return applies(roundHalfUp(subtotal * value.units, 100n * value.scale), eligible);
    case 'shipping': {
      // A shipping reward stores 0 (the default) for free shipping; above 0 it is a cap.
      const shipping = BigInt(cart.shippingMinor);
      return applies(value.units === 0n ? shipping : atMost(roundHalfUp(value.units * minorUnit, value.scale), shipping), []);
    }
    case 'free_product': {
      const index = terms.variantId === null ? -1 : cart.lines.findIndex((line) => line.quantity > 0 && line.variantId === terms.variantId);
      if (index < 0) return { applicable: false, reason: 'no_eligible_items' };
      return applies(BigInt(cart.lines[index]!.priceMinor), [index]);
    }
  }
}

// --- The question as the faces ask it ---------------------------------------------------------

const idText = z.string().trim().min(1).max(255);

/** `{ cart }`: money is a decimal string in the cart's currency, checked once that is known. */
export const discountCodeCheckSchema = z.strictObject({
  cart: z.strictObject({
    currency: currencySchema,
    lineItems: z
      .array(
        z.strictObject({
          productId: idText,
          variantId: idText.nullish(),
          collectionIds: z.array(idText).max(100).nullish(),
          quantity: z.number().int().min(0).max(1_000_000),
          price: z.unknown(),
        }),
      )
      .max(500),
    shippingPrice: z.unknown().optional(),
  }),
});

// Built once: zod compiles an object schema on its first parse.
const codeParams = z.object({ code: z.string().trim().min(1).max(255) });

export type DiscountCodeCheck = {
  code: string;
  applicable: boolean;
  reason: CheckReason | null;
  /** The cart's currency. */
  currency: string;
  /** A decimal string in the cart's currency; zero when not applicable. */
  discount: string;
  /** Indexes into the cart's lineItems the discount is on: the eligible lines (amount, percentage), the free unit's line, none for shipping. */
  lineItems: number[];
};

function cartOf(input: z.output<typeof discountCodeCheckSchema>['cart']): Cart {
  const issues: Array<{ path: PropertyKey[]; message: string }> = [];
  const money = (value: unknown, path: PropertyKey[]): number => {
    const parsed = parseMoney(value, input.currency);
    if (parsed.ok) return parsed.minor;
    issues.push({ path: ['cart', ...path], message: parsed.message });
    return 0;
  };
  const lines = input.lineItems.map((line, i) => ({
    productId: line.productId,
    variantId: line.variantId ?? null,
    collectionIds: line.collectionIds ?? [],
    quantity: line.quantity,
    priceMinor: money(line.price, ['lineItems', i, 'price']),
  }));
  const shippingMinor = input.shippingPrice === undefined || input.shippingPrice === null ? 0 : money(input.shippingPrice, ['shippingPrice']);
  // Bounded like an order, so every discount (at most the cart) is an exact JS number.
  const total = lines.reduce((sum, line) => sum + BigInt(line.priceMinor) * BigInt(line.quantity), 0n);
  if (total > MAX_MINOR) issues.push({ path: ['cart', 'lineItems'], message: 'the lines add up to more than any order can' });
  if (issues.length) throw validationErrorFrom(issues);
  return { currency: input.currency, lines, shippingMinor };
}

/**
 * What code `code` of the shop gives for the cart in `input` (`{ cart }`); reads only. `customerId`:
 * the storefront's customer, for whom another customer's code answers `other_customer` and nothing
 * more of it; null for the shop, which may ask about any of its codes. A code past its expiresAt
 * counts as expired before the scheduler gets to it.
 */
export async function checkDiscountCode(
  db: Queryable,
  shopId: string,
  code: unknown,
  input: unknown,
  customerId: string | null,
  now = new Date(),
): Promise<DiscountCodeCheck> {
  const text = parseInput(codeParams, { code }).code;
  const cart = cartOf(parseInput(discountCodeCheckSchema, input).cart);
  const row = await db
    .selectFrom('discount_codes as c')
    .leftJoin('points_redemptions as r', 'r.id', 'c.reward_id')
    .select([
      'c.customer_id', 'c.status', 'c.expires_at', 'c.type', 'c.value', 'c.currency', 'c.variant_id',
      'r.apply_product_option', 'r.apply_products', 'r.apply_collections', 'r.apply_variants', 'r.minimum_requirement_type', 'r.minimum_requirement_value',
    ])
    .where('c.shop_id', '=', shopId)
    .where('c.code', '=', text)
    .executeTakeFirst();
  const answer = (result: CartDiscount): DiscountCodeCheck => ({
    code: text,
    applicable: result.applicable,
    reason: result.applicable ? null : result.reason,
    currency: cart.currency,
    discount: formatMoney(result.applicable ? result.discountMinor : 0, cart.currency),
    lineItems: result.applicable ? result.lines : [],
  });
  const refused = (reason: CheckReason) => answer({ applicable: false, reason });
  if (!row) return refused('code_not_found');
  if (customerId !== null && row.customer_id !== customerId) return refused('other_customer');
  if (row.status !== 'issued') return refused(row.status);
  if (row.expires_at !== null && row.expires_at <= now) return refused('expired');
  // A code whose reward was deleted keeps its own type and value: on the whole cart, no minimum.
  return answer(
    discountForCart(
      {
        type: row.type as RedemptionType,
        value: row.value,
        currency: row.currency,
        variantId: row.variant_id,
        applyProductOption: (row.apply_product_option ?? 'all') as CodeTerms['applyProductOption'],
        applyProducts: row.apply_products ?? [],
        applyCollections: row.apply_collections ?? [],
        applyVariants: row.apply_variants ?? [],
        minimumRequirementType: (row.minimum_requirement_type ?? 'none') as CodeTerms['minimumRequirementType'],
        minimumRequirementValue: row.minimum_requirement_value ?? null,
      },
      cart,
    ),
  );
}

import { lcm, mulDivFloor } from '../kernel/index.js';

/**
 * What an order's state earns under the snapshot of its rules: pure arithmetic on integer minor
 * units (DESIGN.md "Loyalty engine", Earning rules and Refunds). The net is a function of the
 * state alone, so partial refunds in any order and any number end at the same points, and each
 * new state applies only the difference to what was credited before.
 */

/** A place_order rule as it stood when the order first earned. */
export type EarnRule = {
  id: string;
  name: string;
  earnPoint: number;
  /** earnPoint points per this much eligible money, in minor units of the shop's currency. */
  spentMinor: number;
  includeProductIds: string[];
  excludeProductIds: string[];
  includeCollectionIds: string[];
  excludeCollectionIds: string[];
  includeShipping: boolean;
  includeTax: boolean;
  /** Gift-card lines count too (missing in snapshots taken before the option existed: they do not). */
  includeGiftCards?: boolean;
};

/** Multipliers in basis points (10,000 = ×1), so a tier's ×1.25 stays integer arithmetic. */
export const MULTIPLIER_ONE = 10_000;

export type EarnSnapshot = { rules: EarnRule[]; multiplierBp: number; takenAt: string };

export type LineState = {
  productId: string;
  collectionIds: string[];
  quantity: number;
  priceMinor: number;
  /** The discount on the whole line, not per unit. */
  discountMinor: number;
  refundedQuantity: number;
  /** A gift card sold: money the shop will see again when the card is spent (absent: not one). */
  giftCard?: boolean;
};

export type OrderState = {
  status: 'pending' | 'paid' | 'partially_refunded' | 'refunded' | 'cancelled';
  shippingMinor: number;
  taxMinor: number;
  totalMinor: number;
  refundedMinor: number;
  lineItems: LineState[];
};

/** Statuses whose money the shop keeps (in part): the ones that earn. */
export const EARNING_STATUSES: ReadonlySet<OrderState['status']> = new Set(['paid', 'partially_refunded']);

/** A line's money after its discount, in minor units (never below 0). */
function lineNet(line: LineState): bigint {
  const net = BigInt(line.priceMinor) * BigInt(line.quantity) - BigInt(line.discountMinor);
  return net > 0n ? net : 0n;
}

/**
 * The order's lines in one exact unit, so that no refunded share is rounded before the end: a
 * minor unit is `parts` parts, `parts` the least common multiple of the quantities of the lines
 * refunded in part (1 when none is), so every line's kept share, net × (quantity − refunded) /
 * quantity, is a whole number of parts. Bigints: net × parts can pass 2^53.
 */
type ExactLines = {
  parts: bigint;
  /** Each line's net less its refunded units, in parts. */
  kept: bigint[];
  /** The value of every refunded unit of the order, in parts. */
  refunded: bigint;
};

function exactLines(lines: LineState[]): ExactLines {
  let parts = 1n;
  for (const line of lines) if (line.refundedQuantity > 0 && line.refundedQuantity < line.quantity) parts = lcm(parts, BigInt(line.quantity));
  let refunded = 0n;
  const kept = lines.map((line) => {
    const net = lineNet(line) * parts;
    const share = line.refundedQuantity === 0 ? net : line.refundedQuantity >= line.quantity ? 0n : (net / BigInt(line.quantity)) * BigInt(line.quantity - line.refundedQuantity);
    refunded += net - share;
    return share;
  });
  return { parts, kept, refunded };
}

function ruleCovers(rule: EarnRule, line: LineState): boolean {
  if (line.giftCard && !rule.includeGiftCards) return false;
  if (rule.excludeProductIds.includes(line.productId)) return false;
  if (line.collectionIds.some((c) => rule.excludeCollectionIds.includes(c))) return false;
  const included = rule.includeProductIds.length === 0 && rule.includeCollectionIds.length === 0;
  return included || rule.includeProductIds.includes(line.productId) || line.collectionIds.some((c) => rule.includeCollectionIds.includes(c));
}

/**
 * The money a rule counts, floored to the minor unit once: its lines after discounts and refunded
 * units, plus shipping and tax when it says so. Money refunded beyond the refunded units' value
 * shrinks that in proportion to what the shop keeps of the rest: × (total − refunded) / (total −
 * the refunded units' value), as Square prorates. Exact until the one floor (`lines` in parts).
 */
export function eligibleMinor(rule: EarnRule, state: OrderState, lines: ExactLines = exactLines(state.lineItems)): number {
  let eligible = 0n;
  state.lineItems.forEach((line, i) => {
    if (ruleCovers(rule, line)) eligible += lines.kept[i]!;
  });
  if (rule.includeShipping) eligible += BigInt(state.shippingMinor) * lines.parts;
  if (rule.includeTax) eligible += BigInt(state.taxMinor) * lines.parts;
  const refunded = BigInt(state.refundedMinor) * lines.parts;
  if (refunded <= lines.refunded) return Number(eligible / lines.parts);
  // Everything refunded (more is refused by orders.ts): nothing kept. Past this, the divisor below
  // is positive: total × parts > refunded × parts > the units' value.
  if (state.refundedMinor >= state.totalMinor) return 0;
  // Money beyond the units: of the total they left, parts (total − units), the shop keeps total − refunded.
  // In minor units, eligible / parts × (total − refunded) / ((total × parts − units) / parts).
  return Number((eligible * BigInt(state.totalMinor - state.refundedMinor)) / (BigInt(state.totalMinor) * lines.parts - lines.refunded));
}

/** floor(eligible / spent) × earnPoint × multiplier, floored once. */
export function rulePoints(rule: EarnRule, state: OrderState, multiplierBp: number, lines: ExactLines = exactLines(state.lineItems)): number {
  // floor(floor(x) / spent) = floor(x / spent): eligible's floor is no second rounding.
  const units = Math.floor(eligibleMinor(rule, state, lines) / rule.spentMinor);
  // In bigints inside: units × earnPoint alone can pass 2^53 on an absurd order (which the caller refuses).
  return mulDivFloor(units, rule.earnPoint * multiplierBp, MULTIPLIER_ONE);
}

/** The points the state earns in all: nothing before it is paid, nothing once refunded in full or cancelled. */
export function orderPoints(snapshot: EarnSnapshot | null, state: OrderState): number {
  if (!snapshot || !EARNING_STATUSES.has(state.status)) return 0;
  const lines = exactLines(state.lineItems);
  return snapshot.rules.reduce((sum, rule) => sum + rulePoints(rule, state, snapshot.multiplierBp, lines), 0);
}

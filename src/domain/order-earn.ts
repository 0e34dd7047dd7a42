import { mulDivFloor } from './money.js';

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

const lineNet = (line: LineState) => Math.max(0, line.priceMinor * line.quantity - line.discountMinor);

/** A line's net less the share of its refunded units. */
const lineKept = (line: LineState) => (line.quantity === 0 ? 0 : mulDivFloor(lineNet(line), line.quantity - line.refundedQuantity, line.quantity));

function ruleCovers(rule: EarnRule, line: LineState): boolean {
  if (line.giftCard && !rule.includeGiftCards) return false;
  if (rule.excludeProductIds.includes(line.productId)) return false;
  if (line.collectionIds.some((c) => rule.excludeCollectionIds.includes(c))) return false;
  const included = rule.includeProductIds.length === 0 && rule.includeCollectionIds.length === 0;
  return included || rule.includeProductIds.includes(line.productId) || line.collectionIds.some((c) => rule.includeCollectionIds.includes(c));
}

/**
 * The money a rule counts: its lines after discounts and refunded units, plus shipping and tax
 * when it says so. A refund given as money alone (more refunded than the refunded units explain)
 * shrinks that in proportion to what the shop keeps: × (total − refunded) / total, as Square prorates.
 */
export function eligibleMinor(rule: EarnRule, state: OrderState): number {
  let eligible = 0;
  for (const line of state.lineItems) if (ruleCovers(rule, line)) eligible += lineKept(line);
  if (rule.includeShipping) eligible += state.shippingMinor;
  if (rule.includeTax) eligible += state.taxMinor;
  const explained = state.lineItems.reduce((sum, line) => sum + lineNet(line) - lineKept(line), 0);
  const moneyOnly = Math.max(0, state.refundedMinor - explained);
  if (moneyOnly === 0) return eligible;
  // Of the total not already refunded by units, the share the shop keeps.
  const base = Math.max(0, state.totalMinor - explained);
  return base === 0 ? 0 : mulDivFloor(eligible, Math.max(0, base - moneyOnly), base);
}

/** floor(eligible / spent) × earnPoint × multiplier, floored once. */
export function rulePoints(rule: EarnRule, state: OrderState, multiplierBp: number): number {
  const units = Math.floor(eligibleMinor(rule, state) / rule.spentMinor);
  // In bigints inside: units × earnPoint alone can pass 2^53 on an absurd order (which the caller refuses).
  return mulDivFloor(units, rule.earnPoint * multiplierBp, MULTIPLIER_ONE);
}

/** The points the state earns in all: nothing before it is paid, nothing once refunded in full or cancelled. */
export function orderPoints(snapshot: EarnSnapshot | null, state: OrderState): number {
  if (!snapshot || !EARNING_STATUSES.has(state.status)) return 0;
  return snapshot.rules.reduce((sum, rule) => sum + rulePoints(rule, state, snapshot.multiplierBp), 0);
}

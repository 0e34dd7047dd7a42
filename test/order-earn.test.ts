import { describe, expect, it } from 'vitest';
import { type EarnRule, type EarnSnapshot, eligibleMinor, type LineState, MULTIPLIER_ONE, orderPoints, type OrderState } from '../src/domain/order-earn.js';

const rule = (overrides: Partial<EarnRule> = {}): EarnRule => ({
  id: 'r1',
  name: '1 point per $1',
  earnPoint: 1,
  spentMinor: 100,
  includeProductIds: [],
  excludeProductIds: [],
  includeCollectionIds: [],
  excludeCollectionIds: [],
  includeShipping: false,
  includeTax: false,
  ...overrides,
});
const snapshot = (...rules: EarnRule[]): EarnSnapshot => ({ rules, multiplierBp: MULTIPLIER_ONE, takenAt: '2026-11-24T00:00:00Z' });
const line = (productId: string, quantity: number, priceMinor: number, extra: Partial<LineState> = {}): LineState => ({
  productId,
  collectionIds: [],
  quantity,
  priceMinor,
  discountMinor: 0,
  refundedQuantity: 0,
  ...extra,
});
/** An order of two lines: 2 × shirt at $25.00 (in collection "tops", $5.00 off the line) and 1 × mug at $12.99; shipping $5, tax $4.30. */
const order = (overrides: Partial<OrderState> = {}, lines?: LineState[]): OrderState => {
  const lineItems = lines ?? [line('shirt', 2, 2500, { collectionIds: ['tops'], discountMinor: 500 }), line('mug', 1, 1299)];
  return { status: 'paid', shippingMinor: 500, taxMinor: 430, totalMinor: 4500 + 1299 + 500 + 430, refundedMinor: 0, lineItems, ...overrides };
};

describe('order earn arithmetic', () => {
  // Lines net of discount: shirts 4,500, mug 1,299 → 5,799; total 6,729.
  it.each<[string, EarnRule[], OrderState, number]>([
    ['1 pt / $1 on the lines', [rule()], order(), 57],
    ['10 pts / $1', [rule({ earnPoint: 10 })], order(), 570],
    ['5 pts / $10: floor first, then × earnPoint', [rule({ earnPoint: 5, spentMinor: 1000 })], order(), 25],
    ['with shipping', [rule({ includeShipping: true })], order(), 62],
    ['with shipping and tax', [rule({ includeShipping: true, includeTax: true })], order(), 67],
    ['only products "mug"', [rule({ includeProductIds: ['mug'] })], order(), 12],
    ['only collection "tops"', [rule({ includeCollectionIds: ['tops'] })], order(), 45],
    ['all but collection "tops"', [rule({ excludeCollectionIds: ['tops'] })], order(), 12],
    ['exclude wins over include', [rule({ includeProductIds: ['mug', 'shirt'], excludeProductIds: ['mug'] })], order(), 45],
    ['two rules add up', [rule(), rule({ id: 'r2', includeProductIds: ['mug'], earnPoint: 2 })], order(), 57 + 24],
    ['pending: nothing yet', [rule()], order({ status: 'pending' }), 0],
    ['cancelled: nothing', [rule()], order({ status: 'cancelled' }), 0],
    ['refunded in full: nothing', [rule()], order({ status: 'refunded', refundedMinor: 6729 }), 0],
    ['one shirt refunded by units', [rule()], order({ status: 'partially_refunded', refundedMinor: 2250 }, [line('shirt', 2, 2500, { collectionIds: ['tops'], discountMinor: 500, refundedQuantity: 1 }), line('mug', 1, 1299)]), 35],
    // Money only: eligible 5,799 × (6,729 − 2,000) / 6,729 = 4,075.3 → 40 points.
    ['$20 refunded as money only', [rule()], order({ status: 'partially_refunded', refundedMinor: 2000 }), 40],
    ['a free order', [rule()], order({ totalMinor: 0, shippingMinor: 0, taxMinor: 0 }, [line('gift', 1, 0)]), 0],
  ])('%s', (_name, rules, state, points) => {
    expect(orderPoints(snapshot(...rules), state)).toBe(points);
  });

  it('earns nothing without a snapshot (no rule was active when it was paid)', () => {
    expect(orderPoints(null, order())).toBe(0);
  });

  it('a multiplier applies once, after the floor', () => {
    expect(orderPoints({ ...snapshot(rule({ earnPoint: 3, spentMinor: 1000 })), multiplierBp: 12_500 }, order())).toBe(Math.floor(5 * 3 * 1.25));
  });

  // Tier multipliers × rules × refunds: floor(eligible / spent) × earnPoint × multiplier, floored once.
  // The order's lines net 5,799 of a 6,729 total; a money-only refund of 2,243 keeps 2/3 of it: 3,866.
  it.each<[string, number, Partial<EarnRule>, Partial<OrderState>, number]>([
    ['×1, 1 pt / $1', 10_000, {}, {}, 57],
    ['×1.5, 1 pt / $1', 15_000, {}, {}, 85],
    ['×1.25, 3 pts / $10: 5 × 3 × 1.25 = 18.75', 12_500, { earnPoint: 3, spentMinor: 1000 }, {}, 18],
    ['×1.3333, 1 pt / $7: 8 × 1.3333 = 10.67', 13_333, { spentMinor: 700 }, {}, 10],
    ['×2, 7 pts / $3: 19 × 7 × 2', 20_000, { earnPoint: 7, spentMinor: 300 }, {}, 266],
    ['×100, 1 pt / $10', 1_000_000, { spentMinor: 1000 }, {}, 500],
    ['×1.5 after a money-only refund of a third: 38 × 1.5', 15_000, {}, { refundedMinor: 2243, status: 'partially_refunded' }, 57],
    ['×2 after a full refund', 20_000, {}, { refundedMinor: 6729, status: 'refunded' }, 0],
    ['×2, cancelled', 20_000, {}, { status: 'cancelled' }, 0],
  ])('%s', (_name, multiplierBp, ruleFields, state, points) => {
    expect(orderPoints({ ...snapshot(rule(ruleFields)), multiplierBp }, order(state))).toBe(points);
  });

  it.each<[string, number]>([
    ['JPY (no minor unit), 1 pt per ¥100: ¥12,345 earns 123', 100],
    ['KWD (3 decimals), 1 pt per 1.000 KWD: 12.345 KWD earns 12', 1000],
  ])('%s', (_name, spentMinor) => {
    const state = order({ shippingMinor: 0, taxMinor: 0, totalMinor: 12_345 }, [line('x', 1, 12_345)]);
    expect(orderPoints(snapshot(rule({ spentMinor })), state)).toBe(Math.floor(12_345 / spentMinor));
  });

  // The same final state, reached by partial refunds in any order and number, earns the same.
  const paid = order();
  const steps: Array<(s: OrderState) => OrderState> = [
    // A shirt back by units.
    (s) => ({ ...s, refundedMinor: s.refundedMinor + 2250, lineItems: s.lineItems.map((l) => (l.productId === 'shirt' ? { ...l, refundedQuantity: l.refundedQuantity + 1 } : l)) }),
    // The mug back by units.
    (s) => ({ ...s, refundedMinor: s.refundedMinor + 1299, lineItems: s.lineItems.map((l) => (l.productId === 'mug' ? { ...l, refundedQuantity: 1 } : l)) }),
    // Shipping refunded as money.
    (s) => ({ ...s, refundedMinor: s.refundedMinor + 500 }),
  ];
  const orders = [
    [0, 1, 2],
    [2, 1, 0],
    [1, 2, 0],
    [2, 0, 1],
  ];
  it.each(orders)('partial refunds in the order %j end at the same points', (...sequence) => {
    let state = paid;
    for (const i of sequence) state = { ...steps[i]!(state), status: 'partially_refunded' };
    const reference = steps.reduce((s, step) => step(s), paid);
    expect(state).toEqual({ ...reference, status: 'partially_refunded' });
    expect(orderPoints(snapshot(rule()), state)).toBe(orderPoints(snapshot(rule()), { ...reference, status: 'partially_refunded' }));
  });

  it('the money-only share never counts a unit refund twice', () => {
    // Units explain the whole refund: no proration on top of them.
    const state = order({ status: 'partially_refunded', refundedMinor: 1299 }, [line('shirt', 2, 2500, { discountMinor: 500 }), line('mug', 1, 1299, { refundedQuantity: 1 })]);
    expect(eligibleMinor(rule(), state)).toBe(4500);
  });
});

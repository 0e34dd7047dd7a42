import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { type EarnRule, type EarnSnapshot, eligibleMinor, type LineState, MULTIPLIER_ONE, orderPoints, type OrderState } from '../src/domain/orders/order-earn.js';

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

// Issue 31, item 9: a refunded unit's value is a fraction of a minor unit more often than not
// (one of three units of a 1.00 line is 0.333…). It stays exact through the sum, the money-only
// proration and shipping and tax; the eligible amount is floored once, at the end.
describe('refunded units are exact until the one floor', () => {
  /** Three lines of 3 × (0.34 − 0.02) = 1.00 in USD; the same digits in JPY (¥34, ¥100) and KWD (0.334 − 0.002). */
  const currencies = [
    ['USD', 34, 100],
    ['JPY', 34, 100],
    ['KWD', 334, 1000],
  ] as const;
  const threeLines = (price: number, refundedQuantity: number) => ['a', 'b', 'c'].map((id) => line(id, 3, price, { discountMinor: 2, refundedQuantity }));
  const state = (price: number, one: number, refundedQuantity: number, refundedMinor: number, extra: Partial<OrderState> = {}): OrderState => ({
    status: refundedMinor === 0 ? 'paid' : 'partially_refunded',
    shippingMinor: 0,
    taxMinor: 0,
    totalMinor: 3 * one,
    refundedMinor,
    lineItems: threeLines(price, refundedQuantity),
    ...extra,
  });

  // [case, units refunded per line, refunded (in the currency's "one"s, as minor units: one = 1.00), the rule's spent (one, or a minor unit), points]
  it.each(
    currencies.flatMap(([currency, price, one]) =>
      (
        [
          ['paid, nothing back', 0, 0, one, 3],
          // 3 × (1.00 − 0.333…) = 2.00 exactly: 2 points (rounded per line, 3 × 0.66 = 1.98: 1 point).
          ['one unit of each line back, 1.00 refunded', 1, one, one, 2],
          ['the same, 1 point per minor unit', 1, one, 1, 2 * one],
          ['two units of each line back', 2, 2 * one, one, 1],
          // The refund's cent beyond the units (1.00) is money only: 2.00 × (3.00 − 1.01) / (3.00 − 1.00) = 1.99.
          ['one unit of each back, 1.01 refunded', 1, one + 1, 1, 2 * one - 1],
          // Units worth 1.00 refunded as 0.99: nothing beyond them, nothing prorated.
          ['one unit of each back, 0.99 refunded', 1, one - 1, 1, 2 * one],
        ] as const
      ).map(([name, units, refunded, spent, points]) => [`${currency}: ${name}`, price, one, units, refunded, spent, points] as const),
    ),
  )('%s', (_name, price, one, units, refunded, spent, points) => {
    expect(orderPoints(snapshot(rule({ spentMinor: spent })), state(price, one, units, refunded))).toBe(points);
  });

  it.each<[string, Partial<EarnRule>, Partial<OrderState>, number]>([
    // Lines of 3 and 7 units: 1.00 less a third and 7 × 0.15 − 0.02 = 1.03 less two sevenths keep
    // 200/3 + 515/7 = 2945/21 = 140.24 → 140 (per line, 66 + 73 = 139).
    ['quantities 3 and 7', {}, {}, 140],
    // Shipping 0.50 and tax 0.07 join the exact sum before the floor: 140.24 + 57 = 197.24 → 197.
    ['with shipping and tax', { includeShipping: true, includeTax: true }, {}, 197],
    // The units are worth 100/3 + 206/7 = 1318/21 = 62.76; 0.70 refunded prorates the rest:
    // 2945/21 × (260 − 70) / (260 − 1318/21) = 2945 × 190 / 4142 = 135.09 → 135 (per line, 134).
    ['money beyond the units, prorated exactly', {}, { refundedMinor: 70 }, 135],
  ])('%s', (_name, ruleFields, overrides, points) => {
    const lines = [line('a', 3, 34, { discountMinor: 2, refundedQuantity: 1 }), line('b', 7, 15, { discountMinor: 2, refundedQuantity: 2 })];
    // 0.62 refunded: less than the units' value, so nothing is prorated.
    const mixed: OrderState = { status: 'partially_refunded', shippingMinor: 50, taxMinor: 7, totalMinor: 100 + 103 + 57, refundedMinor: 62, lineItems: lines, ...overrides };
    expect(orderPoints(snapshot(rule({ spentMinor: 1, ...ruleFields })), mixed)).toBe(points);
  });

  it('an absurd order stays exact in bigints (quantities whose least common multiple passes 2^53)', () => {
    // Six lines, each of a different prime count of units at 10,000,000.00, one unit of each refunded.
    const primes = [999_983, 999_979, 999_961, 999_959, 999_953, 999_931];
    const lines = primes.map((q, i) => line(`p${i}`, q, 1_000_000_000, { refundedQuantity: 1 }));
    const net = primes.reduce((sum, q) => sum + BigInt(q) * 1_000_000_000n, 0n);
    const state: OrderState = { status: 'partially_refunded', shippingMinor: 0, taxMinor: 0, totalMinor: Number(net), refundedMinor: 6_000_000_000, lineItems: lines };
    // Each line keeps (q − 1) units of 1,000,000,000: exactly net − 6,000,000,000.
    expect(eligibleMinor(rule(), state)).toBe(Number(net) - 6_000_000_000);
  });

  /**
   * An independent model of the docs' rule, in fractions (bigint numerator and denominator): each
   * line keeps net × (quantity − refunded) / quantity; the money refunded beyond the refunded units'
   * value shrinks the eligible amount by (total − refunded) / (total − the units' value); points are
   * floor(eligible / spent) × earnPoint.
   */
  function modelPoints(spent: number, earnPoint: number, s: OrderState, withShipping: boolean): number {
    type Q = [bigint, bigint];
    const add = ([a, b]: Q, [c, d]: Q): Q => [a * d + c * b, b * d];
    const mul = ([a, b]: Q, [c, d]: Q): Q => [a * c, b * d];
    const int = (n: number): Q => [BigInt(n), 1n];
    const less = ([a, b]: Q, [c, d]: Q) => a * d < c * b;
    let kept: Q = int(0);
    let units: Q = int(0);
    for (const l of s.lineItems) {
      const net = Math.max(0, l.priceMinor * l.quantity - l.discountMinor);
      if (l.quantity === 0) continue;
      kept = add(kept, [BigInt(net * (l.quantity - l.refundedQuantity)), BigInt(l.quantity)]);
      units = add(units, [BigInt(net * l.refundedQuantity), BigInt(l.quantity)]);
    }
    let eligible = withShipping ? add(kept, int(s.shippingMinor)) : kept;
    if (less(units, int(s.refundedMinor))) {
      const base = add(int(s.totalMinor), mul(units, int(-1)));
      eligible = mul(mul(eligible, int(s.totalMinor - s.refundedMinor)), [base[1], base[0]]);
    }
    const [n, d] = eligible;
    return Number(n / (d * BigInt(spent))) * earnPoint;
  }

  it('agrees with an independent model in fractions on 3,000 random orders and refunds (USD, JPY, KWD)', () => {
    const lineArb = fc.record({ quantity: fc.integer({ min: 1, max: 12 }), price: fc.integer({ min: 0, max: 5_000 }), discountShare: fc.integer({ min: 0, max: 100 }), back: fc.integer({ min: 0, max: 12 }) });
    const orderArb = fc.record({
      one: fc.constantFrom(1, 100, 1000),
      lines: fc.array(lineArb, { minLength: 1, maxLength: 6 }),
      shipping: fc.integer({ min: 0, max: 2_000 }),
      extraTotal: fc.integer({ min: 0, max: 3_000 }),
      moneyShare: fc.integer({ min: 0, max: 100 }),
      spentShare: fc.integer({ min: 1, max: 300 }),
      earnPoint: fc.integer({ min: 1, max: 5 }),
      withShipping: fc.boolean(),
    });
    fc.assert(
      fc.property(orderArb, (o) => {
        const lineItems = o.lines.map((l, i) =>
          line(`p${i}`, l.quantity, l.price, { discountMinor: Math.floor((l.price * l.quantity * l.discountShare) / 200), refundedQuantity: Math.min(l.back, l.quantity) }),
        );
        const lines = lineItems.reduce((sum, l) => sum + l.priceMinor * l.quantity - l.discountMinor, 0);
        const totalMinor = lines + o.shipping + o.extraTotal;
        const s: OrderState = { status: 'partially_refunded', shippingMinor: o.shipping, taxMinor: 0, totalMinor, refundedMinor: Math.floor((totalMinor * o.moneyShare) / 100), lineItems };
        const spent = Math.max(1, Math.floor((o.one * o.spentShare) / 100));
        const r = rule({ spentMinor: spent, earnPoint: o.earnPoint, includeShipping: o.withShipping });
        expect(orderPoints(snapshot(r), s)).toBe(modelPoints(spent, o.earnPoint, s, o.withShipping));
      }),
      { numRuns: 3_000, seed: 31 },
    );
  });
});

import { describe, expect, it } from 'vitest';
import { parseMoney } from '../src/domain/kernel/money.js';
import { type Cart, type CodeTerms, discountForCart } from '../src/domain/rewards/index.js';

// The check's arithmetic from tables: money in, money out, as decimal strings of the cart's currency.

type Line = [productId: string, variantId: string, collections: string[], quantity: number, price: string];

function cart(currency: string, lines: Line[], shipping = '0'): Cart {
  const minor = (text: string) => {
    const parsed = parseMoney(text, currency);
    if (!parsed.ok) throw new Error(parsed.message);
    return parsed.minor;
  };
  return {
    currency,
    lines: lines.map(([productId, variantId, collectionIds, quantity, price]) => ({ productId, variantId, collectionIds, quantity, priceMinor: minor(price) })),
    shippingMinor: minor(shipping),
  };
}

const terms = (over: Partial<CodeTerms>): CodeTerms => ({
  type: 'amount',
  value: '0',
  currency: null,
  variantId: null,
  applyProductOption: 'all',
  applyProducts: [],
  applyCollections: [],
  applyVariants: [],
  minimumRequirementType: 'none',
  minimumRequirementValue: null,
  ...over,
});

/** The answer as a row of the table: a decimal string and the lines, or the reason. */
function asked(t: CodeTerms, c: Cart): string | [string, number[]] {
  const result = discountForCart(t, c);
  if (!result.applicable) return result.reason;
  const exponent = c.currency === 'JPY' ? 0 : c.currency === 'KWD' ? 3 : 2;
  const text = exponent === 0 ? String(result.discountMinor) : (result.discountMinor / 10 ** exponent).toFixed(exponent);
  return [text, result.lines];
}

// Subtotal 49.47: 2 × 19.99 + 8.50 + 3 × 0.33; quantity 6; shipping 7.00.
const USD = cart(
  'USD',
  [
    ['shirt', 'shirt-m', ['summer'], 2, '19.99'],
    ['mug', 'mug-1', ['kitchen'], 1, '8.50'],
    ['cap', 'cap-1', ['summer', 'sale'], 3, '0.33'],
  ],
  '7.00',
);

describe('every reward type × apply option × minimum requirement (USD)', () => {
  // What each apply option makes eligible in USD: the lines, their subtotal and quantity.
  const OPTIONS = {
    all: { terms: {}, lines: [0, 1, 2], subtotal: '49.47', over: '49.48', quantity: 6 },
    collections: { terms: { applyCollections: ['summer'] }, lines: [0, 2], subtotal: '40.97', over: '40.98', quantity: 5 },
    products: { terms: { applyProducts: ['mug'], applyVariants: ['cap-1'] }, lines: [1, 2], subtotal: '9.49', over: '9.50', quantity: 4 },
  } as const;
  // What each type gives under each option: amount 10 (capped at 9.49), 10 % (rounded half up), shipping up to 5, the mug free.
  const TYPES = {
    amount: { terms: { value: '10' }, all: '10.00', collections: '10.00', products: '9.49' },
    percentage: { terms: { value: '10' }, all: '4.95', collections: '4.10', products: '0.95' },
    shipping: { terms: { value: '5' }, all: '5.00', collections: '5.00', products: '5.00' },
    free_product: { terms: { variantId: 'mug-1' }, all: '8.50', collections: '8.50', products: '8.50' },
  } as const;
  const rows = Object.entries(TYPES).flatMap(([type, byType]) =>
    Object.entries(OPTIONS).flatMap(([option, o]) => {
      const lines = type === 'shipping' ? [] : type === 'free_product' ? [1] : [...o.lines];
      const gives: [string, number[]] = [byType[option as keyof typeof OPTIONS], lines];
      const minimums: Array<[Partial<CodeTerms>, string | [string, number[]]]> = [
        [{ minimumRequirementType: 'none' }, gives],
        [{ minimumRequirementType: 'purchase_amount', minimumRequirementValue: o.subtotal }, gives],
        [{ minimumRequirementType: 'purchase_amount', minimumRequirementValue: o.over }, 'minimum_not_met'],
        [{ minimumRequirementType: 'quantity', minimumRequirementValue: o.quantity }, gives],
        [{ minimumRequirementType: 'quantity', minimumRequirementValue: String(o.quantity + 1) }, 'minimum_not_met'],
      ];
      return minimums.map(([minimum, expected]) => ({
        name: `${type} / ${option} / ${minimum.minimumRequirementType} ${minimum.minimumRequirementValue ?? ''}`,
        terms: terms({ type: type as CodeTerms['type'], ...byType.terms, applyProductOption: option as CodeTerms['applyProductOption'], ...o.terms, ...minimum }),
        expected,
      }));
    }),
  );

  it('has all 60 combinations', () => expect(rows).toHaveLength(4 * 3 * 5));
  it.each(rows)('$name', ({ terms: t, expected }) => expect(asked(t, USD)).toEqual(expected));
});

// Subtotal 4450 yen: 3 × 1200 + 850; shipping 500.
const JPY = cart('JPY', [['tea', 'tea-1', ['japan'], 3, '1200'], ['cup', 'cup-1', [], 1, '850']], '500');
// Subtotal 14.845 dinars: 2 × 1.250 + 12.345; shipping 0.750.
const KWD = cart('KWD', [['dates', 'dates-1', ['food'], 2, '1.250'], ['oud', 'oud-1', ['gifts'], 1, '12.345']], '0.750');

describe('edge cases, in USD, JPY (no decimals) and KWD (three)', () => {
  const rows: Array<[string, Partial<CodeTerms>, Cart, string | [string, number[]]]> = [
    // amount
    ['amount below the eligible subtotal', { value: '5.5' }, USD, ['5.50', [0, 1, 2]]],
    ['amount above the eligible subtotal: never more than it', { value: '60' }, USD, ['49.47', [0, 1, 2]]],
    ['amount above the one eligible line', { value: '10', applyProductOption: 'collections', applyCollections: ['kitchen'] }, USD, ['8.50', [1]]],
    ['amount stored as a number', { value: 5 }, USD, ['5.00', [0, 1, 2]]],
    ['amount in yen', { value: '500' }, JPY, ['500', [0, 1]]],
    ['amount above the yen subtotal', { value: '5000' }, JPY, ['4450', [0, 1]]],
    ['amount with cents, in yen: rounded half up to the yen', { value: '99.50' }, JPY, ['100', [0, 1]]],
    ['amount in dinars', { value: '5' }, KWD, ['5.000', [0, 1]]],
    ['amount above the dinar subtotal', { value: '20' }, KWD, ['14.845', [0, 1]]],
    // percentage, rounded half up to the minor unit
    ['10 % of 49.47 = 4.947', { type: 'percentage', value: '10' }, USD, ['4.95', [0, 1, 2]]],
    ['12.5 % of 49.47 = 6.18375', { type: 'percentage', value: '12.5' }, USD, ['6.18', [0, 1, 2]]],
    ['50 % of 0.99 = 0.495: the half goes up', { type: 'percentage', value: '50', applyProductOption: 'products', applyVariants: ['cap-1'] }, USD, ['0.50', [2]]],
    ['33.33 % of 8.50 = 2.83305', { type: 'percentage', value: '33.33', applyProductOption: 'products', applyProducts: ['mug'] }, USD, ['2.83', [1]]],
    ['100 % is the eligible subtotal', { type: 'percentage', value: '100' }, USD, ['49.47', [0, 1, 2]]],
    ['15 % of 4450 yen = 667.5', { type: 'percentage', value: '15' }, JPY, ['668', [0, 1]]],
    ['12.5 % of the 3600 yen collection', { type: 'percentage', value: '12.5', applyProductOption: 'collections', applyCollections: ['japan'] }, JPY, ['450', [0]]],
    ['10 % of 14.845 dinars = 1.4845', { type: 'percentage', value: '10' }, KWD, ['1.485', [0, 1]]],
    ['3 % of 12.345 dinars = 0.37035', { type: 'percentage', value: '3', applyProductOption: 'collections', applyCollections: ['gifts'] }, KWD, ['0.370', [1]]],
    // shipping: 0 is all of it, above 0 a cap
    ['shipping 0: all of it', { type: 'shipping', value: '0' }, USD, ['7.00', []]],
    ['shipping below its value', { type: 'shipping', value: '10' }, USD, ['7.00', []]],
    ['shipping above its value', { type: 'shipping', value: '5' }, USD, ['5.00', []]],
    ['no shipping to take off', { type: 'shipping', value: '0' }, cart('USD', [['mug', 'mug-1', [], 1, '8.50']]), ['0.00', []]],
    ['shipping in yen, capped', { type: 'shipping', value: '300' }, JPY, ['300', []]],
    ['shipping in yen, all', { type: 'shipping', value: '0' }, JPY, ['500', []]],
    ['shipping in dinars, capped', { type: 'shipping', value: '0.5' }, KWD, ['0.500', []]],
    ['shipping in dinars, below the value', { type: 'shipping', value: '1' }, KWD, ['0.750', []]],
    // free product: one unit of the named variant, if the cart holds it
    ['free product present', { type: 'free_product', variantId: 'mug-1' }, USD, ['8.50', [1]]],
    ['free product: one unit of three', { type: 'free_product', variantId: 'cap-1' }, USD, ['0.33', [2]]],
    ['free product absent', { type: 'free_product', variantId: 'lamp-1' }, USD, 'no_eligible_items'],
    ['free product in yen', { type: 'free_product', variantId: 'cup-1' }, JPY, ['850', [1]]],
    ['free product in dinars', { type: 'free_product', variantId: 'oud-1' }, KWD, ['12.345', [1]]],
    ['free product with quantity 0', { type: 'free_product', variantId: 'mug-1' }, cart('USD', [['mug', 'mug-1', [], 0, '8.50'], ['cap', 'cap-1', [], 1, '1.00']]), 'no_eligible_items'],
    // minimum requirements: the eligible lines only
    ['minimum met by the cart but not by the eligible lines', { minimumRequirementType: 'purchase_amount', minimumRequirementValue: '10', applyProductOption: 'collections', applyCollections: ['kitchen'], value: '1' }, USD, 'minimum_not_met'],
    ['quantity minimum met', { minimumRequirementType: 'quantity', minimumRequirementValue: '3', value: '1' }, KWD, ['1.000', [0, 1]]],
    ['quantity minimum not met', { minimumRequirementType: 'quantity', minimumRequirementValue: '4', value: '1' }, KWD, 'minimum_not_met'],
    ['purchase minimum in dinars, met exactly', { minimumRequirementType: 'purchase_amount', minimumRequirementValue: '2.5', applyProductOption: 'collections', applyCollections: ['food'], value: '1' }, KWD, ['1.000', [0]]],
    ['purchase minimum in yen, met exactly', { minimumRequirementType: 'purchase_amount', minimumRequirementValue: '4450', value: '1' }, JPY, ['1', [0, 1]]],
    ['purchase minimum in yen, one yen short', { minimumRequirementType: 'purchase_amount', minimumRequirementValue: '4451', value: '1' }, JPY, 'minimum_not_met'],
    ['purchase minimum 0.01 above a yen subtotal', { minimumRequirementType: 'purchase_amount', minimumRequirementValue: '4450.01', value: '1' }, JPY, 'minimum_not_met'],
    // no eligible lines
    ['no line in the collections', { value: '5', applyProductOption: 'collections', applyCollections: ['winter'] }, USD, 'no_eligible_items'],
    ['no line of the products', { value: '5', applyProductOption: 'products', applyProducts: ['lamp'], applyVariants: ['lamp-1'] }, USD, 'no_eligible_items'],
    ['an eligible product with quantity 0', { value: '5', applyProductOption: 'products', applyProducts: ['mug'] }, cart('USD', [['mug', 'mug-1', [], 0, '8.50'], ['cap', 'cap-1', [], 1, '1.00']]), 'no_eligible_items'],
    ['an empty cart', { value: '5' }, cart('USD', [], '5.00'), 'no_eligible_items'],
    ['an empty cart, free shipping', { type: 'shipping', value: '0' }, cart('USD', [], '5.00'), 'no_eligible_items'],
    // currency
    ['a code of the cart\'s currency', { value: '5', currency: 'USD' }, USD, ['5.00', [0, 1, 2]]],
    ['a code of another currency', { value: '5', currency: 'EUR' }, USD, 'currency_mismatch'],
    ['a percentage code of another currency', { type: 'percentage', value: '10', currency: 'EUR' }, JPY, 'currency_mismatch'],
  ];
  it.each(rows)('%s', (_name, over, c, expected) => expect(asked(terms({ type: 'amount', ...over }), c)).toEqual(expected));
});

import { z } from 'zod';

/**
 * Money crosses the API as decimal strings ("12.50") and lives in integer minor units of its
 * currency (1250 cents), never as a float: JSON numbers round (0.1 + 0.2), strings do not.
 * A currency's minor unit comes from Intl (ISO 4217): 2 for USD, 0 for JPY, 3 for KWD.
 */

const CURRENCIES = new Set(Intl.supportedValuesOf('currency'));

/** Far beyond any order (ten trillion major units), and minor units stay exact JS integers. */
export const MAX_MINOR = 10n ** 15n;

export function isCurrency(code: string): boolean {
  return CURRENCIES.has(code);
}

const exponents = new Map<string, number>();

/** Digits after the decimal point in `currency`'s minor unit (kept: building an Intl.NumberFormat costs far more than an order's arithmetic). */
export function currencyExponent(currency: string): number {
  let exponent = exponents.get(currency);
  if (exponent === undefined) {
    exponent = new Intl.NumberFormat('en', { style: 'currency', currency }).resolvedOptions().maximumFractionDigits ?? 2;
    // Only codes Intl knows are kept, so the map stays as small as the ISO list.
    if (isCurrency(currency)) exponents.set(currency, exponent);
  }
  return exponent;
}

/** An ISO 4217 code Intl knows, upper case. */
export const currencySchema = z
  .string()
  .trim()
  .transform((code) => code.toUpperCase())
  .refine(isCurrency, 'not an ISO 4217 currency code');

/** A non-negative decimal string: digits, optionally a point and more digits. No sign, exponent or spaces inside. */
const DECIMAL = /^(\d+)(?:\.(\d+))?$/;

export type MoneyParse = { ok: true; minor: number } | { ok: false; message: string };

/**
 * "12.50" in USD is 1250. Refuses what cannot be that currency's amount: more decimals than its
 * minor unit ("12.345" in USD, "1.5" in JPY), a sign, a number that is not a string, or more than MAX_MINOR.
 */
export function parseMoney(value: unknown, currency: string): MoneyParse {
  if (typeof value !== 'string') return { ok: false, message: 'money is a decimal string such as "12.50", not a number' };
  const match = DECIMAL.exec(value.trim());
  if (!match) return { ok: false, message: `"${value.slice(0, 40)}" is not a non-negative decimal amount` };
  const exponent = currencyExponent(currency);
  const [, whole, fraction = ''] = match;
  // Trailing zeros beyond the minor unit say nothing ("12.500" is 12.50); other digits there would be lost.
  const significant = fraction.replace(/0+$/, '');
  if (significant.length > exponent) {
    return { ok: false, message: `${currency} has ${exponent} decimal${exponent === 1 ? '' : 's'}: "${value}" has more` };
  }
  const digits = whole! + significant.padEnd(exponent, '0');
  // Up to 15 digits the amount is below MAX_MINOR and exact as a double: no BigInt for an ordinary
  // price (an order parses a dozen of them).
  if (digits.length <= 15) return { ok: true, minor: Number(digits) };
  const minor = BigInt(digits);
  if (minor > MAX_MINOR) return { ok: false, message: `"${value.slice(0, 40)}" is too large` };
  return { ok: true, minor: Number(minor) };
}

/** 1250 in USD is "12.50"; 1250 in JPY is "1250". */
export function formatMoney(minor: number, currency: string): string {
  const exponent = currencyExponent(currency);
  const digits = String(Math.abs(minor)).padStart(exponent + 1, '0');
  const sign = minor < 0 ? '-' : '';
  return exponent === 0 ? `${sign}${digits}` : `${sign}${digits.slice(0, -exponent)}.${digits.slice(-exponent)}`;
}

/**
 * floor(a × b / c) in exact integer arithmetic, for points (units × earnPoint × a tier's multiplier
 * in basis points / 10,000): such products can overflow 2^53, bigints do not.
 */
export function mulDivFloor(a: number, b: number, c: number): number {
  if (c <= 0) throw new RangeError('mulDivFloor: divisor must be positive');
  const product = a * b;
  // A product that is a safe integer is exact, and so are its remainder and the quotient of the
  // multiple below it: bigints only past 2^53 (an order computes this a few times a line).
  if (Number.isSafeInteger(product)) {
    const rest = product % c;
    return (product - rest) / c - (rest < 0 ? 1 : 0);
  }
  const n = BigInt(a) * BigInt(b);
  const d = BigInt(c);
  const q = n / d;
  // BigInt division truncates toward zero; floor differs for a negative remainder.
  return Number(n % d !== 0n && n < 0n ? q - 1n : q);
}

/** The least common multiple of two positive integers. */
export function lcm(a: bigint, b: bigint): bigint {
  let [x, y] = [a, b];
  while (y !== 0n) [x, y] = [y, x % y];
  return (a / x) * b;
}

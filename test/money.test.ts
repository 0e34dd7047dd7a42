import { describe, expect, it } from 'vitest';
import { currencyExponent, formatMoney, lcm, MAX_MINOR, mulDivFloor, parseMoney } from '../src/domain/kernel/money.js';

describe('money', () => {
  it.each([
    ['USD', 2],
    ['EUR', 2],
    ['JPY', 0],
    ['KWD', 3],
    ['CLP', 0],
  ])('%s has %i decimals', (currency, exponent) => {
    expect(currencyExponent(currency)).toBe(exponent);
  });

  it.each([
    ['12.50', 'USD', 1250],
    ['12.5', 'USD', 1250],
    ['12', 'USD', 1200],
    ['0', 'USD', 0],
    ['0.01', 'USD', 1],
    ['12.500', 'USD', 1250],
    [' 7.10 ', 'EUR', 710],
    ['1500', 'JPY', 1500],
    ['1500.0', 'JPY', 1500],
    ['1.234', 'KWD', 1234],
    ['0.1', 'KWD', 100],
    ['10000000000000.00', 'USD', 1_000_000_000_000_000],
    // Either side of 15 digits, where parsing leaves plain numbers for BigInt.
    ['9999999999999.99', 'USD', 999_999_999_999_999],
    ['999999999999999', 'JPY', 999_999_999_999_999],
    ['1000000000000000', 'JPY', 1_000_000_000_000_000],
    ['0000000000000012.50', 'USD', 1250],
    ['999999999999.999', 'KWD', 999_999_999_999_999],
  ])('parses %j in %s as %i minor units', (value, currency, minor) => {
    expect(parseMoney(value, currency)).toEqual({ ok: true, minor });
  });

  it.each([
    ['12.345', 'USD', 'USD has 2 decimals'],
    ['1.5', 'JPY', 'JPY has 0 decimals'],
    ['1.2345', 'KWD', 'KWD has 3 decimals'],
    ['-1.00', 'USD', 'not a non-negative decimal'],
    ['+1.00', 'USD', 'not a non-negative decimal'],
    ['1e3', 'USD', 'not a non-negative decimal'],
    ['1,50', 'USD', 'not a non-negative decimal'],
    ['.5', 'USD', 'not a non-negative decimal'],
    ['', 'USD', 'not a non-negative decimal'],
    ['NaN', 'USD', 'not a non-negative decimal'],
    ['10000000000000.01', 'USD', 'too large'],
    ['99999999999999999999999', 'JPY', 'too large'],
    ['1000000000000001', 'JPY', 'too large'],
  ])('refuses %j in %s', (value, currency, message) => {
    const parsed = parseMoney(value, currency);
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.message).toContain(message);
  });

  it.each([12.5, 12, null, undefined, { amount: '1' }])('refuses %j: money is a string', (value) => {
    expect(parseMoney(value, 'USD')).toMatchObject({ ok: false, message: expect.stringContaining('decimal string') });
  });

  it.each([
    [1250, 'USD', '12.50'],
    [5, 'USD', '0.05'],
    [0, 'USD', '0.00'],
    [-1250, 'USD', '-12.50'],
    [1500, 'JPY', '1500'],
    [1234, 'KWD', '1.234'],
  ])('formats %i in %s as %j, and back', (minor, currency, text) => {
    expect(formatMoney(minor, currency)).toBe(text);
    if (minor >= 0) expect(parseMoney(text, currency)).toEqual({ ok: true, minor });
  });

  it.each([
    [10, 3, 4, 7],
    [999, 1, 1000, 0],
    [-7, 1, 2, -4],
    // eligible × (total − refunded) / total at the largest amounts: exact, where floats are not.
    [Number(MAX_MINOR), Number(MAX_MINOR) - 1, Number(MAX_MINOR), Number(MAX_MINOR) - 1],
    [9_007_199_254_740_991, 3, 3, 9_007_199_254_740_991],
    // Either side of 2^53, where plain numbers give way to bigints; negative products round down.
    [9_007_199_254_740_991, 1, 2, 4_503_599_627_370_495],
    [9_007_199_254_740_992, 1, 2, 4_503_599_627_370_496],
    [4_503_599_627_370_497, 2, 3, 3_002_399_751_580_331],
    [-9_007_199_254_740_991, 1, 2, -4_503_599_627_370_496],
    [-10, 3, 4, -8],
    [-12, 1, 4, -3],
    [0, 5, 7, 0],
  ])('mulDivFloor(%i, %i, %i) = %i', (a, b, c, expected) => {
    expect(mulDivFloor(a, b, c)).toBe(expected);
  });

  it.each([
    [1n, 3n, 3n],
    [3n, 7n, 21n],
    [4n, 6n, 12n],
    [21n, 7n, 21n],
    [999_983n * 999_979n, 999_961n, 999_983n * 999_979n * 999_961n],
  ])('lcm(%s, %s) = %s', (a, b, expected) => {
    expect(lcm(a, b)).toBe(expected);
  });
});

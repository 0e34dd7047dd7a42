import { createHash, randomBytes } from 'node:crypto';

const ID_PATTERN = /^[0-9a-f]{24}$/;

/**
 * 24 lowercase hex characters, the shape of the contract's `_id` values: 12 of milliseconds
 * since the epoch (so ids sort roughly by creation) and 12 random.
 */
export function newId(): string {
  return Date.now().toString(16).padStart(12, '0').slice(-12) + randomBytesFromPool(6).toString('hex');
}

// Random bytes drawn 4 KiB at a time: a call to the system's generator per id cost bulk writers
// (the customers import draws three ids per row) more than the rest of their CPU time.
let pool = Buffer.alloc(0);
let taken = 0;

function randomBytesFromPool(size: number): Buffer {
  if (taken + size > pool.length) {
    pool = randomBytes(Math.max(4096, size));
    taken = 0;
  }
  taken += size;
  return pool.subarray(taken - size, taken);
}

export function isId(value: string): boolean {
  return ID_PATTERN.test(value);
}

/** Random characters from `alphabet`, without modulo bias. */
export function randomString(length: number, alphabet: string): string {
  const limit = 256 - (256 % alphabet.length);
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytesFromPool(length * 2)) {
      if (byte < limit) out += alphabet[byte % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
}

/** Letters and digits a person can read out and type without confusion: no 0/O, no 1/I/L. */
export const READABLE_ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';

/** SHA-256 of a secret (an API key, a customer access token): what is stored instead of it. */
export function sha256(value: string): Buffer {
  return createHash('sha256').update(value).digest();
}

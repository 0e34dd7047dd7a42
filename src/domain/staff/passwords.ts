import { hash, verify } from '@node-rs/argon2';
import { z } from 'zod';

/**
 * argon2id with the library's defaults (19 MiB, 2 passes, 1 lane: OWASP's minimum for argon2id),
 * salt and parameters inside the stored string, so raising them later still verifies old hashes.
 */
export function hashPassword(password: string): Promise<string> {
  return hash(password);
}

export function passwordMatches(stored: string, password: string): Promise<boolean> {
  return verify(stored, password).catch(() => false);
}

// Verified against when no account has the e-mail, so an unknown address takes as long as a wrong password.
const NOBODY = hashPassword('no account has this password');

/** Checks `password` against `stored`, or spends the same time when there is no account. */
export async function checkPassword(stored: string | undefined, password: string): Promise<boolean> {
  const matches = await passwordMatches(stored ?? (await NOBODY), password);
  return stored !== undefined && matches;
}

/** 10 characters at least; at most 256, since each try costs the server a slow hash of it. */
export const passwordSchema = z.string().min(10, 'at least 10 characters').max(256, 'at most 256 characters');

import type { RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Logger } from '../logger.js';
import { consumeOne, type FlexibleDecision, flexibleLimiters } from './flexible.js';

/**
 * Brute force on the staff doors (sign-in, invite and reset links): failures are counted per
 * account (its e-mail) and per client IP within a window; once either has had its failures, the
 * door answers 429 with Retry-After until the window ends, without checking the password (so the
 * slow hash is no lever either). A successful sign-in clears its account's count.
 */
export type StaffLimits = { failuresPerAccount: number; failuresPerIp: number; windowSeconds: number };

/** Whose failures: the account tried (sign-in, an invite for an existing account) and the client IP. */
export type StaffAttempt = { account?: string | null; ip: string };

export type StaffLimiter = {
  /** Refused when the account or the IP has used up its failures. */
  check(attempt: StaffAttempt): Promise<FlexibleDecision>;
  failed(attempt: StaffAttempt): Promise<void>;
  succeeded(attempt: StaffAttempt): Promise<void>;
  close(): Promise<void>;
};

export async function createStaffLimiter(options: { limits: StaffLimits; redisUrl?: string | undefined; keyPrefix: string; logger: Logger }): Promise<StaffLimiter> {
  const { limits } = options;
  const limiters = await flexibleLimiters({ ...options, keyPrefix: `${options.keyPrefix}staff:`, what: 'staff sign-in limits' });
  const perAccount = limiters.limiter('account', limits.failuresPerAccount, limits.windowSeconds);
  const perIp = limiters.limiter('ip', limits.failuresPerIp, limits.windowSeconds);
  const buckets = (attempt: StaffAttempt): Array<[RateLimiterAbstract, string, string]> => [
    [perIp, attempt.ip, 'client IP'],
    ...(attempt.account ? [[perAccount, attempt.account, 'account'] as [RateLimiterAbstract, string, string]] : []),
  ];
  return {
    async check(attempt) {
      for (const [rl, key, what] of buckets(attempt)) {
        const state = await rl.get(key);
        if (state && state.consumedPoints >= rl.points) {
          const retryAfterSec = Math.max(1, Math.ceil(state.msBeforeNext / 1000));
          return { allowed: false, retryAfterSec, message: `too many failed attempts for this ${what}; retry in ${retryAfterSec} s` };
        }
      }
      return { allowed: true };
    },
    async failed(attempt) {
      // Counted whatever the count already is: a refusal here only says the next check will refuse.
      for (const [rl, key] of buckets(attempt)) await consumeOne(rl, key, () => '');
    },
    async succeeded(attempt) {
      if (attempt.account) await perAccount.delete(attempt.account);
    },
    async close() {
      limiters.close();
    },
  };
}

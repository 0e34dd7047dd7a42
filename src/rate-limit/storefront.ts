import type { Logger } from '../logger.js';
import { consumeOne, type FlexibleDecision, flexibleLimiters } from './flexible.js';

/**
 * The storefront's limits (DESIGN.md "Storefront access"): every /storefront/graphql operation
 * counts once against its customer, and every request (and graphql-ws connection) once against its
 * client IP, before the token is even looked at, so guessing tokens is as slow as using one.
 * rate-limiter-flexible, as the design says (flexible.ts). Fixed one-minute windows.
 */
export type StorefrontLimits = { perCustomerPerMinute: number; perIpPerMinute: number };

export type StorefrontDecision = FlexibleDecision;

export type StorefrontLimiter = {
  consumeCustomer(customerId: string): Promise<StorefrontDecision>;
  consumeIp(ip: string): Promise<StorefrontDecision>;
  close(): Promise<void>;
};

const WINDOW_SECONDS = 60;

export async function createStorefrontLimiter(options: {
  limits: StorefrontLimits;
  redisUrl?: string | undefined;
  keyPrefix: string;
  logger: Logger;
}): Promise<StorefrontLimiter> {
  const limiters = await flexibleLimiters({ ...options, keyPrefix: `${options.keyPrefix}sf:`, what: 'storefront limits' });
  const perCustomer = limiters.limiter('customer', options.limits.perCustomerPerMinute, WINDOW_SECONDS);
  const perIp = limiters.limiter('ip', options.limits.perIpPerMinute, WINDOW_SECONDS);
  const consume = (rl: typeof perIp, key: string, what: string) =>
    consumeOne(rl, key, (retryAfterSec) => `rate limit reached: ${rl.points} requests a minute per ${what}; retry in ${retryAfterSec} s`);
  return {
    consumeCustomer: (customerId) => consume(perCustomer, customerId, 'customer'),
    consumeIp: (ip) => consume(perIp, ip, 'client IP'),
    async close() {
      limiters.close();
    },
  };
}

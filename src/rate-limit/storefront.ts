import { type RateLimiterAbstract, RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Logger } from '../logger.js';
import { connectLimiterRedis } from './redis-client.js';

/**
 * The storefront's limits (DESIGN.md "Storefront access"): every /storefront/graphql operation
 * counts once against its customer, and every request (and graphql-ws connection) once against its
 * client IP, before the token is even looked at, so guessing tokens is as slow as using one.
 * rate-limiter-flexible, as the design says: in memory, or in Redis shared by every instance with
 * an in-memory insurance limiter that takes over while Redis cannot answer. Fixed one-minute windows.
 */
export type StorefrontLimits = { perCustomerPerMinute: number; perIpPerMinute: number };

export type StorefrontDecision = { allowed: true } | { allowed: false; retryAfterSec: number; message: string };

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
  const redis = options.redisUrl ? await connectLimiterRedis(options.redisUrl, options.logger, 'storefront limits') : undefined;
  const limiter = (name: string, points: number): RateLimiterAbstract => {
    const base = { points, duration: WINDOW_SECONDS, keyPrefix: `${options.keyPrefix}sf:${name}` };
    if (!redis) return new RateLimiterMemory(base);
    return new RateLimiterRedis({ ...base, storeClient: redis, rejectIfRedisNotReady: true, insuranceLimiter: new RateLimiterMemory(base) });
  };
  const perCustomer = limiter('customer', options.limits.perCustomerPerMinute);
  const perIp = limiter('ip', options.limits.perIpPerMinute);

  const consume = async (rl: RateLimiterAbstract, key: string, what: string): Promise<StorefrontDecision> => {
    try {
      await rl.consume(key);
      return { allowed: true };
    } catch (refusal) {
      // A refusal is a RateLimiterRes; anything else is a store failure the insurance limiter did not cover.
      if (!(refusal instanceof RateLimiterRes)) throw refusal;
      const retryAfterSec = Math.max(1, Math.ceil(refusal.msBeforeNext / 1000));
      return { allowed: false, retryAfterSec, message: `rate limit reached: ${rl.points} requests a minute per ${what}; retry in ${retryAfterSec} s` };
    }
  };
  return {
    consumeCustomer: (customerId) => consume(perCustomer, customerId, 'customer'),
    consumeIp: (ip) => consume(perIp, ip, 'client IP'),
    async close() {
      redis?.disconnect();
    },
  };
}

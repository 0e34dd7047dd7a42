import { type RateLimiterAbstract, RateLimiterMemory, RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { Logger } from '../logger.js';
import { connectLimiterRedis } from './redis-client.js';

/** A limit's answer: allowed, or when to try again and why not now. */
export type FlexibleDecision = { allowed: true } | { allowed: false; retryAfterSec: number; message: string };

/**
 * rate-limiter-flexible's fixed windows, in memory or in Redis shared by every instance with an
 * in-memory insurance limiter that takes over while Redis cannot answer. The storefront's and the
 * staff sign-in's limits are made here.
 */
export async function flexibleLimiters(options: { redisUrl?: string | undefined; keyPrefix: string; logger: Logger; what: string }) {
  const redis = options.redisUrl ? await connectLimiterRedis(options.redisUrl, options.logger, options.what) : undefined;
  return {
    limiter(name: string, points: number, durationSec: number): RateLimiterAbstract {
      const base = { points, duration: durationSec, keyPrefix: `${options.keyPrefix}${name}` };
      if (!redis) return new RateLimiterMemory(base);
      return new RateLimiterRedis({ ...base, storeClient: redis, rejectIfRedisNotReady: true, insuranceLimiter: new RateLimiterMemory(base) });
    },
    close(): void {
      redis?.disconnect();
    },
  };
}

/** Counts one against `key`; a refusal says when it frees, in `describe`'s words. */
export async function consumeOne(rl: RateLimiterAbstract, key: string, describe: (retryAfterSec: number) => string): Promise<FlexibleDecision> {
  try {
    await rl.consume(key);
    return { allowed: true };
  } catch (refusal) {
    // A refusal is a RateLimiterRes; anything else is a store failure the insurance limiter did not cover.
    if (!(refusal instanceof RateLimiterRes)) throw refusal;
    const retryAfterSec = Math.max(1, Math.ceil(refusal.msBeforeNext / 1000));
    return { allowed: false, retryAfterSec, message: describe(retryAfterSec) };
  }
}

import type { DB } from '../db/database.js';
import { singleFlight } from '../domain/kernel/index.js';
import { shopSettingsGeneration } from '../domain/settings/index.js';
import type { Logger } from '../logger.js';
import { FallbackStore } from './fallback-store.js';
import { MemoryStore } from './memory-store.js';
import type { RateLimitedOperation } from './operations.js';
import { connectLimiterRedis } from './redis-client.js';
import { RedisStore } from './redis-store.js';
import type { RateLimitStore } from './store.js';

/** The contract's window: rolling 60 seconds. */
export const WINDOW_MS = 60_000;

export type RateLimitDecision = {
  allowed: boolean;
  /** The operation the numbers below describe: the refused one, else the one closest to its limit. */
  operation: string;
  limit: number;
  remaining: number;
  /** Seconds until the bucket gains room again. */
  resetSeconds: number;
};

export type RateLimiterOptions = {
  store: RateLimitStore;
  /** RATE_LIMIT_PER_MINUTE: the limit of operations marked `default`. */
  defaultLimit: number;
  /** RATE_LIMIT_FIXED_MULTIPLIER: the contract's fixed limits (the webhook endpoints') times this. */
  fixedMultiplier?: number;
  /** A shop's own override of the default (shops.rate_limit_per_minute), or null. */
  shopLimit: (shopId: string) => Promise<number | null>;
  keyPrefix?: string;
  /** Fixed in tests; otherwise the store's own clock (Redis's, when shared). */
  clock?: () => number;
  /** Told of every refusal, with the operation reported (for /metrics). */
  onRejected?: (operation: string) => void;
};

export class RateLimiter {
  constructor(private readonly options: RateLimiterOptions) {}

  /**
   * Counts one request of `shopId` against every operation it performs (an operation listed twice
   * counts twice), all or nothing: either each has room and each counts it, or the request is
   * refused and counts nowhere.
   */
  async consume(shopId: string, performed: readonly RateLimitedOperation[]): Promise<RateLimitDecision> {
    const { store, defaultLimit, fixedMultiplier = 1, keyPrefix = '', clock } = this.options;
    const costs = new Map<string, { op: RateLimitedOperation; cost: number }>();
    for (const op of performed) {
      const entry = costs.get(op.name) ?? { op, cost: 0 };
      entry.cost += 1;
      costs.set(op.name, entry);
    }
    const operations = [...costs.values()].map((c) => c.op);
    const needsDefault = operations.some((op) => op.limit === 'default');
    const shopDefault = needsDefault ? ((await this.options.shopLimit(shopId)) ?? defaultLimit) : defaultLimit;
    // The {shopId} hash tag keeps one request's keys in one Redis Cluster slot, as a script needs.
    const buckets = [...costs.values()].map(({ op, cost }) => ({
      key: `${keyPrefix}rl:{${shopId}}:${op.name}`,
      limit: op.limit === 'default' ? shopDefault : op.limit * fixedMultiplier,
      cost,
    }));
    const result = await store.hit(buckets, WINDOW_MS, clock?.());
    const states = buckets.map((bucket, i) => ({
      operation: operations[i]!.name,
      limit: bucket.limit,
      remaining: Math.max(0, bucket.limit - result.buckets[i]!.count),
      resetSeconds: Math.max(1, Math.ceil((result.buckets[i]!.resetAt - result.now) / 1000)),
    }));
    // Refused: report the refused bucket that frees last (Retry-After must cover them all).
    // Allowed: report the bucket with the least room left.
    const reported = result.allowed
      ? states.reduce((a, b) => (b.remaining < a.remaining ? b : a))
      : states
          .filter((_, i) => result.buckets[i]!.count + buckets[i]!.cost > buckets[i]!.limit)
          .reduce((a, b) => (b.resetSeconds > a.resetSeconds ? b : a));
    if (!result.allowed) this.options.onRejected?.(reported.operation);
    return { allowed: result.allowed, ...reported };
  }

  close(): Promise<void> {
    return this.options.store.close();
  }
}

/** RateLimit-* headers (IETF draft, as GitHub and others send them), plus Retry-After on a refusal. */
export function rateLimitHeaders(decision: RateLimitDecision): Record<string, string> {
  return {
    'ratelimit-limit': String(decision.limit),
    'ratelimit-remaining': String(decision.remaining),
    'ratelimit-reset': String(decision.resetSeconds),
    ...(decision.allowed ? {} : { 'retry-after': String(decision.resetSeconds) }),
  };
}

export function rateLimitMessage(decision: RateLimitDecision): string {
  return `rate limit of ${decision.limit} requests per minute for ${decision.operation} exceeded; retry in ${decision.resetSeconds} s`;
}

/**
 * The shop's override, cached briefly: the lookup would otherwise add a query to every request.
 * A change made in this process (shopSettingsUpdate) takes effect at once; one made by another
 * instance within `ttlMs`.
 */
export function cachedShopLimits(db: DB, ttlMs = 30_000): (shopId: string) => Promise<number | null> {
  const cache = new Map<string, { value: number | null; expires: number; generation: number }>();
  const pending = new Map<string, Promise<number | null>>();
  return async (shopId) => {
    const now = Date.now();
    const generation = shopSettingsGeneration();
    const hit = cache.get(shopId);
    if (hit && hit.expires > now && hit.generation === generation) return hit.value;
    return singleFlight(pending, shopId, async () => {
      const row = await db.selectFrom('shops').select('rate_limit_per_minute').where('id', '=', shopId).executeTakeFirst();
      if (cache.size >= 10_000) cache.clear();
      const value = row?.rate_limit_per_minute ?? null;
      // Stamped with the generation read before the query: a change committed meanwhile makes it stale.
      cache.set(shopId, { value, expires: now + ttlMs, generation });
      return value;
    });
  };
}

export type CreateRateLimiterOptions = {
  db: DB;
  logger: Logger;
  redisUrl: string | undefined;
  defaultLimit: number;
  fixedMultiplier: number;
  keyPrefix: string;
  clock?: (() => number) | undefined;
  onRejected?: (operation: string) => void;
};

/** Redis (with the in-memory fallback) when REDIS_URL is set, else memory alone. */
export async function createRateLimiter(options: CreateRateLimiterOptions): Promise<RateLimiter> {
  const memory = new MemoryStore();
  let store: RateLimitStore = memory;
  if (options.redisUrl) {
    const redis = await connectLimiterRedis(options.redisUrl, options.logger, 'rate limits');
    store = new FallbackStore(new RedisStore(redis), memory, options.logger);
  }
  return new RateLimiter({
    store,
    defaultLimit: options.defaultLimit,
    fixedMultiplier: options.fixedMultiplier,
    shopLimit: cachedShopLimits(options.db),
    keyPrefix: options.keyPrefix,
    clock: options.clock,
    onRejected: options.onRejected,
  });
}

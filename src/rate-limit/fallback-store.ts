import type { Logger } from '../logger.js';
import type { MemoryStore } from './memory-store.js';
import type { RedisStore } from './redis-store.js';
import type { Bucket, HitResult, RateLimitStore } from './store.js';

/**
 * Redis while it answers, the in-process store while it does not (DESIGN.md "Rate limits"): a
 * Redis outage never turns into a 429 or a 500. Each switch is logged once, not every request.
 * During an outage each server counts on its own, so a shop may get up to N servers' worth of
 * requests; that is the price of staying up.
 */
export class FallbackStore implements RateLimitStore {
  private degraded: boolean;

  constructor(
    private readonly primary: RedisStore,
    private readonly fallback: MemoryStore,
    private readonly logger: Logger,
  ) {
    // Not connected at start: the caller has said so already.
    this.degraded = !primary.ready;
  }

  async hit(buckets: readonly Bucket[], windowMs: number, now?: number): Promise<HitResult> {
    if (this.primary.ready) {
      try {
        const result = await this.primary.hit(buckets, windowMs, now);
        if (this.degraded) {
          this.degraded = false;
          this.logger.info('rate limits: Redis is back; limiting through Redis again');
        }
        return result;
      } catch (err) {
        this.degrade(err);
      }
    } else {
      this.degrade(undefined);
    }
    return this.fallback.hit(buckets, windowMs, now);
  }

  private degrade(err: unknown): void {
    if (this.degraded) return;
    this.degraded = true;
    this.logger.warn({ err }, 'rate limits: Redis is unavailable; limiting in memory on this server until it is back');
  }

  async close(): Promise<void> {
    await Promise.all([this.primary.close(), this.fallback.close()]);
  }
}

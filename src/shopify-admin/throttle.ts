import type { ThrottleStatus } from './client.js';

/**
 * A shop's Shopify cost bucket as this worker sees it (Shopify limits each store by query cost: a
 * bucket of `maximumAvailable` points refilled at `restoreRate` a second). Every answer carries
 * the bucket's level, which corrects the estimate (other instances and apps spend from it too);
 * between answers the level is estimated from the refill rate. A call waits until its cost is
 * there, so the worker keeps under the limit instead of learning it from THROTTLED answers, and
 * a shop's empty bucket holds back only that shop's lane.
 */
type Bucket = { available: number; maximum: number; restoreRate: number; at: number };

export class ShopThrottle {
  private readonly buckets = new Map<string, Bucket>();

  /** How long a call of `cost` must wait (ms); 0 means it may go now, and its cost is taken. */
  reserve(shopId: string, cost: number, now: number): number {
    const bucket = this.buckets.get(shopId);
    // Not seen yet: the first call finds out.
    if (!bucket) return 0;
    this.refill(bucket, now);
    if (bucket.available >= cost) {
      bucket.available -= cost;
      return 0;
    }
    return Math.ceil(((cost - bucket.available) / bucket.restoreRate) * 1000);
  }

  /** What an answer said of the bucket, after the call's own cost was taken. */
  observe(shopId: string, status: ThrottleStatus, now: number, inFlight = 0): void {
    // Calls still in flight have taken their cost from our estimate but not yet from Shopify's figure.
    this.buckets.set(shopId, { available: status.currentlyAvailable - inFlight, maximum: status.maximumAvailable, restoreRate: Math.max(status.restoreRate, 1), at: now });
  }

  /** Shopify throttled a call of `cost`: the wait (ms) until the bucket holds it, by Shopify's own figures when given. */
  throttled(shopId: string, cost: number, status: ThrottleStatus | null, now: number): number {
    if (status) this.observe(shopId, status, now);
    const bucket = this.buckets.get(shopId);
    if (!bucket) return 1000;
    this.refill(bucket, now);
    return Math.max(100, Math.ceil(((cost - bucket.available) / bucket.restoreRate) * 1000));
  }

  private refill(bucket: Bucket, now: number): void {
    bucket.available = Math.min(bucket.maximum, bucket.available + ((now - bucket.at) / 1000) * bucket.restoreRate);
    bucket.at = now;
  }
}

import type { ThrottleStatus } from './client.js';

/**
 * A shop's Shopify cost bucket as this worker sees it (Shopify limits each store by query cost: a
 * bucket of `maximumAvailable` points refilled at `restoreRate` a second). Every answer carries
 * the bucket's level, which corrects the estimate (other instances and apps spend from it too);
 * between answers the level is estimated from the refill rate. A call waits until its cost is
 * there, so the worker keeps under the limit instead of learning it from THROTTLED answers, and
 * a shop's empty bucket holds back only that shop's lane.
 */
type Bucket = {
  available: number;
  maximum: number;
  restoreRate: number;
  at: number;
  /** Points reserved by calls whose answers have not come back: Shopify's figures may not count them yet. */
  inFlight: number;
};

/** How long (ms) calls wait while the first call to a shop finds out its bucket. */
const PROBE_WAIT_MS = 50;

export class ShopThrottle {
  private readonly buckets = new Map<string, Bucket>();
  /** Shops whose first call is out: until it answers, nothing is known of the bucket. */
  private readonly probing = new Set<string>();

  /** The bucket's size when it is smaller than `cost`: such a call can never run (Shopify would throttle it for ever); null otherwise or unknown. */
  tooSmallFor(shopId: string, cost: number): number | null {
    const maximum = this.buckets.get(shopId)?.maximum;
    return maximum !== undefined && maximum < cost ? maximum : null;
  }

  /** How long a call of `cost` must wait (ms); 0 means it may go now, and its cost is taken until `settle`. */
  reserve(shopId: string, cost: number, now: number): number {
    const bucket = this.buckets.get(shopId);
    if (!bucket) {
      // One call finds out the bucket's size; the others wait for its answer rather than guess.
      if (this.probing.has(shopId)) return PROBE_WAIT_MS;
      this.probing.add(shopId);
      return 0;
    }
    this.refill(bucket, now);
    if (bucket.available >= cost) {
      bucket.available -= cost;
      bucket.inFlight += cost;
      return 0;
    }
    return Math.ceil(((cost - bucket.available) / bucket.restoreRate) * 1000);
  }

  /**
   * A reserved call answered (or failed): what its answer said of the bucket, if anything. Shopify's
   * figure counts this call, and perhaps some of those still in flight; counting none of those is
   * the safe side (a few points low rather than a THROTTLED answer).
   */
  settle(shopId: string, cost: number, status: ThrottleStatus | null, now: number): void {
    this.probing.delete(shopId);
    const bucket = this.buckets.get(shopId);
    if (bucket) bucket.inFlight = Math.max(0, bucket.inFlight - cost);
    if (status) this.observe(shopId, status, now);
  }

  /** How many calls of `cost` the bucket pays for within `ms`; one for an unknown bucket (the first call finds it out). */
  affordable(shopId: string, cost: number, ms: number, now: number): number {
    const bucket = this.buckets.get(shopId);
    if (!bucket) return 1;
    this.refill(bucket, now);
    return Math.max(0, Math.floor((bucket.available + (bucket.restoreRate * ms) / 1000) / cost));
  }

  /** Shops whose bucket cannot pay a call of `cost` now: a lane for them would only wait. */
  spent(cost: number, now: number): string[] {
    return [...this.buckets].filter(([shopId]) => this.affordable(shopId, cost, 0, now) === 0).map(([shopId]) => shopId);
  }

  /** Shopify throttled a call of `cost`: the wait (ms) until the bucket holds it, by Shopify's own figures when given. */
  throttled(shopId: string, cost: number, now: number): number {
    const bucket = this.buckets.get(shopId);
    if (!bucket) return 1000;
    this.refill(bucket, now);
    return Math.max(100, Math.ceil(((cost - bucket.available) / bucket.restoreRate) * 1000));
  }

  /**
   * Answers can come back out of order, and an older one's figure misses points spent since: an
   * answer lowers the estimate, never raises it (the refill does that, at the bucket's own rate).
   */
  private observe(shopId: string, status: ThrottleStatus, now: number): void {
    const bucket = this.buckets.get(shopId);
    const inFlight = bucket?.inFlight ?? 0;
    if (bucket) this.refill(bucket, now);
    const reported = status.currentlyAvailable - inFlight;
    this.buckets.set(shopId, {
      available: bucket ? Math.min(bucket.available, reported) : reported,
      maximum: status.maximumAvailable,
      restoreRate: Math.max(status.restoreRate, 1),
      at: now,
      inFlight,
    });
  }

  private refill(bucket: Bucket, now: number): void {
    bucket.available = Math.min(bucket.maximum - bucket.inFlight, bucket.available + ((now - bucket.at) / 1000) * bucket.restoreRate);
    bucket.at = now;
  }
}

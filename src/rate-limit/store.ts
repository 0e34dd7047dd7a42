/**
 * One rolling-window counter (a shop's requests to one operation) and what this request costs in
 * it: 1, or more for a GraphQL operation that runs the same mutation several times.
 */
export type Bucket = { key: string; limit: number; cost?: number };

export type BucketState = {
  /** Requests inside the window, this one included when it was allowed. */
  count: number;
  /** When (ms since the epoch) the bucket gains room: for another request if this one was allowed, else for this one. */
  resetAt: number;
};

export type HitResult = { allowed: boolean; now: number; buckets: BucketState[] };

/**
 * A true rolling window (sliding log): a request at `now` is allowed when fewer than `limit`
 * allowed requests carry a timestamp in (now - window, now], so no span of `window` ms ever holds
 * more than `limit` of them, wherever it starts. Refused requests are not logged.
 */
export interface RateLimitStore {
  /**
   * Counts one request against every bucket if, and only if, each has room; atomic, so concurrent
   * requests (on any number of servers sharing the store) cannot overshoot. `now` defaults to the
   * store's own clock.
   */
  hit(buckets: readonly Bucket[], windowMs: number, now?: number): Promise<HitResult>;
  close(): Promise<void>;
}

import type { Bucket, HitResult, RateLimitStore } from './store.js';

/** The in-process store: the default without REDIS_URL, and the fallback while Redis is down. */
export class MemoryStore implements RateLimitStore {
  /** Per bucket key, the timestamps of its allowed requests, oldest first. */
  private readonly logs = new Map<string, number[]>();
  private hitsSinceSweep = 0;

  async hit(buckets: readonly Bucket[], windowMs: number, now = Date.now()): Promise<HitResult> {
    const cutoff = now - windowMs;
    const logs = buckets.map((bucket) => {
      const log = this.logs.get(bucket.key) ?? [];
      let expired = 0;
      while (expired < log.length && log[expired]! <= cutoff) expired++;
      if (expired) log.splice(0, expired);
      return log;
    });
    const allowed = buckets.every((bucket, i) => logs[i]!.length + (bucket.cost ?? 1) <= bucket.limit);
    if (allowed) {
      buckets.forEach((bucket, i) => {
        for (let n = 0; n < (bucket.cost ?? 1); n++) logs[i]!.push(now);
        this.logs.set(bucket.key, logs[i]!);
      });
    }
    if (++this.hitsSinceSweep >= 10_000) this.sweep(cutoff);
    return {
      allowed,
      now,
      buckets: buckets.map((bucket, i) => {
        const log = logs[i]!;
        // The entry whose leaving makes room: the oldest, or for a refusal the last of those that must go.
        const needed = allowed ? 0 : (bucket.cost ?? 1) - 1;
        const first = log[Math.min(log.length - 1, Math.max(0, log.length + needed - bucket.limit))];
        return { count: log.length, resetAt: (first ?? now) + windowMs };
      }),
    };
  }

  /** Forgets buckets whose every request has left the window, so idle shops cost nothing. */
  private sweep(cutoff: number): void {
    this.hitsSinceSweep = 0;
    for (const [key, log] of this.logs) {
      if (log.length === 0 || log[log.length - 1]! <= cutoff) this.logs.delete(key);
    }
  }

  async close(): Promise<void> {
    this.logs.clear();
  }
}

import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Bucket, HitResult, RateLimitStore } from './store.js';

/**
 * The same sliding log in Redis, one sorted set per bucket (score = timestamp), checked and
 * updated by one Lua script so that every server sharing the Redis sees one atomic counter.
 * KEYS: the buckets. ARGV: now in ms ('' = Redis's own clock, so servers' clock skew does not
 * matter), window ms, a member prefix unique to this request, then each bucket's limit and cost.
 * Returns { allowed, now, count1, resetAt1, count2, resetAt2, ... }.
 */
const SLIDING_WINDOW_HIT = `
local now = tonumber(ARGV[1])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local window = tonumber(ARGV[2])
local counts = {}
local allowed = 1
for i, key in ipairs(KEYS) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  counts[i] = redis.call('ZCARD', key)
  if counts[i] + tonumber(ARGV[3 + 2 * i]) > tonumber(ARGV[2 + 2 * i]) then allowed = 0 end
end
local result = { allowed, now }
for i, key in ipairs(KEYS) do
  local limit, cost = tonumber(ARGV[2 + 2 * i]), tonumber(ARGV[3 + 2 * i])
  local needed = cost - 1
  if allowed == 1 then
    for n = 1, cost do redis.call('ZADD', key, now, ARGV[3] .. ':' .. n) end
    redis.call('PEXPIRE', key, window)
    counts[i] = counts[i] + cost
    needed = 0
  end
  local first = math.min(counts[i] - 1, math.max(0, counts[i] + needed - limit))
  local entry = redis.call('ZRANGE', key, first, first, 'WITHSCORES')
  result[#result + 1] = counts[i]
  result[#result + 1] = (tonumber(entry[2]) or now) + window
end
return result
`;

type WithScript = Redis & { slidingWindowHit(...args: Array<string | number>): Promise<number[]> };

export class RedisStore implements RateLimitStore {
  private readonly redis: WithScript;

  /** Takes ownership of `redis`: close() disconnects it. */
  constructor(redis: Redis) {
    redis.defineCommand('slidingWindowHit', { lua: SLIDING_WINDOW_HIT });
    this.redis = redis as WithScript;
  }

  /** Connected and able to take commands right now. */
  get ready(): boolean {
    return this.redis.status === 'ready';
  }

  async hit(buckets: readonly Bucket[], windowMs: number, now?: number): Promise<HitResult> {
    const reply = await this.redis.slidingWindowHit(
      buckets.length,
      ...buckets.map((b) => b.key),
      now ?? '',
      windowMs,
      randomUUID(),
      ...buckets.flatMap((b) => [b.limit, b.cost ?? 1]),
    );
    return {
      allowed: reply[0] === 1,
      now: reply[1]!,
      buckets: buckets.map((_, i) => ({ count: reply[2 + 2 * i]!, resetAt: reply[3 + 2 * i]! })),
    };
  }

  async close(): Promise<void> {
    this.redis.disconnect();
  }
}

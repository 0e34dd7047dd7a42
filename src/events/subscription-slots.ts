import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from '../logger.js';

/**
 * How many of something live (subscriptions, graphql-ws sockets) each shop holds. In memory they
 * are counted per instance; with Redis, across all instances: a sorted set per shop whose members
 * are this instance's holders, scored by when they expire. Live ones are refreshed by a
 * heartbeat, so the slots of a crashed instance free themselves within SLOT_TTL_MS.
 */
export type SubscriptionSlots = {
  /** Takes a slot for the shop; null when the shop is at its limit. Call the release once. */
  acquire(shopId: string): Promise<(() => void) | null>;
  close(): void;
};

const SLOT_TTL_MS = 60_000;
const HEARTBEAT_MS = 20_000;

/** KEYS[1]: the shop's set. ARGV: now (ms), limit, member, expiry (ms). Returns 1 if taken. */
const ACQUIRE = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ${SLOT_TTL_MS})
return 1
`;

type WithAcquire = Redis & { acquireSubscriptionSlot(key: string, now: number, limit: number, member: string, expiry: number): Promise<number> };

export function createSubscriptionSlots(options: {
  /** What is counted, in the Redis key and the log: `live-subscriptions`, `websockets`. */
  name: string;
  limit: number;
  redis?: Redis;
  keyPrefix: string;
  logger: Logger;
}): SubscriptionSlots {
  const { name, limit, logger } = options;
  const local = new Map<string, number>();
  const countLocally = (shopId: string, delta: number) => {
    const n = (local.get(shopId) ?? 0) + delta;
    if (n > 0) local.set(shopId, n);
    else local.delete(shopId);
  };
  const takeLocally = (shopId: string) => {
    if ((local.get(shopId) ?? 0) >= limit) return null;
    countLocally(shopId, 1);
    return () => countLocally(shopId, -1);
  };
  if (!options.redis) {
    return { acquire: async (shopId) => takeLocally(shopId), close() {} };
  }

  // Defined once per client; both counters share the event bus's publisher.
  if (!('acquireSubscriptionSlot' in options.redis)) options.redis.defineCommand('acquireSubscriptionSlot', { numberOfKeys: 1, lua: ACQUIRE });
  const redis = options.redis as WithAcquire;
  const instance = randomUUID();
  const keyOf = (shopId: string) => `${options.keyPrefix}${name}:${shopId}`;
  const held = new Map<string, string>(); // member -> key
  let seq = 0;

  const heartbeat = setInterval(() => {
    if (held.size === 0) return;
    const pipeline = redis.pipeline();
    const expiry = Date.now() + SLOT_TTL_MS;
    for (const [member, key] of held) pipeline.zadd(key, 'XX', expiry, member);
    pipeline.exec().catch((err) => logger.warn({ err }, `${name}: Redis heartbeat failed`));
  }, HEARTBEAT_MS);
  heartbeat.unref();

  return {
    async acquire(shopId) {
      const key = keyOf(shopId);
      const member = `${instance}:${++seq}`;
      const now = Date.now();
      let taken: number;
      try {
        taken = await redis.acquireSubscriptionSlot(key, now, limit, member, now + SLOT_TTL_MS);
      } catch (err) {
        // Never refuse because Redis is down: fall back to this instance's own count.
        logger.warn({ err }, `${name}: Redis unavailable, limiting per instance`);
        return takeLocally(shopId);
      }
      if (!taken) return null;
      held.set(member, key);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        held.delete(member);
        redis.zrem(key, member).catch((err) => logger.warn({ err }, `${name}: Redis release failed; the slot expires by itself`));
      };
    },
    close() {
      clearInterval(heartbeat);
    },
  };
}

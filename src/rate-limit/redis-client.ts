import { Redis } from 'ioredis';
import type { Logger } from '../logger.js';

/**
 * The Redis connection of a limiter: it fails fast instead of queueing while disconnected (the
 * limiter's in-memory fallback answers meanwhile) and keeps reconnecting. A Redis that cannot be
 * reached at start is logged, not fatal.
 */
export async function connectLimiterRedis(url: string, logger: Logger, what: string): Promise<Redis> {
  const redis = new Redis(url, {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: 500,
    connectTimeout: 2_000,
    retryStrategy: (attempt) => Math.min(attempt * 200, 2_000),
  });
  // Failures surface through the limiter's fallback; without a listener ioredis would report each reconnect attempt.
  redis.on('error', () => {});
  await redis.connect().catch((err) => logger.warn({ err }, `${what}: cannot reach Redis yet; limiting in memory meanwhile`));
  return redis;
}

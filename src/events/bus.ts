import { createRedisEventTarget } from '@graphql-yoga/redis-event-target';
import { createPubSub, type PubSubEventTarget, SlidingBuffer } from 'graphql-yoga';
import { Redis } from 'ioredis';
import { RuleViolationError } from '../domain/errors.js';
import type { Logger } from '../logger.js';
import { type EventEnvelope, type OutboxHandler, toEnvelope } from './outbox-relay.js';

/**
 * Committed events, fanned out to the live (GraphQL) subscribers of every instance: in memory
 * when there is one instance, through Redis pub/sub (one channel per shop) when REDIS_URL is set.
 */
export type EventBus = {
  /** Registered with the outbox relay: publishes each batch once it has committed. */
  outboxHandler: OutboxHandler;
  publish(events: EventEnvelope[]): Promise<void>;
  /**
   * The shop's events from now on, until the iterator is returned or the bus closes. Refused
   * with `subscription_limit_reached` when the shop already has its limit of live subscriptions
   * on this instance.
   */
  subscribe(shopId: string): AsyncIterableIterator<EventEnvelope>;
  /** Live subscriptions and the listeners they hold on the event target (both 0 when idle). */
  stats(): { subscriptions: number; listeners: number };
  /** Ends every live subscription and disconnects from Redis. */
  close(): Promise<void>;
};

type Channels = Record<string, [shopId: string, event: EventEnvelope]>;
/** Events a slow subscriber may fall behind by before the oldest are dropped (never an overflow error). */
const SUBSCRIBER_BUFFER = 1_000;

export async function createEventBus(options: {
  logger: Logger;
  redisUrl?: string;
  keyPrefix: string;
  subscriptionsPerShop: number;
}): Promise<EventBus> {
  const { logger, subscriptionsPerShop } = options;
  // Channel `<prefix>events:<shopId>` (createPubSub joins routing key and id with ':').
  const routingKey = `${options.keyPrefix}events`;
  const redis = options.redisUrl
    ? {
        publisher: new Redis(options.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 2 }),
        subscriber: new Redis(options.redisUrl, { lazyConnect: true }),
      }
    : undefined;
  if (redis) {
    for (const client of [redis.publisher, redis.subscriber]) {
      client.on('error', (err) => logger.warn({ err }, 'event bus: Redis error'));
    }
    await Promise.all([redis.publisher.connect(), redis.subscriber.connect()]);
  }

  let listeners = 0;
  const target: PubSubEventTarget<Channels> = redis
    ? createRedisEventTarget({ publishClient: redis.publisher, subscribeClient: redis.subscriber })
    : new EventTarget();
  // Counts what subscriptions hold on the target, so a leak shows up in stats().
  const countedTarget: PubSubEventTarget<Channels> = {
    addEventListener(type, listener) {
      listeners++;
      target.addEventListener(type, listener);
    },
    removeEventListener(type, listener) {
      listeners--;
      target.removeEventListener(type, listener);
    },
    dispatchEvent: (event) => target.dispatchEvent(event),
  };
  const pubsub = createPubSub<Channels>({
    eventTarget: countedTarget,
    // Without a buffer, one stalled client would make a push throw inside the event dispatch.
    repeaterBuffer: new SlidingBuffer(SUBSCRIBER_BUFFER),
  });

  const perShop = new Map<string, number>();
  const live = new Set<AsyncIterableIterator<EventEnvelope>>();
  let closed = false;

  async function publish(events: EventEnvelope[]): Promise<void> {
    if (closed || events.length === 0) return;
    if (!redis) {
      for (const event of events) pubsub.publish(routingKey, event.shopId, event);
      return;
    }
    // Published here rather than through the event target so a Redis failure reaches the
    // relay's log instead of becoming an unhandled rejection.
    const pipeline = redis.publisher.pipeline();
    for (const event of events) pipeline.publish(`${routingKey}:${event.shopId}`, JSON.stringify(event));
    const results = (await pipeline.exec()) ?? [];
    const failed = results.find(([err]) => err);
    if (failed) throw failed[0];
  }

  function subscribe(shopId: string): AsyncIterableIterator<EventEnvelope> {
    if (closed) throw new RuleViolationError('server_shutting_down', 'the server is shutting down; reconnect to another instance');
    const count = perShop.get(shopId) ?? 0;
    if (count >= subscriptionsPerShop) {
      throw new RuleViolationError(
        'subscription_limit_reached',
        `this shop already has ${subscriptionsPerShop} live subscriptions on this server; close one before opening another`,
      );
    }
    perShop.set(shopId, count + 1);
    // Lazy: the listener is added on the first next(), removed on return().
    const source = pubsub.subscribe(routingKey, shopId);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      live.delete(iterator);
      const left = (perShop.get(shopId) ?? 1) - 1;
      if (left > 0) perShop.set(shopId, left);
      else perShop.delete(shopId);
    };
    // The slot is released however the subscription ends, even if it was never iterated.
    const iterator: AsyncIterableIterator<EventEnvelope> = {
      async next() {
        const result = await source.next();
        if (result.done) release();
        return result;
      },
      async return(value?: unknown) {
        release();
        return source.return(value);
      },
      async throw(err?: unknown) {
        release();
        return source.throw(err);
      },
      [Symbol.asyncIterator]() {
        return iterator;
      },
    };
    live.add(iterator);
    return iterator;
  }

  return {
    outboxHandler: { name: 'live-events', afterCommit: (events) => publish(events.map(toEnvelope)) },
    publish,
    subscribe,
    stats: () => ({ subscriptions: live.size, listeners }),
    async close() {
      if (closed) return;
      closed = true;
      await Promise.all([...live].map((iterator) => iterator.return!()));
      if (redis) await Promise.all([redis.publisher.quit(), redis.subscriber.quit()]).catch(() => undefined);
    },
  };
}

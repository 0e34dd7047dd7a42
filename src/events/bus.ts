import { getEventListeners, setMaxListeners } from 'node:events';
import { createRedisEventTarget } from '@graphql-yoga/redis-event-target';
import type { PubSubEventTarget } from 'graphql-yoga';
import { Redis } from 'ioredis';
import type { CustomerTokenScope } from '../domain/customers/index.js';
import { RuleViolationError } from '../domain/kernel/index.js';
import type { ApiKeyRef } from '../domain/shops/index.js';
import type { Logger } from '../logger.js';
import { type EventEnvelope, type OutboxHandler, toEnvelope } from './outbox-relay.js';
import { createSubscriptionSlots, type SubscriptionSlots } from './subscription-slots.js';

/**
 * Who holds a live subscription: the shop, and the API key it was opened with (`session:…` for a
 * person's graphql-ws socket, `token:…` on the storefront); on the storefront, the customer too,
 * and the subscription counts against the storefront's limits instead of the shop's.
 */
export type SubscriptionOwner = { shopId: string; apiKeyId: string; customerId?: string };

/**
 * What a revocation ends: an API key, or customer access tokens (one customer's, or every one of a
 * shop's). Every instance forgets it from its caches; an API key's subscriptions and sockets end too.
 */
export type Revocation = { apiKey: ApiKeyRef } | { customerTokens: CustomerTokenScope };

/** Slots counted per shop and per customer at once (the storefront's): null when either is at its limit. */
export type CustomerSlots = { acquire(shopId: string, customerId: string): Promise<(() => void) | null> };

/**
 * Committed events, fanned out to the live (GraphQL) subscribers of every instance: an in-memory
 * EventTarget when there is one instance, Redis pub/sub (one channel per shop, Yoga's Redis
 * event target) when REDIS_URL is set. Payloads are the plain-JSON webhook envelope both ways.
 * Revocations of API keys and customer access tokens travel the same way, so every instance ends
 * what a revoked credential holds.
 */
export type EventBus = {
  /** Registered with the outbox relay: publishes each batch once it has committed. */
  outboxHandler: OutboxHandler;
  publish(events: EventEnvelope[]): Promise<void>;
  /**
   * The shop's events that `accept` takes, from now on, until the iterator is returned or the bus
   * closes. Refused with `subscription_limit_reached` when the shop already has its limit of live
   * subscriptions (across instances when on Redis).
   */
  subscribe(owner: SubscriptionOwner, accept?: (event: EventEnvelope) => boolean): Promise<AsyncIterableIterator<EventEnvelope>>;
  /** graphql-ws sockets per shop, counted as subscriptions are (across instances when on Redis). */
  socketSlots: SubscriptionSlots;
  /** The storefront's graphql-ws sockets, per shop and per customer. */
  storefrontSocketSlots: CustomerSlots;
  /**
   * Tells every instance (this one at once) of the revocation: the live subscriptions opened with
   * a revoked key end, and the `onRevoked` listeners hear of it. Never rejects: a failure to reach
   * Redis is logged (other instances then stop trusting the credential within its cache's TTL).
   */
  announceRevocation(revocation: Revocation): Promise<void>;
  /** Calls `listener` for every revocation announced on any instance; returns the unsubscribe. */
  onRevoked(listener: (revocation: Revocation) => void): () => void;
  /** Whether a revocation of this key was announced since this instance started. */
  wasRevoked(apiKeyId: string): boolean;
  /** Ids of the API keys that hold live subscriptions on this instance. */
  keysInUse(): Iterable<string>;
  /** Live subscriptions and the listeners they hold on the event target (both 0 when idle). */
  stats(): { subscriptions: number; listeners: number };
  /**
   * Listeners registered for the shop's channel, as the in-memory EventTarget itself reports them
   * (with Redis, the channel's subscriber count there is the independent check). Null on Redis.
   */
  listenersOn(shopId: string): number | null;
  /** Ends every live subscription and disconnects from Redis. */
  close(): Promise<void>;
};

type Channels = Record<string, [event: EventEnvelope]>;
/** Events a slow subscriber may fall behind by; past that its oldest are dropped. */
const SUBSCRIBER_BUFFER = 1_000;

const DONE: IteratorReturnResult<undefined> = { value: undefined, done: true };

/**
 * One subscription's queue. Plain arrays and one pending promise instead of a Repeater: with
 * 1,000 subscribers a Repeater's promises per push were most of the fan-out time and garbage
 * (npm run bench -- subscriptions).
 */
function subscriptionQueue(onEnd: () => void) {
  const queue: EventEnvelope[] = [];
  let waiting: ((result: IteratorResult<EventEnvelope>) => void) | undefined;
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    queue.length = 0;
    onEnd();
    waiting?.(DONE);
    waiting = undefined;
  };
  const iterator: AsyncIterableIterator<EventEnvelope> = {
    next() {
      if (queue.length) return Promise.resolve({ value: queue.shift()!, done: false });
      if (ended) return Promise.resolve(DONE);
      return new Promise((resolve) => (waiting = resolve));
    },
    return() {
      end();
      return Promise.resolve(DONE);
    },
    throw(err?: unknown) {
      end();
      return Promise.reject(err);
    },
    [Symbol.asyncIterator]: () => iterator,
  };
  return {
    iterator,
    end,
    deliver(event: EventEnvelope) {
      if (ended) return;
      if (waiting) {
        const resolve = waiting;
        waiting = undefined;
        resolve({ value: event, done: false });
      } else if (queue.push(event) > SUBSCRIBER_BUFFER) {
        queue.shift();
      }
    },
  };
}

export function createEventBus(options: {
  logger: Logger;
  redisUrl?: string;
  keyPrefix: string;
  subscriptionsPerShop: number;
  socketsPerShop: number;
  /**
   * The storefront's own limits, for subscriptions and for sockets alike: its customers are many
   * and must not take the slots of the shop's own dashboards and servers, nor one customer all.
   */
  storefront: { perShop: number; perCustomer: number };
}): EventBus {
  const { logger, subscriptionsPerShop } = options;
  const channelOf = (shopId: string) => `${options.keyPrefix}events:${shopId}`;
  // Renamed from `api-key-revocations` with the messages' shape: an older instance hears none, misreads none.
  const revocationsChannel = `${options.keyPrefix}revocations`;
  // Connecting in the background: with Redis down the server still starts and serves; live
  // events pause (the relay logs each failed publish) and resume once Redis is back.
  const redis = options.redisUrl
    ? {
        publisher: new Redis(options.redisUrl, { maxRetriesPerRequest: 2, commandTimeout: 2_000 }),
        subscriber: new Redis(options.redisUrl),
      }
    : undefined;
  if (redis) {
    for (const client of [redis.publisher, redis.subscriber]) {
      client.on('error', (err) => logger.warn({ err }, 'event bus: Redis error'));
    }
  }
  const target: PubSubEventTarget<Channels> = redis
    ? createRedisEventTarget({ publishClient: redis.publisher, subscribeClient: redis.subscriber })
    : manyListenersTarget();

  let listeners = 0;
  // This instance's listeners by channel, besides their registration on the event target: when
  // Redis cannot take a publish, the events still reach the subscribers on the instance that
  // committed them (other instances miss them: live delivery is not durable).
  const local = new Map<string, Set<(event: CustomEvent<EventEnvelope>) => void>>();
  const deliverLocally = (events: EventEnvelope[]) => {
    for (const event of events) {
      for (const listener of local.get(channelOf(event.shopId)) ?? []) listener(new CustomEvent(channelOf(event.shopId), { detail: event }));
    }
  };
  const slotsOf = (name: string, limit: number) => createSubscriptionSlots({ name, limit, redis: redis?.publisher, keyPrefix: options.keyPrefix, logger });
  const slots = slotsOf('live-subscriptions', subscriptionsPerShop);
  const socketSlots = slotsOf('websockets', options.socketsPerShop);
  const customerSlots = (name: string): CustomerSlots & { close(): void } => {
    const perShop = slotsOf(`storefront-${name}`, options.storefront.perShop);
    const perCustomer = slotsOf(`customer-${name}`, options.storefront.perCustomer);
    return {
      async acquire(shopId, customerId) {
        const customer = await perCustomer.acquire(customerId);
        const shop = customer && (await perShop.acquire(shopId));
        if (customer && shop) {
          return () => {
            customer();
            shop();
          };
        }
        customer?.();
        return null;
      },
      close() {
        perShop.close();
        perCustomer.close();
      },
    };
  };
  const storefrontSlots = customerSlots('subscriptions');
  const storefrontSocketSlots = customerSlots('websockets');
  // Each live subscription, with the id of the API key that opened it.
  const live = new Map<{ end(): void }, string>();
  let closed = false;

  const revocationListeners = new Set<(revocation: Revocation) => void>();
  // Ids of the keys revoked since this instance started (a revoked key stays revoked; a few bytes
  // each): a subscription or socket authenticated just before a revocation, and registered just
  // after it, is refused instead of outliving it.
  const revokedKeys = new Set<string>();
  const revoked = (revocation: Revocation) => {
    if ('apiKey' in revocation) {
      revokedKeys.add(revocation.apiKey.id);
      for (const [subscription, apiKeyId] of live) if (apiKeyId === revocation.apiKey.id) subscription.end();
    }
    for (const listener of revocationListeners) listener(revocation);
  };
  // The same event target carries revocations on their own channel. On Redis this instance hears
  // its own announcements too; handling one twice changes nothing.
  const revocations = target as unknown as PubSubEventTarget<Record<string, [revocation: Revocation]>>;
  revocations.addEventListener(revocationsChannel, (event) => revoked(event.detail));

  async function announceRevocation(revocation: Revocation): Promise<void> {
    if (closed) return;
    // Only what names the credential travels (an ApiKeyInfo given here carries its dates too).
    const message: Revocation =
      'apiKey' in revocation
        ? { apiKey: { id: revocation.apiKey.id, prefix: revocation.apiKey.prefix } }
        : { customerTokens: { shopId: revocation.customerTokens.shopId, customerId: revocation.customerTokens.customerId } };
    if (!redis) return void revocations.dispatchEvent(new CustomEvent(revocationsChannel, { detail: message }));
    revoked(message);
    await redis.publisher.publish(revocationsChannel, JSON.stringify(message)).catch((err) => {
      logger.warn({ err, revocation: message }, 'event bus: could not announce a revocation to other instances');
    });
  }

  async function publish(events: EventEnvelope[]): Promise<void> {
    if (closed || events.length === 0) return;
    if (!redis) {
      for (const event of events) target.dispatchEvent(new CustomEvent(channelOf(event.shopId), { detail: event }));
      return;
    }
    // Published here rather than through the event target so a Redis failure reaches the
    // relay's log instead of becoming an unhandled rejection.
    const pipeline = redis.publisher.pipeline();
    for (const event of events) pipeline.publish(channelOf(event.shopId), JSON.stringify(event));
    let results: Array<[Error | null, unknown]>;
    try {
      results = (await pipeline.exec()) ?? [];
    } catch (err) {
      deliverLocally(events);
      throw err;
    }
    const failed = events.filter((_, i) => results[i]?.[0]);
    if (failed.length) {
      deliverLocally(failed);
      throw results.find(([err]) => err)![0];
    }
  }

  async function subscribe(owner: SubscriptionOwner, accept: (event: EventEnvelope) => boolean = () => true): Promise<AsyncIterableIterator<EventEnvelope>> {
    const { shopId } = owner;
    const shuttingDown = () => new RuleViolationError('server_shutting_down', 'the server is shutting down; reconnect to another instance');
    if (closed) throw shuttingDown();
    const release = owner.customerId ? await storefrontSlots.acquire(shopId, owner.customerId) : await slots.acquire(shopId);
    if (!release) {
      throw new RuleViolationError(
        'subscription_limit_reached',
        owner.customerId
          ? `this customer already has ${options.storefront.perCustomer} live subscriptions (or the shop's storefront ${options.storefront.perShop}); close one before opening another`
          : `this shop already has ${subscriptionsPerShop} live subscriptions; close one before opening another`,
      );
    }
    if (closed) {
      release();
      throw shuttingDown();
    }
    if (revokedKeys.has(owner.apiKeyId)) {
      release();
      throw new RuleViolationError('api_key_revoked', 'the API key was revoked');
    }
    const channel = channelOf(shopId);
    const listener = (event: CustomEvent<EventEnvelope>) => {
      if (accept(event.detail)) subscription.deliver(event.detail);
    };
    // However the subscription ends (returned, its socket closed, the bus closed), this runs once.
    const subscription = subscriptionQueue(() => {
      target.removeEventListener(channel, listener);
      local.get(channel)?.delete(listener);
      if (local.get(channel)?.size === 0) local.delete(channel);
      listeners--;
      live.delete(subscription);
      release();
    });
    target.addEventListener(channel, listener);
    if (redis) local.set(channel, (local.get(channel) ?? new Set()).add(listener));
    listeners++;
    live.set(subscription, owner.apiKeyId);
    return subscription.iterator;
  }

  return {
    outboxHandler: { name: 'live-events', afterCommit: (events) => publish(events.map(toEnvelope)) },
    publish,
    subscribe,
    socketSlots,
    storefrontSocketSlots,
    announceRevocation,
    onRevoked(listener) {
      revocationListeners.add(listener);
      return () => revocationListeners.delete(listener);
    },
    wasRevoked: (apiKeyId) => revokedKeys.has(apiKeyId),
    keysInUse: () => new Set(live.values()),
    stats: () => ({ subscriptions: live.size, listeners }),
    listenersOn: (shopId) => (redis ? null : getEventListeners(target as EventTarget, channelOf(shopId)).length),
    async close() {
      if (closed) return;
      closed = true;
      for (const subscription of [...live.keys()]) subscription.end();
      for (const each of [slots, socketSlots, storefrontSlots, storefrontSocketSlots]) each.close();
      // quit() lets the last slot releases through; a client that is not connected is just dropped.
      for (const client of redis ? [redis.publisher, redis.subscriber] : []) {
        if (client.status === 'ready') await client.quit().catch(() => client.disconnect());
        else client.disconnect();
      }
    },
  };
}

/** An EventTarget without Node's warning at 11 listeners: a shop may hold SUBSCRIPTIONS_PER_SHOP, which bounds them. */
function manyListenersTarget(): EventTarget {
  const target = new EventTarget();
  setMaxListeners(0, target);
  return target;
}

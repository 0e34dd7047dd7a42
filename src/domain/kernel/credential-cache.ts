import { timingSafeEqual } from 'node:crypto';
import { singleFlight } from './single-flight.js';

type Entry<T> = { identity: T; hash: Buffer; expiresAt: number };

/**
 * Who a secret credential (an API key, a customer access token) speaks for, kept in this process
 * for `ttlMs` after a lookup found it good, so a request presenting it again costs no query.
 * - Per database handle: a handle opened later (a restart, a test) starts cold.
 * - Keyed by the credential's public prefix (unique), keeping its SHA-256, never the secret; a hit
 *   is compared in constant time, so a wrong secret with a cached prefix is refused as the row would.
 * - Only good credentials are cached: one created a moment ago elsewhere works at once.
 * - Every forget makes the lookups running meanwhile not cache their answer (each may have read
 *   its row just before the revocation committed).
 * - At most `max` entries per handle; past that the oldest goes.
 */
export function credentialCache<T>(options: { ttlMs: number; max: number }) {
  const caches = new WeakMap<object, Map<string, Entry<T>>>();
  const lookups = new WeakMap<object, Map<string, Promise<T | null>>>();
  let forgets = 0;

  return {
    /**
     * Who presents the credential of this prefix and SHA-256: the cached identity, or what `read`
     * finds (null: unknown, wrong or no longer good; it compares the stored hash itself).
     */
    async authenticate(db: object, prefix: string, hash: Buffer, read: () => Promise<T | null>): Promise<T | null> {
      const cache = perHandle(caches, db);
      const cached = cache.get(prefix);
      if (cached && cached.expiresAt > Date.now()) return timingSafeEqual(cached.hash, hash) ? cached.identity : null;
      if (cached) cache.delete(prefix);
      return singleFlight(perHandle(lookups, db), hash.toString('hex'), async () => {
        const now = Date.now();
        const seen = forgets;
        const identity = await read();
        if (identity !== null && seen === forgets) {
          if (cache.size >= options.max) cache.delete(cache.keys().next().value!);
          cache.set(prefix, { identity, hash, expiresAt: now + options.ttlMs });
        }
        return identity;
      });
    },
    /** Stops trusting the credential of this prefix on this handle. */
    forget(db: object, prefix: string): void {
      forgets++;
      perHandle(caches, db).delete(prefix);
    },
    /** Stops trusting, on this handle, every cached credential whose identity `ended` picks. */
    forgetWhere(db: object, ended: (identity: T) => boolean): void {
      forgets++;
      const cache = perHandle(caches, db);
      for (const [prefix, entry] of cache) if (ended(entry.identity)) cache.delete(prefix);
    },
  };
}

/** The map `maps` holds for this database handle, made on first use. */
function perHandle<V>(maps: WeakMap<object, Map<string, V>>, db: object): Map<string, V> {
  let map = maps.get(db);
  if (!map) {
    map = new Map();
    maps.set(db, map);
  }
  return map;
}

import type { DB } from '../db/database.js';
import { revokedApiKeys } from '../domain/shops/index.js';
import type { Logger } from '../logger.js';
import type { EventBus } from './bus.js';

/**
 * A key revoked where no event bus reaches (the CLI, a script on the database) must still end the
 * live subscriptions and sockets opened with it. Every `intervalMs` the keys holding something open
 * on this instance are looked up (one query, and none while nothing is open); a revoked one is
 * announced as if `apiKeyRevoke` had revoked it. Returns the stop.
 */
export function watchRevocations(options: {
  db: DB;
  bus: Pick<EventBus, 'announceRevocation' | 'wasRevoked'>;
  logger: Logger;
  keysInUse: () => Iterable<string>;
  intervalMs?: number;
}): () => void {
  const { db, bus, logger } = options;
  let running = false;
  const check = async () => {
    const ids = [...new Set(options.keysInUse())].filter((id) => !bus.wasRevoked(id));
    if (running || ids.length === 0) return;
    running = true;
    try {
      for (const key of await revokedApiKeys(db, ids)) await bus.announceRevocation(key);
    } catch (err) {
      // The database is down or busy: the next tick tries again.
      logger.debug({ err }, 'revocation watch: could not look up the keys in use');
    } finally {
      running = false;
    }
  };
  const timer = setInterval(check, options.intervalMs ?? 1_000);
  timer.unref();
  return () => clearInterval(timer);
}

import type { DB } from '../db/database.js';
import { revokedApiKeys } from '../domain/shops/index.js';
import { endedStaffSessions } from '../domain/staff/index.js';
import type { Logger } from '../logger.js';
import type { EventBus } from './bus.js';

/**
 * A key revoked where no event bus reaches (the CLI, a script on the database) must still end the
 * live subscriptions and sockets opened with it. Every `intervalMs` the keys holding something open
 * on this instance are looked up (one query, and none while nothing is open); a revoked one is
 * announced as if `apiKeyRevoke` had revoked it. Staff sessions are read from the database at every
 * request, so their ends (sign-out, password change, removal, on any instance) are found the same
 * way: the sessions holding graphql-ws sockets here are looked up, and `sessions.ended` closes the
 * sockets of those gone. Returns the stop.
 */
export function watchRevocations(options: {
  db: DB;
  bus: Pick<EventBus, 'announceRevocation' | 'wasRevoked'>;
  logger: Logger;
  keysInUse: () => Iterable<string>;
  sessions: { inUse: () => Iterable<string>; ended: (ids: string[]) => void; now: () => Date };
  intervalMs?: number;
}): () => void {
  const { db, bus, logger, sessions } = options;
  let running = false;
  const check = async () => {
    const ids = [...new Set(options.keysInUse())].filter((id) => !bus.wasRevoked(id));
    const sessionIds = [...sessions.inUse()];
    if (running || ids.length + sessionIds.length === 0) return;
    running = true;
    try {
      for (const apiKey of await revokedApiKeys(db, ids)) await bus.announceRevocation({ apiKey });
      sessions.ended(await endedStaffSessions(db, sessionIds, sessions.now()));
    } catch (err) {
      // The database is down or busy: the next tick tries again.
      logger.debug({ err }, 'revocation watch: could not look up the keys and sessions in use');
    } finally {
      running = false;
    }
  };
  const timer = setInterval(check, options.intervalMs ?? 1_000);
  timer.unref();
  return () => clearInterval(timer);
}

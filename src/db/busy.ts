import { DatabaseOverloadedError } from './database.js';

/** Why the database cannot serve a request right now; the client should retry after `retryAfterSec`. */
export type DatabaseBusy = { code: 'overloaded' | 'service_unavailable'; message: string; retryAfterSec: number };

// Errors meaning the database cannot be reached right now: worth a retry, not a 500.
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', '57P01', '57P02', '57P03', '53300']);

/**
 * Whether `err` says the database cannot serve right now: the pool shed the request (overloaded,
 * nothing was done) or the database is unreachable. REST and GraphQL both answer these with 503
 * and Retry-After instead of a 500.
 */
export function databaseBusy(err: unknown): DatabaseBusy | undefined {
  if (err instanceof DatabaseOverloadedError) {
    return { code: 'overloaded', message: 'the server is at capacity; retry shortly', retryAfterSec: 1 };
  }
  const e = (err ?? {}) as { code?: unknown; message?: unknown };
  const unavailable =
    UNAVAILABLE_CODES.has(String(e.code)) ||
    (typeof e.message === 'string' && /timeout exceeded when trying to connect|Connection terminated|PGlite is closed/.test(e.message));
  return unavailable ? { code: 'service_unavailable', message: 'the database is unreachable; retry shortly', retryAfterSec: 5 } : undefined;
}

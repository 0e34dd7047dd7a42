/**
 * When a failed delivery is tried again (DESIGN.md "Webhooks", the Standard Webhooks schedule):
 * attempts at 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h and 24 h, each delay counted from
 * the previous attempt, with ±20 % jitter so that a receiver coming back is not hit by every
 * retry at once.
 */
const SECOND = 1000;
const MINUTE = 60 * SECOND;
const HOUR = 60 * MINUTE;

/** Delay before scheduled attempt n (index n): the first is immediate. */
export const RETRY_DELAYS_MS = [0, 5 * SECOND, 5 * MINUTE, 30 * MINUTE, 2 * HOUR, 5 * HOUR, 10 * HOUR, 14 * HOUR, 20 * HOUR, 24 * HOUR] as const;

export const MAX_SCHEDULED_ATTEMPTS = RETRY_DELAYS_MS.length;
export const JITTER = 0.2;
/** The longest a Retry-After header can push the next attempt out. */
export const MAX_RETRY_AFTER_MS = 24 * HOUR;

/**
 * Milliseconds from now until the next scheduled attempt after `attemptsMade` scheduled attempts
 * failed, or null when the schedule is used up. A `Retry-After` (429/503) can only push it later,
 * up to 24 h: a receiver asking for a pause gets it, one asking for sooner does not get hammered.
 */
export function nextRetryDelay(attemptsMade: number, retryAfterMs: number | null, random: () => number = Math.random): number | null {
  const base = RETRY_DELAYS_MS[attemptsMade];
  if (base === undefined) return null;
  const jittered = Math.round(base * (1 - JITTER + 2 * JITTER * random()));
  return retryAfterMs === null ? jittered : Math.max(jittered, Math.min(retryAfterMs, MAX_RETRY_AFTER_MS));
}

/** A Retry-After header (delta seconds or an HTTP date) in milliseconds from `now`; null if absent or unreadable. */
export function parseRetryAfter(value: string | undefined, now: number): number | null {
  if (!value) return null;
  const trimmed = value.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * SECOND;
  const at = Date.parse(trimmed);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

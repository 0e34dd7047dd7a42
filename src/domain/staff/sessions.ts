import { createHash, timingSafeEqual } from 'node:crypto';
import type { DB } from '../../db/database.js';
import { type PurgeOptions, purgeExpiredRows } from '../../db/purge.js';
import type { Queryable } from '../../db/transaction.js';
import { newId, randomString, sha256 } from '../kernel/index.js';
import type { Shop } from '../shops/index.js';
import type { StaffRole } from './roles.js';

/** A session ends after this long without a request… */
export const SESSION_IDLE_MS = 12 * 60 * 60 * 1000;
/** …and this long after sign-in whatever its use. */
export const SESSION_MAX_MS = 7 * 24 * 60 * 60 * 1000;
// last_seen_at is written at most this often, not at every request.
const SEEN_PRECISION_MS = 60 * 1000;

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const SESSION_TOKEN = /^ss_[A-Za-z0-9]{43}$/;

/** A signed-in person as a request sees them: who, in which shop, with which role. */
export type StaffSession = {
  sessionId: string;
  staffId: string;
  email: string;
  name: string;
  role: StaffRole;
  shop: Shop;
  expiresAt: Date;
};

/** What the cookie carries (`token`) and what the page sends back in x-csrf-token (`csrfToken`). */
export type NewSession = { token: string; csrfToken: string; expiresAt: Date };

/**
 * Always a fresh token (~256 bits, stored as its SHA-256): whatever session cookie the browser
 * presented at sign-in is never adopted, so a planted one is worth nothing.
 */
export async function createSession(db: Queryable, staffId: string, shopId: string, now: Date): Promise<NewSession> {
  const token = `ss_${randomString(43, ALNUM)}`;
  const expiresAt = new Date(now.getTime() + SESSION_MAX_MS);
  await db
    .insertInto('staff_sessions')
    .values({ id: newId(), token_hash: sha256(token).toString('hex'), shop_id: shopId, staff_id: staffId, last_seen_at: now, expires_at: expiresAt })
    .execute();
  return { token, csrfToken: csrfTokenOf(token), expiresAt };
}

/**
 * The CSRF token is derived from the session's secret: a page of another site can make the browser
 * send the cookie, but cannot read it nor this token, which only sign-in and GET /admin/session show.
 */
export function csrfTokenOf(sessionToken: string): string {
  return createHash('sha256').update(`csrf:${sessionToken}`).digest('base64url');
}

export function csrfTokenMatches(sessionToken: string, given: unknown): boolean {
  if (typeof given !== 'string') return false;
  const expected = Buffer.from(csrfTokenOf(sessionToken));
  const actual = Buffer.from(given);
  return actual.length === expected.length && timingSafeEqual(actual, expected);
}

/**
 * The live session of a cookie's token, or null: unknown, signed out, idle or past its age, or its
 * person removed from the shop (the membership's deletion took its sessions along). Read from the
 * database at every request, so an ended session is refused at once on every instance. The token
 * is found by its SHA-256: what a timing difference could reveal is of the hash, not of the token.
 */
export async function staffSession(db: Queryable, token: string, now: Date): Promise<StaffSession | null> {
  if (!SESSION_TOKEN.test(token)) return null;
  const row = await db
    .selectFrom('staff_sessions as s')
    .innerJoin('staff_memberships as m', (j) => j.onRef('m.shop_id', '=', 's.shop_id').onRef('m.staff_id', '=', 's.staff_id'))
    .innerJoin('staff_accounts as a', 'a.id', 's.staff_id')
    .innerJoin('shops', 'shops.id', 's.shop_id')
    .select(['s.id', 's.staff_id', 's.last_seen_at', 's.expires_at', 'm.role', 'a.email', 'a.name', 'shops.id as shop_id', 'shops.name as shop_name', 'shops.created_at as shop_created_at'])
    .where('s.token_hash', '=', sha256(token).toString('hex'))
    .executeTakeFirst();
  if (!row) return null;
  const t = now.getTime();
  if (row.expires_at.getTime() <= t || row.last_seen_at.getTime() + SESSION_IDLE_MS <= t) {
    await db.deleteFrom('staff_sessions').where('id', '=', row.id).execute();
    return null;
  }
  if (t - row.last_seen_at.getTime() >= SEEN_PRECISION_MS) {
    await db.updateTable('staff_sessions').set({ last_seen_at: now }).where('id', '=', row.id).execute();
  }
  return {
    sessionId: row.id,
    staffId: row.staff_id,
    email: row.email,
    name: row.name,
    role: row.role,
    shop: { id: row.shop_id, name: row.shop_name, createdAt: row.shop_created_at },
    expiresAt: new Date(Math.min(row.expires_at.getTime(), Math.max(t, row.last_seen_at.getTime()) + SESSION_IDLE_MS)),
  };
}

/**
 * Which of these sessions have ended (signed out, password changed or reset, person removed, idle
 * or past their age): what holds one open without making requests (a graphql-ws socket) is closed
 * by this. One query, and it reads only: being watched is not a request that keeps a session alive.
 */
export async function endedStaffSessions(db: Queryable, ids: readonly string[], now: Date): Promise<string[]> {
  if (ids.length === 0) return [];
  const live = await db
    .selectFrom('staff_sessions as s')
    .innerJoin('staff_memberships as m', (j) => j.onRef('m.shop_id', '=', 's.shop_id').onRef('m.staff_id', '=', 's.staff_id'))
    .select('s.id')
    .where('s.id', 'in', ids)
    .where('s.expires_at', '>', now)
    .where('s.last_seen_at', '>', new Date(now.getTime() - SESSION_IDLE_MS))
    .execute();
  const alive = new Set(live.map((row) => row.id));
  return ids.filter((id) => !alive.has(id));
}

/** Sign-out: the token stops working everywhere at once. */
export async function endSession(db: Queryable, token: string): Promise<void> {
  await db.deleteFrom('staff_sessions').where('token_hash', '=', sha256(token).toString('hex')).execute();
}

/** Ends every session of a person except `keep` (the one that changed the password), in every shop. */
export async function endSessionsOf(db: Queryable, staffId: string, keep?: string): Promise<void> {
  let query = db.deleteFrom('staff_sessions').where('staff_id', '=', staffId);
  if (keep) query = query.where('id', '<>', keep);
  await query.execute();
}

/**
 * The retention loop's part: sessions past their age and one-time links past their end (used or
 * not). A session ended by idleness is refused at once and deleted here within its 7 days.
 */
export async function purgeExpiredStaffRecords(db: DB, now: Date, options: PurgeOptions = {}): Promise<number> {
  return (await purgeExpiredRows(db, 'staff_sessions', now, options)) + (await purgeExpiredRows(db, 'staff_link_tokens', now, options));
}

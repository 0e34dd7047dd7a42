import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { DB } from '../db/database.js';
import { UnauthenticatedError } from '../domain/kernel/index.js';
import {
  acceptStaffInvite, csrfTokenMatches, csrfTokenOf, endSession, type NewSession, resetStaffPassword, signIn, signInEmail, staffSession,
  type StaffSession,
} from '../domain/staff/index.js';
import type { StaffAttempt, StaffLimiter } from '../rate-limit/staff.js';
import { HttpError } from '../requests/errors.js';

export const SESSION_COOKIE = 'staff_session';
export const CSRF_HEADER = 'x-csrf-token';

export type StaffDeps = { db: DB; limiter: StaffLimiter; now: () => Date; publicUrl: string | null };

/** The session cookie's value, if the request (or a WebSocket upgrade) carries one. */
export function sessionCookie(request: { headers: IncomingHttpHeaders }): string | null {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const at = part.indexOf('=');
    if (at > 0 && part.slice(0, at).trim() === SESSION_COOKIE) return part.slice(at + 1).trim();
  }
  return null;
}

/**
 * httpOnly (no script reads it), SameSite=Strict (no other site's page sends it), Path=/ (the
 * console and /graphql), Secure when the service is reached over https (PUBLIC_URL).
 */
function setSessionCookie(reply: FastifyReply, deps: StaffDeps, value: string, maxAgeSec: number): void {
  const secure = deps.publicUrl?.startsWith('https:') ? '; Secure' : '';
  reply.header('set-cookie', `${SESSION_COOKIE}=${value}; HttpOnly; SameSite=Strict; Path=/; Max-Age=${maxAgeSec}${secure}`);
}

/** What a page learns about the signed-in person: also the answer of a sign-in. */
function whoAmI(session: StaffSession, token: string) {
  return {
    success: true,
    staff: { id: session.staffId, email: session.email, name: session.name, role: session.role },
    shop: { id: session.shop.id, name: session.shop.name },
    csrfToken: csrfTokenOf(token),
    expiresAt: session.expiresAt.toISOString(),
  };
}

/** A new session's cookie and the page's answer. */
async function signedIn(reply: FastifyReply, deps: StaffDeps, created: NewSession) {
  const now = deps.now();
  setSessionCookie(reply, deps, created.token, Math.ceil((created.expiresAt.getTime() - now.getTime()) / 1000));
  const session = await staffSession(deps.db, created.token, now);
  return reply.header('cache-control', 'no-store').send(whoAmI(session!, created.token));
}

/**
 * Runs a try at a guarded door: refused with 429 and Retry-After while the attempt's account or IP
 * has used its failures; a wrong password or link counts one failure, a success clears the account's.
 */
async function guarded<T>(limiter: StaffLimiter, attempt: StaffAttempt, run: () => Promise<T>): Promise<T> {
  const decision = await limiter.check(attempt);
  if (!decision.allowed) throw new HttpError(429, 'rate_limited', decision.message, { 'retry-after': String(decision.retryAfterSec) });
  try {
    const result = await run();
    await limiter.succeeded(attempt);
    return result;
  } catch (err) {
    const code = (err as { code?: unknown }).code;
    if (code === 'invalid_credentials' || code === 'invalid_token') await limiter.failed(attempt);
    throw err;
  }
}

/**
 * The staff's doors (docs/console.md): sign in, who am I (with the CSRF token a page sends back),
 * sign out, accept an invite, reset a password. JSON bodies only, so no other site's form can post
 * here, and no CORS: a page of another origin cannot read an answer.
 */
export function registerStaffSession(app: FastifyInstance, deps: StaffDeps): void {
  const { db, limiter, now } = deps;

  app.post('/admin/session', async (request, reply) => {
    // A session cookie the browser brings (perhaps planted) is never adopted: it ends, a new one replaces it.
    const presented = sessionCookie(request);
    if (presented) await endSession(db, presented);
    const attempt = { account: signInEmail(request.body), ip: request.ip };
    const result = await guarded(limiter, attempt, () => signIn(db, request.body, now()));
    if (result.kind === 'shop_required') {
      const shops = result.shops.map((s) => ({ id: s.id, name: s.name }));
      return reply.code(409).send({ success: false, statusCode: 409, error: 'shop_required', message: 'you belong to several shops: sign in again with one\'s shopId', shops });
    }
    return signedIn(reply, deps, result.session);
  });

  app.get('/admin/session', async (request, reply) => {
    const token = sessionCookie(request);
    const session = token ? await staffSession(db, token, now()) : null;
    if (!token || !session) throw new UnauthenticatedError('unauthorized', 'not signed in, or the session has ended: sign in at POST /admin/session');
    return reply.header('cache-control', 'no-store').send(whoAmI(session, token));
  });

  app.delete('/admin/session', async (request, reply) => {
    const token = sessionCookie(request);
    if (token) await endSession(db, token);
    setSessionCookie(reply, deps, '', 0);
    return reply.send({ success: true });
  });

  app.post('/admin/invites/accept', async (request, reply) => {
    const created = await guarded(limiter, { ip: request.ip }, () => acceptStaffInvite(db, request.body, now()));
    return signedIn(reply, deps, created);
  });

  app.post('/admin/password-reset', async (request, reply) => {
    await guarded(limiter, { ip: request.ip }, () => resetStaffPassword(db, request.body, now()));
    // Every session of the person ended, this browser's too.
    if (sessionCookie(request)) setSessionCookie(reply, deps, '', 0);
    return reply.send({ success: true });
  });
}

export type StaffDoorOutcome = { refused: false } | { refused: true; status: 401 | 403; code: string; message: string };

/**
 * /graphql's cookie door, for a request without an API key: a live session is the caller when the
 * request carries its CSRF token in x-csrf-token. A POST (or any request naming a CSRF token) with
 * the cookie but without the right token is refused: another site's page can make the browser send
 * the cookie, never the token. A GET without one (the GraphiQL page) is left unauthenticated.
 */
export function staffDoor(deps: StaffDeps) {
  return async (request: FastifyRequest): Promise<StaffDoorOutcome> => {
    const token = sessionCookie(request);
    const csrf = request.headers[CSRF_HEADER];
    if (!token || (request.method !== 'POST' && csrf === undefined)) return { refused: false };
    const session = await staffSession(deps.db, token, deps.now());
    if (!session) return { refused: true, status: 401, code: 'unauthorized', message: 'the staff session has ended: sign in again' };
    if (!csrfTokenMatches(token, csrf)) {
      return { refused: true, status: 403, code: 'csrf_token_invalid', message: `a signed-in request must carry its session's CSRF token in ${CSRF_HEADER} (GET /admin/session gives it)` };
    }
    request.shop = session.shop;
    request.apiKey = null;
    request.staff = session;
    return { refused: false };
  };
}

/**
 * The cookie door of the REST downloads (GET /exports/*.csv): a live session of any role (a viewer
 * reads) is the caller. No CSRF token: a GET download changes nothing, and SameSite=Strict keeps
 * another site's page from sending the cookie; no CORS lets such a page read the file anyway.
 */
export function staffDownloadDoor(deps: StaffDeps, urls: readonly string[]) {
  return async (request: FastifyRequest): Promise<void> => {
    const token = sessionCookie(request);
    if (request.method !== 'GET' || !token || !urls.includes(request.routeOptions.url ?? '')) return;
    const session = await staffSession(deps.db, token, deps.now());
    if (!session) return;
    request.shop = session.shop;
    request.apiKey = null;
    request.staff = session;
  };
}

/**
 * Whether a WebSocket upgrade comes from a page of this server: its Origin is PUBLIC_URL's, or,
 * without PUBLIC_URL, names the host the upgrade was sent to. An upgrade carries no CSRF token and
 * some browsers send the cookie with another site's upgrade (cross-site WebSocket hijacking), so
 * the cookie counts only from our own pages; a client that sends no Origin is no browser page and
 * has no business using a person's cookie either.
 */
function fromOwnOrigin(request: IncomingMessage, publicUrl: string | null): boolean {
  const origin = request.headers.origin;
  if (!origin) return false;
  try {
    return publicUrl ? new URL(publicUrl).origin === origin : new URL(origin).host === request.headers.host;
  } catch {
    return false; // an Origin that is no URL (e.g. "null", from a sandboxed page)
  }
}

/**
 * graphql-ws's cookie door (the program page's live events, /dashboard#session): a live session is
 * the connection's caller when the upgrade came from our own origin (fromOwnOrigin). Asked again
 * for every operation, so an ended session opens nothing more; revocation-watch.ts closes its socket.
 */
export function staffSocketDoor(deps: StaffDeps) {
  return async (request: IncomingMessage): Promise<{ shop: StaffSession['shop']; apiKey: null; staff: StaffSession } | null> => {
    const token = sessionCookie(request);
    if (!token || !fromOwnOrigin(request, deps.publicUrl)) return null;
    const session = await staffSession(deps.db, token, deps.now());
    return session && { shop: session.shop, apiKey: null, staff: session };
  };
}

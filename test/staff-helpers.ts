import { expect } from 'vitest';
import { createStaffInvite, type StaffRole } from '../src/domain/staff/index.js';
import type { TestApp } from './helpers.js';

export const PASSWORD = 'correct horse battery';

/** A browser's view of one signed-in person: the session cookie and the CSRF token the page keeps. */
export type StaffClient = { cookie: string; csrf: string; body: any };

/** The `staff_session=…` pair a response sets, as a browser would send it back. */
export function cookieOf(res: Response): string {
  const set = res.headers.get('set-cookie');
  expect(set, 'a Set-Cookie header').toBeTruthy();
  return set!.split(';')[0]!;
}

export async function jsonPost(t: TestApp, path: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`${t.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
}

export async function signIn(t: TestApp, email: string, password = PASSWORD, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}): Promise<Response> {
  return jsonPost(t, '/admin/session', { email, password, ...extra }, headers);
}

/** Signs in and returns the browser's state; fails unless the sign-in succeeded. */
export async function signedIn(t: TestApp, email: string, password = PASSWORD, extra: Record<string, unknown> = {}): Promise<StaffClient> {
  const res = await signIn(t, email, password, extra);
  const body = await res.json();
  expect(res.status, JSON.stringify(body)).toBe(200);
  return { cookie: cookieOf(res), csrf: body.csrfToken, body };
}

/** An invite made in the shop (as the CLI or an owner makes one), accepted over HTTP: the new member, signed in. */
export async function member(t: TestApp, shopId: string, email: string, role: StaffRole, password = PASSWORD): Promise<StaffClient> {
  const link = await createStaffInvite(t.app.database.db, shopId, { email, role }, new Date());
  const res = await jsonPost(t, '/admin/invites/accept', { token: link.token, name: email.split('@')[0], password });
  const body = await res.json();
  expect(res.status, JSON.stringify(body)).toBe(200);
  return { cookie: cookieOf(res), csrf: body.csrfToken, body };
}

/** A GraphQL request from the console's page: the cookie and, unless told otherwise, its CSRF token. */
export async function staffGraphql(
  t: TestApp,
  client: { cookie: string; csrf?: string | undefined },
  query: string,
  variables?: Record<string, unknown>,
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${t.url}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie: client.cookie, ...(client.csrf !== undefined ? { 'x-csrf-token': client.csrf } : {}) },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, body: await res.json() };
}

export async function whoAmI(t: TestApp, cookie: string): Promise<{ status: number; body: any }> {
  const res = await fetch(`${t.url}/admin/session`, { headers: { cookie } });
  return { status: res.status, body: await res.json() };
}

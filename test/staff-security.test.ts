import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../src/logger.js';
import { startTestApp, type TestApp } from './helpers.js';
import { cookieOf, jsonPost, member, PASSWORD, type StaffClient, signedIn, signIn, staffGraphql, whoAmI } from './staff-helpers.js';

// Short windows and small allowances, so a test can use them up and see them free again.
const WINDOW_SECONDS = 2;
/** With TEST_REDIS_URL the sign-in counts are kept in Redis (shared by instances), on keys of this file's own. */
const REDIS_URL = process.env.TEST_REDIS_URL;
const redisEnv: Record<string, string> = REDIS_URL ? { REDIS_URL, REDIS_KEY_PREFIX: `staff-${randomBytes(4).toString('hex')}:` } : {};
const lines: string[] = [];
let t: TestApp;
let shopId: string;
let apiKey: string;
let owner: StaffClient;
let support: StaffClient;
/** Every secret the tests handle: none may reach a log line. */
const secrets = new Set<string>([PASSWORD]);

beforeAll(async () => {
  const logger = createLogger('debug', new Writable({ write: (chunk, _enc, done) => (lines.push(String(chunk)), done()) }));
  t = await startTestApp(
    { STAFF_SIGNIN_FAILURES_PER_ACCOUNT: '3', STAFF_SIGNIN_FAILURES_PER_IP: '8', STAFF_SIGNIN_WINDOW_SECONDS: String(WINDOW_SECONDS), LOG_LEVEL: 'debug', ...redisEnv },
    { logger },
  );
  ({ shopId, apiKey } = await t.shop());
  await t.customer(shopId, 'c-1', 100);
  owner = await member(t, shopId, 'owner@example.com', 'owner');
  support = await member(t, shopId, 'support@example.com', 'support');
  for (const c of [owner, support]) secrets.add(c.cookie.split('=')[1]!).add(c.csrf);
});
afterAll(() => t?.stop());

const ADD = `mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: 5, note: "goodwill" }) { customer { points } userErrors { code } } }`;
const balance = async () => (await t.graphql(apiKey, `{ customer(identifier: "c-1") { points } }`)).data.customer.points as number;

describe('sessions', () => {
  it('session fixation: a cookie presented at sign-in is not adopted; a fresh token replaces it and the old one ends', async () => {
    const planted = await signedIn(t, 'support@example.com');
    const res = await signIn(t, 'support@example.com', PASSWORD, {}, { cookie: planted.cookie });
    expect(res.status).toBe(200);
    const fresh = cookieOf(res);
    secrets.add(fresh.split('=')[1]!);
    expect(fresh).not.toBe(planted.cookie);
    expect((await whoAmI(t, planted.cookie)).status).toBe(401);
    expect((await whoAmI(t, fresh)).status).toBe(200);
    // A token made up by an attacker is no session, before or after.
    const made = 'staff_session=ss_' + 'A'.repeat(43);
    const res2 = await signIn(t, 'support@example.com', PASSWORD, {}, { cookie: made });
    expect(cookieOf(res2)).not.toBe(made);
    expect((await whoAmI(t, made)).status).toBe(401);
  });

  it('CSRF: the cookie without its token, or with a wrong one, is refused and changes nothing; with it, the operation runs', async () => {
    const before = await balance();
    const none = await staffGraphql(t, { cookie: support.cookie }, ADD);
    expect(none.status).toBe(403);
    expect(none.body.errors[0].extensions.code).toBe('csrf_token_invalid');
    const wrong = await staffGraphql(t, { cookie: support.cookie, csrf: owner.csrf }, ADD);
    expect(wrong.status).toBe(403);
    const forged = await staffGraphql(t, { cookie: support.cookie, csrf: 'x'.repeat(43) }, ADD);
    expect(forged.status).toBe(403);
    expect(await balance()).toBe(before);
    // A GET carrying a query and the cookie but no token is not signed in at all.
    const get = await fetch(`${t.url}/graphql?query=${encodeURIComponent('{ shop { id } }')}`, { headers: { cookie: support.cookie, accept: 'application/json' } });
    expect(get.status).toBe(401);

    const right = await staffGraphql(t, support, ADD);
    expect(right.status).toBe(200);
    expect(right.body.data.pointsAdd).toEqual({ customer: { points: before + 5 }, userErrors: [] });
    // The console's own page sends its Origin (Yoga's full path): the session and token work there too.
    const fromPage = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: t.url, cookie: support.cookie, 'x-csrf-token': support.csrf },
      body: JSON.stringify({ query: ADD }),
    });
    expect(fromPage.status).toBe(200);
    expect((await fromPage.json()).data.pointsAdd.customer.points).toBe(before + 10);
    const forgedFromPage = await fetch(`${t.url}/graphql`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', origin: 'https://evil.example', cookie: support.cookie },
      body: JSON.stringify({ query: ADD }),
    });
    expect(forgedFromPage.status).toBe(403);
    expect(await balance()).toBe(before + 10);
  });

  it('a stolen cookie is worthless after sign-out', async () => {
    const victim = await signedIn(t, 'support@example.com');
    secrets.add(victim.cookie.split('=')[1]!).add(victim.csrf);
    const stolen = { ...victim };
    await fetch(`${t.url}/admin/session`, { method: 'DELETE', headers: { cookie: victim.cookie } });
    const res = await staffGraphql(t, stolen, ADD);
    expect(res.status).toBe(401);
    expect(res.body.errors[0].extensions.code).toBe('unauthorized');
    expect((await whoAmI(t, stolen.cookie)).status).toBe(401);
  });

  it('a removed member\'s open session is refused at once', async () => {
    const leaving = await member(t, shopId, 'leaving@example.com', 'support');
    secrets.add(leaving.cookie.split('=')[1]!).add(leaving.csrf);
    expect((await staffGraphql(t, leaving, `{ shop { id } }`)).status).toBe(200);
    const removed = await staffGraphql(t, owner, `mutation($input: StaffMemberInput!) { staffRemove(input: $input) { deletedStaffId userErrors { code } } }`, {
      input: { staffId: leaving.body.staff.id },
    });
    expect(removed.body.data.staffRemove).toEqual({ deletedStaffId: leaving.body.staff.id, userErrors: [] });
    const before = await balance();
    const after = await staffGraphql(t, leaving, ADD);
    expect(after.status).toBe(401);
    expect(await balance()).toBe(before);
    const signInAgain = await signIn(t, 'leaving@example.com');
    expect(signInAgain.status).toBe(401);
    expect((await signInAgain.json()).error).toBe('invalid_credentials');
  });
});

describe('brute force', () => {
  it('per account: after 3 failures even the right password is 429 with Retry-After, until the window ends', async () => {
    await member(t, shopId, 'target@example.com', 'viewer');
    for (let i = 0; i < 3; i++) expect((await signIn(t, 'target@example.com', `guess ${i} guess`)).status).toBe(401);
    const blocked = await signIn(t, 'target@example.com');
    expect(blocked.status).toBe(429);
    expect(Number(blocked.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await blocked.json()).error).toBe('rate_limited');
    // Another account from the same IP is not this account's lock.
    expect((await signIn(t, 'owner@example.com')).status).toBe(200);
    await sleep(WINDOW_SECONDS * 1000 + 200);
    expect((await signIn(t, 'target@example.com')).status).toBe(200);
  });

  it('per IP: failures spread over many accounts (unknown ones too) lock the IP out for every account', async () => {
    await sleep(WINDOW_SECONDS * 1000 + 200);
    for (let i = 0; i < 8; i++) expect((await signIn(t, `spray${i}@example.com`, 'Password123!')).status).toBe(401);
    const blocked = await signIn(t, 'owner@example.com');
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).toBeTruthy();
    await sleep(WINDOW_SECONDS * 1000 + 200);
    expect((await signIn(t, 'owner@example.com')).status).toBe(200);
  });

  it('guessing invite and reset tokens is limited per IP the same way', async () => {
    await sleep(WINDOW_SECONDS * 1000 + 200);
    const guess = (i: number) => `si_${String(i).padStart(43, 'a')}`;
    for (let i = 0; i < 4; i++) expect((await jsonPost(t, '/admin/invites/accept', { token: guess(i), name: 'x', password: PASSWORD })).status).toBe(401);
    for (let i = 0; i < 4; i++) expect((await jsonPost(t, '/admin/password-reset', { token: guess(i).replace('si_', 'sr_'), password: PASSWORD })).status).toBe(401);
    const blocked = await jsonPost(t, '/admin/invites/accept', { token: guess(9), name: 'x', password: PASSWORD });
    expect(blocked.status).toBe(429);
    expect(blocked.headers.get('retry-after')).toBeTruthy();
    await sleep(WINDOW_SECONDS * 1000 + 200);
  });
});

describe('secrets', () => {
  it('no password, session token, CSRF token or link token appears in a log line or a listing', async () => {
    const invite = await staffGraphql(t, owner, `mutation { staffInvite(input: { email: "new@example.com", role: viewer }) { link } }`);
    const token = new URL(invite.body.data.staffInvite.link).hash.replace('#token=', '');
    secrets.add(token);
    const accepted = await jsonPost(t, '/admin/invites/accept', { token, name: 'New', password: 'new person password' });
    secrets.add('new person password').add(cookieOf(accepted).split('=')[1]!);
    const changed = await staffGraphql(t, owner, `mutation { staffPasswordChange(input: { currentPassword: "${PASSWORD}", newPassword: "owner's next password" }) { changed } }`);
    expect(changed.body.data.staffPasswordChange.changed).toBe(true);
    expect(accepted.status).toBe(200);
    secrets.add("owner's next password");
    const listing = await staffGraphql(t, owner, `{ staffMembers { id email name role createdAt } }`);
    const listed = JSON.stringify(listing.body);
    expect(listing.body.data.staffMembers.length).toBeGreaterThanOrEqual(4);
    expect(listed).not.toContain('$argon2');

    const logged = lines.join('');
    expect(logged).toContain('/admin/session');
    for (const secret of secrets) {
      expect(listed).not.toContain(secret);
      expect(logged, `a secret in the logs`).not.toContain(secret);
    }
  });
});

describe('idempotency', () => {
  it('a person\'s Idempotency-Key is theirs: another person with the same key and body runs their own request', async () => {
    const viewer = await member(t, shopId, 'idem-viewer@example.com', 'viewer');
    secrets.add(viewer.cookie.split('=')[1]!).add(viewer.csrf);
    const send = (client: StaffClient) =>
      fetch(`${t.url}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', cookie: client.cookie, 'x-csrf-token': client.csrf, 'idempotency-key': 'same-key-1' },
        body: JSON.stringify({ query: `{ staffMembers { email } }` }),
      });
    const first = await send(owner);
    expect(first.status).toBe(200);
    expect((await first.json()).data.staffMembers.length).toBeGreaterThan(0);
    // Not the owner's stored answer: the viewer's own request, which its role refuses.
    const second = await send(viewer);
    expect(second.headers.get('idempotent-replayed')).toBeNull();
    expect(second.status).toBe(403);
    // The owner's own repeat is replayed.
    const again = await send(owner);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
  });
});

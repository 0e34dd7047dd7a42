import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createShop } from '../src/domain/shops/index.js';
import { purgeExpiredStaffRecords } from '../src/domain/staff/index.js';
import { cliDatabase, movableClock, runCli, startTestApp, type TestApp } from './helpers.js';
import { cookieOf, jsonPost, member, PASSWORD, signedIn, signIn, staffGraphql, whoAmI } from './staff-helpers.js';

const HOUR = 60 * 60 * 1000;
const clock = movableClock();
let t: TestApp;
let shopId: string;
let owner: Awaited<ReturnType<typeof member>>;

beforeAll(async () => {
  t = await startTestApp({}, { clock: clock.now });
  ({ shopId } = await t.shop('Staff shop'));
  owner = await member(t, shopId, 'Owner@Example.com', 'owner');
});
afterAll(() => t?.stop());

const INVITE = `mutation($input: StaffInviteInput!) { staffInvite(input: $input) { link expiresAt userErrors { code field message } } }`;
const RESET = `mutation($input: StaffMemberInput!) { staffPasswordResetLink(input: $input) { link expiresAt userErrors { code } } }`;
const MEMBERS = `{ staffMembers { id email name role createdAt } }`;
const tokenOf = (link: string) => new URL(link).hash.replace('#token=', '');

describe('accounts and sessions', () => {
  it('an accepted invite makes the account, its membership and a session, in a cookie a script cannot read', async () => {
    const me = await whoAmI(t, owner.cookie);
    expect(me.status).toBe(200);
    expect(me.body.staff).toMatchObject({ email: 'owner@example.com', name: 'Owner', role: 'owner' });
    expect(me.body.shop).toEqual({ id: shopId, name: 'Staff shop' });
    expect(me.body.csrfToken).toBe(owner.csrf);

    const res = await signIn(t, 'owner@example.com');
    const set = res.headers.get('set-cookie')!;
    expect(set).toMatch(/^staff_session=ss_[A-Za-z0-9]{43}; /);
    expect(set).toContain('HttpOnly');
    expect(set).toContain('SameSite=Strict');
    expect(set).toContain('Path=/');
    // Served over http (no https PUBLIC_URL): a Secure cookie would never come back.
    expect(set).not.toContain('Secure');
    expect(res.headers.get('cache-control')).toBe('no-store');
  });

  it('the cookie is Secure when PUBLIC_URL is https', async () => {
    const secure = await startTestApp({ PUBLIC_URL: 'https://loyalty.example.com' });
    try {
      const { shopId: id } = await secure.shop();
      const client = await member(secure, id, 'secure@example.com', 'viewer');
      expect(client.body.staff.role).toBe('viewer');
      const res = await signIn(secure, 'secure@example.com');
      expect(res.headers.get('set-cookie')).toContain('; Secure');
    } finally {
      await secure.stop();
    }
  });

  it('signs in with e-mail (any case) and password, refuses a wrong one the same way as an unknown e-mail, and signs out', async () => {
    const client = await signedIn(t, 'OWNER@example.com');
    expect(client.body.staff.role).toBe('owner');
    const wrong = await signIn(t, 'owner@example.com', 'not the password');
    const unknown = await signIn(t, 'nobody@example.com', PASSWORD);
    expect(wrong.status).toBe(401);
    expect(unknown.status).toBe(401);
    const [a, b] = [await wrong.json(), await unknown.json()];
    expect(a).toEqual(b);
    expect(a.error).toBe('invalid_credentials');

    const out = await fetch(`${t.url}/admin/session`, { method: 'DELETE', headers: { cookie: client.cookie } });
    expect(out.status).toBe(200);
    expect(out.headers.get('set-cookie')).toContain('Max-Age=0');
    expect((await whoAmI(t, client.cookie)).status).toBe(401);
    // The owner's other session is untouched.
    expect((await whoAmI(t, owner.cookie)).status).toBe(200);
  });

  it('refuses malformed sign-in input with 400, never a 500', async () => {
    expect((await jsonPost(t, '/admin/session', { email: 5 })).status).toBe(400);
    expect((await jsonPost(t, '/admin/session', { email: 'a@b.c', password: 'x'.repeat(300) })).status).toBe(400);
    expect((await jsonPost(t, '/admin/invites/accept', { token: 'si_x', name: '', password: 'short' })).status).toBe(400);
  });

  it('an owner invites by a one-time link on the request\'s origin; it works once and not after 72 h', async () => {
    const made = await staffGraphql(t, owner, INVITE, { input: { email: 'viewer@example.com', role: 'viewer' } });
    expect(made.body.data.staffInvite.userErrors).toEqual([]);
    const link: string = made.body.data.staffInvite.link;
    expect(link).toMatch(new RegExp(`^${t.url}/admin/accept#token=si_[A-Za-z0-9]{43}$`));
    const accept = { token: tokenOf(link), name: 'Vi Ewer', password: PASSWORD };
    const first = await jsonPost(t, '/admin/invites/accept', accept);
    expect(first.status).toBe(200);
    expect((await first.json()).staff).toMatchObject({ email: 'viewer@example.com', name: 'Vi Ewer', role: 'viewer' });

    const again = await jsonPost(t, '/admin/invites/accept', accept);
    expect(again.status).toBe(401);
    expect((await again.json()).error).toBe('invalid_token');

    const late = await staffGraphql(t, owner, INVITE, { input: { email: 'late@example.com', role: 'support' } });
    clock.moveTo(new Date(Date.now() + 73 * HOUR));
    try {
      const expired = await jsonPost(t, '/admin/invites/accept', { token: tokenOf(late.body.data.staffInvite.link), name: 'Late', password: PASSWORD });
      expect(expired.status).toBe(401);
      expect((await expired.json()).error).toBe('invalid_token');
    } finally {
      clock.moveTo(new Date());
    }
    const members = (await staffGraphql(t, owner, MEMBERS)).body.data.staffMembers;
    expect(members.map((m: any) => [m.email, m.role])).toEqual([
      ['owner@example.com', 'owner'],
      ['viewer@example.com', 'viewer'],
    ]);
  });

  it('an invite for someone already in the shop is a userError; an existing account joins another shop with its own password', async () => {
    const dup = await staffGraphql(t, owner, INVITE, { input: { email: 'viewer@example.com', role: 'support' } });
    expect(dup.body.data.staffInvite).toMatchObject({ link: null, userErrors: [{ code: 'already_member', field: ['input', 'email'] }] });
    const bad = await staffGraphql(t, owner, INVITE, { input: { email: 'not an address', role: 'support' } });
    expect(bad.body.data.staffInvite.userErrors[0].code).toBe('validation_error');

    const { shop: other } = await createShop(t.app.database.db, 'Second shop');
    const otherOwner = await member(t, other.id, 'owner2@example.com', 'owner');
    const invite = await staffGraphql(t, otherOwner, INVITE, { input: { email: 'viewer@example.com', role: 'support' } });
    const token = tokenOf(invite.body.data.staffInvite.link);
    // Holding the link is not enough to take over the address's account.
    const takeover = await jsonPost(t, '/admin/invites/accept', { token, name: 'Mallory', password: 'mallory password' });
    expect(takeover.status).toBe(422);
    const joined = await jsonPost(t, '/admin/invites/accept', { token, name: 'ignored', password: PASSWORD });
    expect(joined.status).toBe(200);
    expect((await joined.json()).staff).toMatchObject({ name: 'Vi Ewer', role: 'support' });

    // Two shops: the sign-in asks which one, then opens a session there with that shop's role.
    const ask = await signIn(t, 'viewer@example.com');
    expect(ask.status).toBe(409);
    const choice = await ask.json();
    expect(choice.error).toBe('shop_required');
    expect(choice.shops.map((s: any) => s.id).sort()).toEqual([shopId, other.id].sort());
    const there = await signedIn(t, 'viewer@example.com', PASSWORD, { shopId: other.id });
    expect(there.body).toMatchObject({ shop: { id: other.id }, staff: { role: 'support' } });
    const here = await signedIn(t, 'viewer@example.com', PASSWORD, { shopId });
    expect(here.body.staff.role).toBe('viewer');
    const notMine = await signIn(t, 'owner2@example.com', PASSWORD, { shopId });
    expect(notMine.status).toBe(404);
  });

  it('a reset link sets a new password once, ends every session, and expires after an hour', async () => {
    const target = await member(t, shopId, 'forgetful@example.com', 'support');
    const id = target.body.staff.id;
    const made = await staffGraphql(t, owner, RESET, { input: { staffId: id } });
    const link: string = made.body.data.staffPasswordResetLink.link;
    expect(link).toMatch(/\/admin\/reset#token=sr_/);
    const token = tokenOf(link);
    expect((await jsonPost(t, '/admin/password-reset', { token, password: 'a brand new password' })).status).toBe(200);
    expect((await whoAmI(t, target.cookie)).status).toBe(401);
    expect((await signIn(t, 'forgetful@example.com', PASSWORD)).status).toBe(401);
    expect((await signIn(t, 'forgetful@example.com', 'a brand new password')).status).toBe(200);
    const twice = await jsonPost(t, '/admin/password-reset', { token, password: 'yet another password' });
    expect(twice.status).toBe(401);

    const later = await staffGraphql(t, owner, RESET, { input: { staffId: id } });
    clock.moveTo(new Date(Date.now() + 61 * 60 * 1000));
    try {
      const expired = await jsonPost(t, '/admin/password-reset', { token: tokenOf(later.body.data.staffPasswordResetLink.link), password: 'yet another password' });
      expect(expired.status).toBe(401);
    } finally {
      clock.moveTo(new Date());
    }
    const stranger = await staffGraphql(t, owner, RESET, { input: { staffId: 'ffffffffffffffffffffffff' } });
    expect(stranger.body.data.staffPasswordResetLink.userErrors).toEqual([{ code: 'staff_not_found' }]);
  });

  it('a password change needs the current one and ends the person\'s other sessions, not this one', async () => {
    await member(t, shopId, 'changer@example.com', 'viewer');
    const laptop = await signedIn(t, 'changer@example.com');
    const phone = await signedIn(t, 'changer@example.com');
    const CHANGE = `mutation($input: StaffPasswordChangeInput!) { staffPasswordChange(input: $input) { changed userErrors { code field } } }`;
    const wrong = await staffGraphql(t, laptop, CHANGE, { input: { currentPassword: 'guess', newPassword: 'another good password' } });
    expect(wrong.body.data.staffPasswordChange).toEqual({ changed: false, userErrors: [{ code: 'invalid_credentials', field: ['input', 'currentPassword'] }] });
    const short = await staffGraphql(t, laptop, CHANGE, { input: { currentPassword: PASSWORD, newPassword: 'short' } });
    expect(short.body.data.staffPasswordChange.userErrors[0]).toMatchObject({ code: 'validation_error', field: ['input', 'newPassword'] });
    const ok = await staffGraphql(t, laptop, CHANGE, { input: { currentPassword: PASSWORD, newPassword: 'another good password' } });
    expect(ok.body.data.staffPasswordChange).toEqual({ changed: true, userErrors: [] });
    expect((await whoAmI(t, laptop.cookie)).status).toBe(200);
    expect((await whoAmI(t, phone.cookie)).status).toBe(401);
    expect((await signIn(t, 'changer@example.com', 'another good password')).status).toBe(200);

    // An API key is a machine: it has no password to change.
    const { apiKey } = await t.shop();
    const byKey = await t.graphql(apiKey, CHANGE, { input: { currentPassword: PASSWORD, newPassword: 'another good password' } });
    expect(byKey.data.staffPasswordChange.userErrors[0].code).toBe('staff_session_required');
  });

  it('the last owner can be neither removed nor demoted; another owner can', async () => {
    const members = (await staffGraphql(t, owner, MEMBERS)).body.data.staffMembers;
    const ownerId = members.find((m: any) => m.email === 'owner@example.com').id;
    const ROLE = `mutation($input: StaffRoleUpdateInput!) { staffRoleUpdate(input: $input) { member { role } userErrors { code } } }`;
    const REMOVE = `mutation($input: StaffMemberInput!) { staffRemove(input: $input) { deletedStaffId userErrors { code } } }`;
    expect((await staffGraphql(t, owner, ROLE, { input: { staffId: ownerId, role: 'viewer' } })).body.data.staffRoleUpdate.userErrors).toEqual([{ code: 'last_owner' }]);
    expect((await staffGraphql(t, owner, REMOVE, { input: { staffId: ownerId } })).body.data.staffRemove.userErrors).toEqual([{ code: 'last_owner' }]);

    const second = await member(t, shopId, 'co-owner@example.com', 'owner');
    const demoted = await staffGraphql(t, second, ROLE, { input: { staffId: ownerId, role: 'program_manager' } });
    expect(demoted.body.data.staffRoleUpdate).toEqual({ member: { role: 'program_manager' }, userErrors: [] });
    // The role is read at each request: the demoted owner's open session has the new role at once.
    expect((await whoAmI(t, owner.cookie)).body.staff.role).toBe('program_manager');
    const back = await staffGraphql(t, second, ROLE, { input: { staffId: ownerId, role: 'owner' } });
    expect(back.body.data.staffRoleUpdate.member.role).toBe('owner');
  });

  it('two owners demoting each other at once leave one owner', async () => {
    const { shop: duo } = await createShop(t.app.database.db, 'Duo shop');
    const a = await member(t, duo.id, 'a@duo.example', 'owner');
    const b = await member(t, duo.id, 'b@duo.example', 'owner');
    const ROLE = `mutation($input: StaffRoleUpdateInput!) { staffRoleUpdate(input: $input) { member { role } userErrors { code } } }`;
    const answers = await Promise.all([
      staffGraphql(t, a, ROLE, { input: { staffId: b.body.staff.id, role: 'viewer' } }),
      staffGraphql(t, b, ROLE, { input: { staffId: a.body.staff.id, role: 'viewer' } }),
    ]);
    // The loser is refused by the last-owner rule (both checked at once) or, when its request came
    // after the winner's commit, by its role, already viewer.
    const outcomes = answers.map((r) => r.body.errors?.[0]?.extensions.code ?? (r.body.data.staffRoleUpdate.userErrors[0]?.code || 'done')).sort();
    expect([['done', 'last_owner'], ['done', 'forbidden']]).toContainEqual(outcomes);
    const owners = await t.app.database.db.selectFrom('staff_memberships').select('staff_id').where('shop_id', '=', duo.id).where('role', '=', 'owner').execute();
    expect(owners).toHaveLength(1);
  });

  it('sessions end after 12 idle hours, and 7 days after sign-in however busy', async () => {
    const idle = await signedIn(t, 'owner@example.com');
    const busy = await signedIn(t, 'owner@example.com');
    const start = Date.now();
    try {
      for (let h = 11; h < 7 * 24; h += 11) {
        clock.moveTo(new Date(start + h * HOUR));
        expect((await whoAmI(t, busy.cookie)).status, `after ${h} h`).toBe(200);
      }
      expect((await whoAmI(t, idle.cookie)).status).toBe(401);
      clock.moveTo(new Date(start + 7 * 24 * HOUR + 1000));
      expect((await whoAmI(t, busy.cookie)).status).toBe(401);
    } finally {
      clock.moveTo(new Date());
    }
  });
});

describe('the first owner', () => {
  it('`staff invite-owner` prints a one-time link (no password on the command line) that the server accepts', async () => {
    const database = await cliDatabase('loyalty-staff-cli-');
    try {
      const run = (args: string[]) => runCli([...args, '--json'], { ...database.env, PUBLIC_URL: 'https://loyalty.example.com' });
      const created = await run(['shop', 'create', '--name', 'CLI shop']);
      expect(created.code, created.stderr).toBe(0);
      const { shopId: id } = JSON.parse(created.stdout);
      const invited = await run(['staff', 'invite-owner', '--shop', 'CLI shop', '--email', 'first@example.com']);
      expect(invited.code, invited.stderr).toBe(0);
      const out = JSON.parse(invited.stdout);
      expect(out).toMatchObject({ shopId: id, email: 'first@example.com' });
      expect(out.link).toMatch(/^https:\/\/loyalty\.example\.com\/admin\/accept#token=si_/);

      const server = await startTestApp(database.env);
      try {
        const res = await jsonPost(server, '/admin/invites/accept', { token: tokenOf(out.link), name: 'First', password: PASSWORD });
        expect(res.status).toBe(200);
        expect((await res.json()).staff.role).toBe('owner');
        expect(cookieOf(res)).toMatch(/^staff_session=/);
      } finally {
        await server.stop();
      }
    } finally {
      await database.drop();
    }
  });
});

describe('retention', () => {
  it('purges sessions past their age and links past their end, and nothing live', async () => {
    const db = t.app.database.db;
    const live = await signedIn(t, 'owner@example.com');
    const invite = await staffGraphql(t, live, INVITE, { input: { email: 'purge@example.com', role: 'viewer' } });
    expect(invite.body.data.staffInvite.userErrors).toEqual([]);
    const count = async () => ({
      sessions: Number((await db.selectFrom('staff_sessions').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n),
      links: Number((await db.selectFrom('staff_link_tokens').select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n),
    });
    const before = await count();
    expect(await purgeExpiredStaffRecords(db, new Date(), { batchSize: 2 })).toBe(0);
    expect(await count()).toEqual(before);
    // Eight days on, every session and link made by these tests is past its end.
    expect(await purgeExpiredStaffRecords(db, new Date(Date.now() + 8 * 24 * HOUR), { batchSize: 2 })).toBe(before.sessions + before.links);
    expect(await count()).toEqual({ sessions: 0, links: 0 });
    expect((await whoAmI(t, live.cookie)).status).toBe(401);
  });
});

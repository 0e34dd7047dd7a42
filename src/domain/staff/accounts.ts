import { z } from 'zod';
import type { DB } from '../../db/database.js';
import type { Queryable, Trx } from '../../db/transaction.js';
import { type Actor, recordAudit, staffActor } from '../audit/index.js';
import { NotFoundError, parseInput, RuleViolationError, UnauthenticatedError } from '../kernel/index.js';
import type { Shop } from '../shops/index.js';
import { checkPassword, hashPassword, passwordSchema } from './passwords.js';
import { STAFF_ROLES, type StaffRole } from './roles.js';
import { createSession, endSessionsOf, type NewSession, type StaffSession } from './sessions.js';

export type StaffMember = { staffId: string; email: string; name: string; role: StaffRole; createdAt: Date };

export const emailSchema = z.email().max(254).transform((e) => e.toLowerCase());
export const roleSchema = z.enum(STAFF_ROLES as [StaffRole, ...StaffRole[]]);

const signInSchema = z.strictObject({
  email: z.string().max(254).transform((e) => e.trim().toLowerCase()),
  password: z.string().max(256),
  shopId: z.string().max(64).optional(),
});

export type SignInResult = { kind: 'signed_in'; session: NewSession; shopId: string } | { kind: 'shop_required'; shops: Shop[] };

/** The e-mail (lower-cased) a sign-in names, for counting its failures before the slow check. */
export function signInEmail(input: unknown): string | null {
  const email = (input as { email?: unknown } | null)?.email;
  return typeof email === 'string' ? email.trim().toLowerCase() : null;
}

const invalidCredentials = () => new UnauthenticatedError('invalid_credentials', 'the e-mail or the password is wrong');

/**
 * Checks the password and, when the person works for one shop or names one of theirs, opens a
 * session there. Wrong e-mail and wrong password are one answer, in the same time.
 */
export async function signIn(db: DB, input: unknown, now: Date): Promise<SignInResult> {
  const { email, password, shopId } = parseInput(signInSchema, input);
  const account = await db.selectFrom('staff_accounts').select(['id', 'password_hash']).where('email', '=', email).executeTakeFirst();
  if (!(await checkPassword(account?.password_hash, password)) || !account) throw invalidCredentials();
  const shops = await shopsOf(db, account.id);
  const chosen = shopId === undefined && shops.length === 1 ? shops[0] : shops.find((s) => s.id === shopId);
  if (!chosen) {
    // Removed from every shop: the same answer as a wrong password, which tells nothing of the password.
    if (shops.length === 0) throw invalidCredentials();
    if (shopId !== undefined) throw new NotFoundError('shop_not_found', `you are not a member of shop ${shopId}`, ['shopId']);
    return { kind: 'shop_required', shops };
  }
  return { kind: 'signed_in', session: await createSession(db, account.id, chosen.id, now), shopId: chosen.id };
}

async function shopsOf(db: Queryable, staffId: string): Promise<Shop[]> {
  const rows = await db
    .selectFrom('staff_memberships as m')
    .innerJoin('shops', 'shops.id', 'm.shop_id')
    .select(['shops.id', 'shops.name', 'shops.created_at'])
    .where('m.staff_id', '=', staffId)
    .orderBy('shops.name')
    .execute();
  return rows.map((r) => ({ id: r.id, name: r.name, createdAt: r.created_at }));
}

/** The shop's people, owners first, then by e-mail. Never their password hashes. */
export async function listStaff(db: Queryable, shopId: string): Promise<StaffMember[]> {
  const rows = await db
    .selectFrom('staff_memberships as m')
    .innerJoin('staff_accounts as a', 'a.id', 'm.staff_id')
    .select(['a.id', 'a.email', 'a.name', 'm.role', 'm.created_at'])
    .where('m.shop_id', '=', shopId)
    .orderBy('a.email')
    .execute();
  const members = rows.map((r) => ({ staffId: r.id, email: r.email, name: r.name, role: r.role, createdAt: r.created_at }));
  return members.sort((a, b) => STAFF_ROLES.indexOf(b.role) - STAFF_ROLES.indexOf(a.role));
}

const memberSchema = z.strictObject({ staffId: z.string().max(64) });
const roleUpdateSchema = z.strictObject({ staffId: z.string().max(64), role: roleSchema });

/**
 * Locks the shop's memberships (so two owners demoting each other at once cannot leave none) and
 * returns the one of `staffId` and how many owners there are.
 */
async function lockMembers(trx: Trx, shopId: string, staffId: string) {
  const rows = await trx.selectFrom('staff_memberships').select(['staff_id', 'role']).where('shop_id', '=', shopId).forUpdate().execute();
  const member = rows.find((r) => r.staff_id === staffId);
  if (!member) throw new NotFoundError('staff_not_found', `no staff member ${staffId} in this shop`, ['staffId']);
  return { member, owners: rows.filter((r) => r.role === 'owner').length };
}

async function emailOf(trx: Trx, staffId: string): Promise<string> {
  return (await trx.selectFrom('staff_accounts').select('email').where('id', '=', staffId).executeTakeFirstOrThrow()).email;
}

const lastOwner = () => new RuleViolationError('last_owner', 'the shop\'s last owner cannot be removed or demoted: make someone else owner first', ['staffId']);

/** A new role, effective from the member's next request (sessions read the role each time). */
export async function updateStaffRole(db: DB, shopId: string, input: unknown, actor?: Actor): Promise<StaffMember> {
  const { staffId, role } = parseInput(roleUpdateSchema, input);
  await db.transaction().execute(async (trx) => {
    const { member, owners } = await lockMembers(trx, shopId, staffId);
    if (member.role === 'owner' && role !== 'owner' && owners === 1) throw lastOwner();
    await trx.updateTable('staff_memberships').set({ role }).where('shop_id', '=', shopId).where('staff_id', '=', staffId).execute();
    await recordAudit(trx, shopId, actor, { kind: 'staff.roleUpdate', subject: { type: 'staff', id: staffId }, before: { email: await emailOf(trx, staffId), role: member.role }, after: { role } });
  });
  return (await listStaff(db, shopId)).find((m) => m.staffId === staffId)!;
}

/** Removes a person from the shop; their sessions in it end with the membership (foreign key), at once. */
export async function removeStaff(db: DB, shopId: string, input: unknown, actor?: Actor): Promise<string> {
  const { staffId } = parseInput(memberSchema, input);
  await db.transaction().execute(async (trx) => {
    const { member, owners } = await lockMembers(trx, shopId, staffId);
    if (member.role === 'owner' && owners === 1) throw lastOwner();
    await trx.deleteFrom('staff_memberships').where('shop_id', '=', shopId).where('staff_id', '=', staffId).execute();
    await recordAudit(trx, shopId, actor, { kind: 'staff.remove', subject: { type: 'staff', id: staffId }, before: { email: await emailOf(trx, staffId), role: member.role } });
  });
  return staffId;
}

/** A member of the shop, or NotFound: an owner acts on their own shop's people only. */
export async function staffMemberOf(db: Queryable, shopId: string, input: unknown): Promise<string> {
  const { staffId } = parseInput(memberSchema, input);
  const row = await db.selectFrom('staff_memberships').select('staff_id').where('shop_id', '=', shopId).where('staff_id', '=', staffId).executeTakeFirst();
  if (!row) throw new NotFoundError('staff_not_found', `no staff member ${staffId} in this shop`, ['staffId']);
  return row.staff_id;
}

const passwordChangeSchema = z.strictObject({ currentPassword: z.string().max(256), newPassword: passwordSchema });

/**
 * One's own password, the current one required; every other session of the person ends. Recorded
 * in the log of the shop the session is signed in to, without the password.
 */
export async function changeStaffPassword(db: DB, session: StaffSession, input: unknown, now: Date): Promise<void> {
  const { currentPassword, newPassword } = parseInput(passwordChangeSchema, input);
  const { staffId, sessionId } = session;
  const account = await db.selectFrom('staff_accounts').select('password_hash').where('id', '=', staffId).executeTakeFirstOrThrow();
  if (!(await checkPassword(account.password_hash, currentPassword))) {
    throw new RuleViolationError('invalid_credentials', 'the current password is wrong', ['currentPassword']);
  }
  const passwordHash = await hashPassword(newPassword);
  await db.transaction().execute(async (trx) => {
    await storePassword(trx, staffId, passwordHash, now, sessionId);
    await recordAudit(trx, session.shop.id, staffActor(session), { kind: 'staff.passwordChange', subject: { type: 'staff', id: staffId }, after: { changedAt: now } }, now);
  });
}

/** A new password hash, and the person's sessions end (all but `keep`): call it in a transaction. */
export async function storePassword(trx: Trx, staffId: string, passwordHash: string, now: Date, keep?: string): Promise<void> {
  await trx.updateTable('staff_accounts').set({ password_hash: passwordHash, password_changed_at: now }).where('id', '=', staffId).execute();
  await endSessionsOf(trx, staffId, keep);
}

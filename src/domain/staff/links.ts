import { z } from 'zod';
import type { DB } from '../../db/database.js';
import type { Trx } from '../../db/transaction.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { ConflictError, newId, parseInput, randomString, RuleViolationError, sha256, UnauthenticatedError } from '../kernel/index.js';
import { getShop } from '../shops/index.js';
import { emailSchema, roleSchema, staffMemberOf, storePassword } from './accounts.js';
import { checkPassword, hashPassword, passwordSchema } from './passwords.js';
import type { StaffRole } from './roles.js';
import { createSession, type NewSession } from './sessions.js';

export const INVITE_TTL_MS = 72 * 60 * 60 * 1000;
export const RESET_TTL_MS = 60 * 60 * 1000;

const ALNUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const LINK_TOKEN = /^s[ir]_[A-Za-z0-9]{43}$/;

export type StaffLink = { token: string; expiresAt: Date };

/**
 * The page a link opens: the token rides in the fragment, which browsers never send to a server,
 * so it stays out of access logs and Referer headers; the page posts it.
 */
export function staffLinkUrl(base: string, kind: 'invite' | 'reset', link: StaffLink): string {
  return `${base.replace(/\/+$/, '')}/admin/${kind === 'invite' ? 'accept' : 'reset'}#token=${link.token}`;
}

const inviteSchema = z.strictObject({ email: emailSchema, role: roleSchema });

/** A one-time link that makes `email` a member of the shop with `role`, once, for 72 hours. */
export async function createStaffInvite(db: DB, shopId: string, input: unknown, now: Date, actor?: Actor): Promise<StaffLink> {
  const { email, role } = parseInput(inviteSchema, input);
  await getShop(db, shopId);
  const member = await db
    .selectFrom('staff_memberships as m')
    .innerJoin('staff_accounts as a', 'a.id', 'm.staff_id')
    .select('a.id')
    .where('m.shop_id', '=', shopId)
    .where('a.email', '=', email)
    .executeTakeFirst();
  if (member) throw new ConflictError('already_member', `${email} is already a member of this shop`, ['email']);
  const expiresAt = new Date(now.getTime() + INVITE_TTL_MS);
  return db.transaction().execute(async (trx) => {
    const link = await insertLink(trx, { kind: 'invite', shop_id: shopId, email, role, staff_id: null }, expiresAt);
    await recordAudit(trx, shopId, actor, { kind: 'staff.invite', subject: { type: 'invite', id: email }, after: { email, role, expiresAt } }, now);
    return link;
  });
}

/** A one-time link, for an hour, that sets a new password for one of the shop's people. */
export async function createStaffPasswordReset(db: DB, shopId: string, input: unknown, now: Date, actor?: Actor): Promise<StaffLink> {
  const staffId = await staffMemberOf(db, shopId, input);
  const expiresAt = new Date(now.getTime() + RESET_TTL_MS);
  return db.transaction().execute(async (trx) => {
    const link = await insertLink(trx, { kind: 'reset', shop_id: shopId, email: null, role: null, staff_id: staffId }, expiresAt);
    await recordAudit(trx, shopId, actor, { kind: 'staff.passwordResetLink', subject: { type: 'staff', id: staffId }, after: { expiresAt } }, now);
    return link;
  });
}

type LinkRow = { kind: 'invite' | 'reset'; shop_id: string; email: string | null; role: StaffRole | null; staff_id: string | null };

async function insertLink(db: Trx, row: LinkRow, expiresAt: Date): Promise<StaffLink> {
  const token = `${row.kind === 'invite' ? 'si' : 'sr'}_${randomString(43, ALNUM)}`;
  await db.insertInto('staff_link_tokens').values({ id: newId(), token_hash: sha256(token).toString('hex'), ...row, expires_at: expiresAt }).execute();
  return { token, expiresAt };
}

const invalidLink = () => new UnauthenticatedError('invalid_token', 'this link is unknown, used already or expired: ask the shop\'s owner for a new one');

/** Takes a link's token once, under its row's lock: a second use (even a concurrent one) is refused. */
async function takeLink(trx: Trx, kind: 'invite' | 'reset', token: string, now: Date) {
  if (!LINK_TOKEN.test(token)) throw invalidLink();
  const row = await trx
    .selectFrom('staff_link_tokens')
    .selectAll()
    .where('token_hash', '=', sha256(token).toString('hex'))
    .where('kind', '=', kind)
    .forUpdate()
    .executeTakeFirst();
  if (!row || row.used_at !== null || row.expires_at.getTime() <= now.getTime()) throw invalidLink();
  await trx.updateTable('staff_link_tokens').set({ used_at: now }).where('id', '=', row.id).execute();
  return row;
}

const acceptSchema = z.strictObject({ token: z.string().max(64), name: z.string().trim().min(1).max(200), password: passwordSchema });

/**
 * Accepts an invite: makes the account (or, when the e-mail has one, checks its password and keeps
 * its name), the membership with the invite's role, and a session in that shop.
 */
export async function acceptStaffInvite(db: DB, input: unknown, now: Date): Promise<NewSession & { shopId: string }> {
  const { token, name, password } = parseInput(acceptSchema, input);
  const passwordHash = await hashPassword(password);
  return db.transaction().execute(async (trx) => {
    const link = await takeLink(trx, 'invite', token, now);
    const email = link.email!;
    const existing = await trx.selectFrom('staff_accounts').select(['id', 'password_hash']).where('email', '=', email).executeTakeFirst();
    let staffId = existing?.id;
    if (existing) {
      // Someone holding the link must not take over the account that already has this address.
      if (!(await checkPassword(existing.password_hash, password))) {
        throw new RuleViolationError('invalid_credentials', `${email} has an account already: give its password to join this shop`, ['password']);
      }
    } else {
      staffId = newId();
      await trx.insertInto('staff_accounts').values({ id: staffId, email, name, password_hash: passwordHash }).execute();
    }
    const added = await trx
      .insertInto('staff_memberships')
      .values({ shop_id: link.shop_id, staff_id: staffId!, role: link.role! })
      .onConflict((oc) => oc.columns(['shop_id', 'staff_id']).doNothing())
      .returning('staff_id')
      .executeTakeFirst();
    if (!added) throw new ConflictError('already_member', `${email} is already a member of this shop`);
    return { ...(await createSession(trx, staffId!, link.shop_id, now)), shopId: link.shop_id };
  });
}

const resetSchema = z.strictObject({ token: z.string().max(64), password: passwordSchema });

/** Uses a reset link: the new password, and every session of the person ends. */
export async function resetStaffPassword(db: DB, input: unknown, now: Date): Promise<void> {
  const { token, password } = parseInput(resetSchema, input);
  const passwordHash = await hashPassword(password);
  await db.transaction().execute(async (trx) => storePassword(trx, (await takeLink(trx, 'reset', token, now)).staff_id!, passwordHash, now));
}

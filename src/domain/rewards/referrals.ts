import { sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../../db/database.js';
import { inTransaction, type Queryable, type Trx } from '../../db/transaction.js';
import { type Customer, customerIdentifierSchema, customerInputSchema, type CustomerKey, customerPageQuerySchema, findCustomer, getCustomer, lockCustomer, toCustomer } from '../customers/index.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { ConflictError, newId, NotFoundError, type Page, type PageArgs, pageBySeq, pageOfKeys, pagesBySeq, parseInput, randomString, READABLE_ALPHABET, recordEvent, RuleViolationError, type SeqList } from '../kernel/index.js';
import { applyBalanceChange, nextBalance } from '../ledger/index.js';
import { upsertCustomerIn } from '../program/index.js';
import { shopSettingsInputSchema, updateShopSettings } from '../settings/index.js';

/** Short enough to say over the phone, 31^8 ≈ 8.5·10^11 per shop. */
export const REFERRAL_CODE_LENGTH = 8;
const CODE_ATTEMPTS = 5;

/** The contract's referee record. */
export type Referee = {
  /** The referral record's id. */
  id: string;
  status: boolean;
  /** The code the referee signed up with. */
  referralCode: string;
  birthday: string | null;
  shopifyCustomerId: string;
  points: number;
  email: string;
  /** The referee's newest ledger entry, or when it became a customer if it has none. */
  latestActivity: Date;
  /** When the referral was recorded. */
  createdAt: Date;
  updatedAt: Date;
};

/** Points granted when a referee signs up; 0 grants nothing. */
export type ReferralSettings = { referrerPoints: number; refereePoints: number };

export const referralSettingsInputSchema = shopSettingsInputSchema.pick({ referrerPoints: true, refereePoints: true });

/** Codes are shown in capitals; accept them typed in any case. */
export const referralCodeSchema = z
  .string()
  .trim()
  .min(1)
  .max(64)
  .transform((s) => s.toUpperCase());

export const referralRegisterSchema = z.strictObject({
  referralCode: referralCodeSchema,
  customer: customerInputSchema,
});

/**
 * The customer's referral code, created on first request. Concurrent first requests meet on the
 * primary key (one code per customer): ON CONFLICT DO NOTHING waits for the winner, and the
 * re-read returns its code. A clash with another customer's code just draws a new one.
 */
async function ensureReferralCodeIn(trx: Trx, shopId: string, customer: Customer, actor?: Actor): Promise<string> {
  const existing = async () =>
    (await trx.selectFrom('referral_codes').select('code').where('customer_id', '=', customer._id).executeTakeFirst())?.code;
  const found = await existing();
  if (found) return found;
  for (let attempt = 0; attempt < CODE_ATTEMPTS; attempt++) {
    const inserted = await trx
      .insertInto('referral_codes')
      .values({ customer_id: customer._id, shop_id: shopId, code: randomString(REFERRAL_CODE_LENGTH, READABLE_ALPHABET) })
      .onConflict((oc) => oc.doNothing())
      .returningAll()
      .executeTakeFirst();
    if (inserted) {
      await recordEvent(trx, shopId, 'referrals/code_created', {
        referralCode: inserted.code,
        customer: customer._id,
        shopifyCustomerId: customer.shopifyCustomerId,
        email: customer.email,
        createdAt: inserted.created_at,
      });
      // Only a creation is a change: asking again for an existing code records nothing.
      await recordAudit(trx, shopId, actor, { kind: 'referralCode.create', subject: { type: 'customer', id: customer._id }, after: { referralCode: inserted.code } });
      return inserted.code;
    }
    const concurrent = await existing();
    if (concurrent) return concurrent;
  }
  throw new Error(`no free referral code after ${CODE_ATTEMPTS} attempts`);
}

export async function ensureReferralCode(db: DB, shopId: string, customer: Customer, actor?: Actor): Promise<string> {
  return inTransaction(db, (trx) => ensureReferralCodeIn(trx, shopId, customer, actor));
}

/**
 * The referral codes of many customers, in the order of `ids`; null for one that has none yet.
 * Read only: a code is created by a request that asks for it (GET /referral, referralCodeCreate).
 */
export async function referralCodesOf(db: DB, shopId: string, ids: readonly string[]): Promise<Array<string | null>> {
  if (ids.length === 0) return [];
  const rows = await db.selectFrom('referral_codes').select(['customer_id', 'code']).where('shop_id', '=', shopId).where('customer_id', 'in', ids).execute();
  const codes = new Map(rows.map((row) => [row.customer_id, row.code]));
  return ids.map((id) => codes.get(id) ?? null);
}

const referralCodeQuerySchema = z.object({ customerIdentifier: customerIdentifierSchema });

/**
 * The code of the customer `customerIdentifier` names, created (with its event) on first request:
 * GET /referral (the contract) and GraphQL referralCodeCreate.
 */
export async function getOrCreateReferralCode(db: DB, shopId: string, input: unknown, actor?: Actor): Promise<{ referralCode: string; customer: Customer }> {
  const { customerIdentifier } = parseInput(referralCodeQuerySchema, input);
  return referralCodeOf(db, shopId, customerIdentifier, actor);
}

/** The same for a customer named by a key (the storefront's token: its id). */
export async function referralCodeOf(db: DB, shopId: string, who: CustomerKey, actor?: Actor): Promise<{ referralCode: string; customer: Customer }> {
  const customer = toCustomer(await getCustomer(db, shopId, who));
  return { referralCode: await ensureReferralCode(db, shopId, customer, actor), customer };
}

/** GET /referral: the code of the customer the query's `customerIdentifier` names. */
export async function getReferralCode(db: DB, shopId: string, query: unknown, actor?: Actor): Promise<string> {
  return (await getOrCreateReferralCode(db, shopId, query, actor)).referralCode;
}

function refereesOf(db: Queryable, shopId: string) {
  return db
    .selectFrom('referrals as r')
    .innerJoin('customers as c', 'c.id', 'r.referee_id')
    .select((eb) => [
      'r.seq',
      'r.id',
      'r.status',
      'r.referral_code',
      'r.created_at',
      'r.updated_at',
      'c.birthday',
      'c.shopify_customer_id',
      'c.points',
      'c.email',
      'c.created_at as customer_created_at',
      eb
        .selectFrom('activities as a')
        .select('a.created_at')
        .whereRef('a.customer_id', '=', 'r.referee_id')
        .orderBy('a.seq', 'desc')
        .limit(1)
        .as('latest_activity'),
    ])
    .where('r.shop_id', '=', shopId);
}

type RefereeRow = Awaited<ReturnType<ReturnType<typeof refereesOf>['executeTakeFirstOrThrow']>>;

/** A referrer's referees, in the order they signed up. */
function refereeList(db: Queryable, shopId: string): SeqList<RefereeRow> {
  return {
    table: 'referrals',
    parent: 'referrer_id',
    rowsOf: (referrerId) => refereesOf(db, shopId).where('r.referrer_id', '=', referrerId),
    column: 'r.seq',
    direction: 'asc',
  };
}

/** listReferees for many referrers in one statement, in the order of `referrerIds`. */
export function listRefereesOfReferrers(db: Queryable, shopId: string, referrerIds: readonly string[], args: PageArgs): Promise<Array<Page<Referee>>> {
  return pagesBySeq(db, referrerIds, refereeList(db, shopId), args, toReferee);
}

function toReferee(row: RefereeRow): Referee {
  return {
    id: row.id,
    status: row.status,
    referralCode: row.referral_code,
    birthday: row.birthday,
    shopifyCustomerId: row.shopify_customer_id,
    points: row.points,
    email: row.email,
    latestActivity: row.latest_activity ?? row.customer_created_at,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** GET /referral/referee: one page of a referrer's referees, in the order they signed up. */
export async function pageReferees(db: DB, shopId: string, query: unknown): Promise<Referee[]> {
  const { customerIdentifier, ...page } = parseInput(customerPageQuerySchema, query);
  const referrer = await getCustomer(db, shopId, customerIdentifier);
  const keys = pageOfKeys(db.selectFrom('referrals').select('seq').where('referrer_id', '=', referrer.id).orderBy('seq'), page);
  const rows = await refereesOf(db, shopId)
    .where('r.referrer_id', '=', referrer.id)
    // A list of keys as an array: `in (subquery)` may become a join that reads every referee.
    .where(sql<boolean>`r.seq = any(array(${keys}))`)
    .orderBy('r.seq')
    .execute();
  return rows.map(toReferee);
}

/** A referrer's referees as a keyset-paged list, in the order they signed up. */
export function listReferees(db: Queryable, shopId: string, referrerId: string, args: PageArgs): Promise<Page<Referee>> {
  return pageBySeq(db, referrerId, refereeList(db, shopId), args, toReferee);
}

export async function getReferralSettings(db: Queryable, shopId: string): Promise<ReferralSettings> {
  const row = await db
    .selectFrom('shops')
    .select(['referral_referrer_points', 'referral_referee_points'])
    .where('id', '=', shopId)
    .executeTakeFirstOrThrow();
  return { referrerPoints: row.referral_referrer_points, refereePoints: row.referral_referee_points };
}

/** The referral part of updateShopSettings (GraphQL shopReferralSettingsUpdate). */
export async function updateReferralSettings(db: DB, shopId: string, input: unknown, actor?: Actor): Promise<{ referralSettings: ReferralSettings }> {
  const { settings } = await updateShopSettings(db, shopId, parseInput(referralSettingsInputSchema, input), new Date(), { actor, kind: 'referralSettings.update' });
  return { referralSettings: { referrerPoints: settings.referrerPoints, refereePoints: settings.refereePoints } };
}

type Referrer = { customerId: string; code: string };

function codeNotFound(code: string) {
  return new NotFoundError('referral_code_not_found', `no customer has referral code "${code}"`, ['referralCode']);
}

async function referrerByCode(trx: Trx, shopId: string, code: string): Promise<Referrer | undefined> {
  const row = await trx
    .selectFrom('referral_codes')
    .select(['customer_id', 'code'])
    .where('shop_id', '=', shopId)
    .where('code', '=', code.toUpperCase())
    .executeTakeFirst();
  return row && { customerId: row.customer_id, code: row.code };
}

/**
 * Records that the customer `refereeIdentifier` names was referred, grants the shop's rewards
 * and records the events, in the caller's transaction. The same referrer again is a no-op
 * (`created: false`); a self-referral or a second, different referrer is refused.
 */
async function linkRefereeIn(
  trx: Trx,
  shopId: string,
  refereeIdentifier: string,
  referrer: Referrer,
): Promise<{ referee: Referee; created: boolean }> {
  // The referee's row lock first, then the referrer's, both before the referral row is written:
  // its foreign keys take KEY SHARE locks, and upgrading one to FOR UPDATE afterwards would
  // deadlock two sign-ups with the same referrer.
  const refereeRow = await lockCustomer(trx, shopId, refereeIdentifier);
  if (refereeRow.id === referrer.customerId) {
    throw new RuleViolationError('self_referral', 'a customer cannot use their own referral code', ['referralCode']);
  }
  const referrerRow = await trx.selectFrom('customers').selectAll().where('id', '=', referrer.customerId).forUpdate().executeTakeFirstOrThrow();
  const now = new Date();
  const inserted = await trx
    .insertInto('referrals')
    .values({
      id: newId(),
      shop_id: shopId,
      referee_id: refereeRow.id,
      referrer_id: referrer.customerId,
      referral_code: referrer.code,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.column('referee_id').doNothing())
    .returning('id')
    .executeTakeFirst();
  const refereeOf = () => refereesOf(trx, shopId).where('r.referee_id', '=', refereeRow.id).executeTakeFirstOrThrow();
  if (!inserted) {
    const existing = await trx.selectFrom('referrals').select('referrer_id').where('referee_id', '=', refereeRow.id).executeTakeFirstOrThrow();
    if (existing.referrer_id !== referrer.customerId) {
      throw new ConflictError('already_referred', 'this customer was already referred by another customer', ['customer']);
    }
    return { referee: toReferee(await refereeOf()), created: false };
  }

  const settings = await getReferralSettings(trx, shopId);
  const rewards = [
    { row: referrerRow, points: settings.referrerPoints, description: `Referral reward: referred ${refereeRow.email}` },
    { row: refereeRow, points: settings.refereePoints, description: `Referral reward: signed up with code ${referrer.code}` },
  ];
  for (const { row, points, description } of rewards) {
    if (points <= 0) continue;
    // A reward raises the balance like /points/add does, so balance watchers hear points/added.
    nextBalance('add', row.points, points);
    await applyBalanceChange(trx, row, {
      op: 'add',
      amount: points,
      type: 'referral_reward',
      settingType: 'referral',
      description,
      note: null,
      topic: 'points/added',
    });
  }

  const referee = toReferee(await refereeOf());
  await recordEvent(trx, shopId, 'referrals/referee_created', { ...referee, customer: refereeRow.id, referrer: referrer.customerId });
  return { referee, created: true };
}

/**
 * GraphQL `referralRegister`: creates the referee (or updates the existing customer with that
 * shopifyCustomerId) and links it to the owner of `referralCode`, all in one transaction.
 */
export async function registerReferral(
  db: DB,
  shopId: string,
  input: unknown,
  actor?: Actor,
): Promise<{ referee: Referee; customer: Customer; referrer: Customer; created: boolean }> {
  const data = parseInput(referralRegisterSchema, input);
  return inTransaction(db, async (trx) => {
    const referrer = await referrerByCode(trx, shopId, data.referralCode);
    if (!referrer) throw codeNotFound(data.referralCode);
    await upsertCustomerIn(trx, shopId, data.customer);
    const { referee, created } = await linkRefereeIn(trx, shopId, data.customer.shopifyCustomerId, referrer);
    const customer = await getCustomer(trx, shopId, data.customer.shopifyCustomerId);
    const referrerRow = await trx.selectFrom('customers').selectAll().where('id', '=', referrer.customerId).executeTakeFirstOrThrow();
    if (created) await recordAudit(trx, shopId, actor, { kind: 'referral.register', subject: { type: 'customer', id: customer.id }, after: { referralCode: data.referralCode, referrer: referrer.customerId } });
    return { referee, customer: toCustomer(customer), referrer: toCustomer(referrerRow), created };
  });
}

/**
 * Links an existing customer to a referrer named by `referredBy`: a referral code, or the
 * referrer's shopifyCustomerId or e-mail (whose code is created if need be). The customers
 * import's `referredBy` column goes through here.
 */
export async function linkReferee(
  db: DB,
  shopId: string,
  refereeIdentifier: string,
  referredBy: string,
): Promise<{ referee: Referee; created: boolean }> {
  return inTransaction(db, async (trx) => {
    let referrer = await referrerByCode(trx, shopId, referredBy.trim());
    if (!referrer) {
      const row = await findCustomer(trx, shopId, referredBy.trim());
      if (!row) throw new NotFoundError('referrer_not_found', `no referral code or customer matches "${referredBy}"`, ['referredBy']);
      referrer = { customerId: row.id, code: await ensureReferralCodeIn(trx, shopId, toCustomer(row)) };
    }
    return linkRefereeIn(trx, shopId, refereeIdentifier, referrer);
  });
}

import { z } from 'zod';
import type { DB } from '../db/database.js';
import type { ActivityRow, CustomerRow } from '../db/schema.js';
import { inTransaction, type Queryable, type Trx } from '../db/transaction.js';
import { type Customer, customerIdentifierSchema, lockCustomer, toCustomer } from './customers.js';
import { RuleViolationError } from './errors.js';
import { type EventTopic, recordEvent } from './events.js';
import { newId } from './ids.js';
import { type Page, type PageArgs, pageBySeqDesc } from './pagination.js';
import { parseInput } from './validation.js';

export const ACTIVITY_TYPES = ['add_points', 'subtract_points', 'update_points', 'redeem_points', 'referral_reward'] as const;
export type ActivityType = (typeof ACTIVITY_TYPES)[number];

/** Where a change came from: a direct API call, a customers import, a redemption, a referral. */
export type SettingType = 'api' | 'import' | 'redemption' | 'referral';

/** The contract's activity record. */
export type Activity = {
  _id: string;
  type: ActivityType;
  settingType: SettingType;
  description: string | null;
  note: string | null;
  oldPoints: number;
  newPoints: number;
  customer: string;
  shop: string;
  createdAt: Date;
  updatedAt: Date;
};

export function toActivity(row: ActivityRow): Activity {
  return {
    _id: row.id,
    type: row.type as ActivityType,
    settingType: row.setting_type as SettingType,
    description: row.description,
    note: row.note,
    oldPoints: row.old_points,
    newPoints: row.new_points,
    customer: row.customer_id,
    shop: row.shop_id,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** One operation moves at most a billion points; a balance fits a GraphQL Int (2^31 - 1). */
export const MAX_AMOUNT = 1_000_000_000;
export const MAX_BALANCE = 2_147_483_647;

export type PointsOperation = 'add' | 'subtract' | 'set';

const OPERATIONS: Record<PointsOperation, { type: ActivityType; topic: EventTopic }> = {
  add: { type: 'add_points', topic: 'points/added' },
  subtract: { type: 'subtract_points', topic: 'points/subtracted' },
  // `update` sets an absolute balance, as BLOY documents.
  set: { type: 'update_points', topic: 'points/updated' },
};

const optionalText = z.string().max(1000).nullish();

const pointsChangeSchema = (minAmount: number) =>
  z.strictObject({
    customerIdentifier: customerIdentifierSchema,
    amount: z.number().int().min(minAmount).max(MAX_AMOUNT),
    description: optionalText,
    note: optionalText,
  });

export const pointsChangeSchemas = {
  add: pointsChangeSchema(1),
  subtract: pointsChangeSchema(1),
  set: pointsChangeSchema(0),
} satisfies Record<PointsOperation, z.ZodType>;

export function nextBalance(op: PointsOperation, balance: number, amount: number): number {
  if (op === 'set') return amount;
  if (op === 'subtract') {
    if (amount > balance) {
      throw new RuleViolationError(
        'insufficient_points',
        `the customer has ${balance} points; cannot subtract ${amount}`,
        ['amount'],
      );
    }
    return balance - amount;
  }
  if (balance + amount > MAX_BALANCE) {
    throw new RuleViolationError('points_limit_exceeded', `a balance cannot exceed ${MAX_BALANCE} points`, ['amount']);
  }
  return balance + amount;
}

/** Adds, subtracts or sets a customer's points: one transaction, one ledger entry, one event. */
export async function changePoints(
  db: DB,
  shopId: string,
  op: PointsOperation,
  input: unknown,
): Promise<{ activity: Activity; customer: Customer }> {
  const data = parseInput(pointsChangeSchemas[op], input);
  const { type, topic } = OPERATIONS[op];
  return inTransaction(db, async (trx) => {
    const customer = await lockCustomer(trx, shopId, data.customerIdentifier);
    return applyBalanceChange(trx, customer, {
      type,
      settingType: 'api',
      newPoints: nextBalance(op, customer.points, data.amount),
      description: data.description ?? null,
      note: data.note ?? null,
      topic,
    });
  });
}

export type BalanceChange = {
  type: ActivityType;
  settingType: SettingType;
  newPoints: number;
  description: string | null;
  note: string | null;
  /** The event to record with the activity as its data; omitted when the caller records its own. */
  topic?: EventTopic;
};

/**
 * Writes a new balance and its ledger entry. The caller holds the customer's row lock
 * (lockCustomer) in `trx`, so the entry's oldPoints is exactly the balance it replaced.
 */
export async function applyBalanceChange(
  trx: Trx,
  customer: CustomerRow,
  change: BalanceChange,
): Promise<{ activity: Activity; customer: Customer }> {
  const now = new Date();
  const updated = await trx
    .updateTable('customers')
    .set({ points: change.newPoints, updated_at: now })
    .where('id', '=', customer.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  const row = await trx
    .insertInto('activities')
    .values({
      id: newId(),
      shop_id: customer.shop_id,
      customer_id: customer.id,
      type: change.type,
      setting_type: change.settingType,
      description: change.description,
      note: change.note,
      old_points: customer.points,
      new_points: change.newPoints,
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  const activity = toActivity(row);
  if (change.topic) await recordEvent(trx, customer.shop_id, change.topic, activity);
  return { activity, customer: toCustomer(updated) };
}

/** A customer's ledger, newest first. */
export async function listActivities(
  db: Queryable,
  shopId: string,
  customerId: string,
  args: PageArgs,
): Promise<Page<Activity>> {
  const query = db
    .selectFrom('activities')
    .selectAll()
    .where('shop_id', '=', shopId)
    .where('customer_id', '=', customerId);
  return pageBySeqDesc(query, args, toActivity);
}

/**
 * The ledger entry an event reports, when the event moved a balance: points/* events carry the
 * activity itself, redemptions/created names its redeem_points activity. Null for other events.
 */
export function balanceChangeOf(event: { type: string; data: unknown }): { customerId: string; activityId: string } | null {
  const data = event.data as { _id?: unknown; customer?: unknown; activity?: unknown } | null;
  const activityId = event.type.startsWith('points/') ? data?._id : event.type === 'redemptions/created' ? data?.activity : undefined;
  return typeof activityId === 'string' && typeof data?.customer === 'string' ? { customerId: data.customer, activityId } : null;
}

export async function findActivity(db: Queryable, shopId: string, activityId: string): Promise<Activity | undefined> {
  const row = await db.selectFrom('activities').selectAll().where('shop_id', '=', shopId).where('id', '=', activityId).executeTakeFirst();
  return row ? toActivity(row) : undefined;
}

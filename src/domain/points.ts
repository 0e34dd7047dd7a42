import { type RawBuilder, sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../db/database.js';
import type { ActivityRow, CustomerRow } from '../db/schema.js';
import { inTransaction, type Queryable, type Trx } from '../db/transaction.js';
import { type Customer, customerIdentifierSchema, lockCustomer, matchesIdentifier, toCustomer } from './customers.js';
import { RuleViolationError } from './errors.js';
import { announceOutboxWrite, type EventTopic, newEventId } from './events.js';
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

/** Adds, subtracts or sets a customer's points: one ledger entry and one event, committed together. */
export async function changePoints(
  db: DB,
  shopId: string,
  op: PointsOperation,
  input: unknown,
): Promise<{ activity: Activity; customer: Customer }> {
  const data = parseInput(pointsChangeSchemas[op], input);
  const change: BalanceChange = {
    op,
    amount: data.amount,
    ...OPERATIONS[op],
    settingType: 'api',
    description: data.description ?? null,
    note: data.note ?? null,
  };
  const written = await writeBalanceChange(db, shopId, { identifier: data.customerIdentifier }, change);
  if (written) return written;
  // Nothing was written: there is no such customer, or the rule refused. Find out which under the
  // row lock; if the balance moved meanwhile so that the change is allowed now, make it under that lock.
  return inTransaction(db, async (trx) => {
    const customer = await lockCustomer(trx, shopId, data.customerIdentifier);
    nextBalance(op, customer.points, data.amount);
    return applyBalanceChange(trx, customer, change);
  });
}

export type BalanceChange = {
  op: PointsOperation;
  amount: number;
  type: ActivityType;
  settingType: SettingType;
  description: string | null;
  note: string | null;
  /** The event to record with the activity as its data; omitted when the caller records its own. */
  topic?: EventTopic;
};

/** The customer a balance change is for: as an API caller names them, or by our id. */
type Target = { identifier: string } | { customerId: string };

/** The new balance and the condition that allows it, in SQL over the locked row `t`; nextBalance says the same in JS. */
const BALANCE_RULES: Record<PointsOperation, (amount: number) => { next: RawBuilder<number>; allowed: RawBuilder<boolean> }> = {
  add: (amount) => ({ next: sql`t.points + ${amount}`, allowed: sql`t.points + ${amount} <= ${MAX_BALANCE}` }),
  subtract: (amount) => ({ next: sql`t.points - ${amount}`, allowed: sql`t.points >= ${amount}` }),
  set: (amount) => ({ next: sql`${amount}`, allowed: sql`true` }),
};

type WrittenRow = ActivityRow & Pick<CustomerRow, 'shopify_customer_id' | 'email' | 'birthday'> & { customer_created_at: Date };

/**
 * The balance change, its ledger entry and (with a topic) its outbox event in ONE statement: the
 * hot path of the service, so one round trip instead of six. The first CTE takes the customer's row
 * lock; READ COMMITTED then gives it the latest committed balance, so oldPoints is exactly the
 * balance replaced. Undefined when nothing was written: no such customer, or the rule refused.
 */
export async function writeBalanceChange(
  db: Queryable,
  shopId: string,
  target: Target,
  change: BalanceChange,
): Promise<{ activity: Activity; customer: Customer } | undefined> {
  const now = new Date();
  const { next, allowed } = BALANCE_RULES[change.op](change.amount);
  const match = 'customerId' in target ? sql<boolean>`id = ${target.customerId}` : matchesIdentifier(target.identifier);
  // The event's data is the activity as the API shows it (toActivity), timestamps included.
  const event = change.topic
    ? sql`, event as (
        insert into outbox_events (id, shop_id, type, data)
        select ${newEventId()}, shop_id, ${change.topic}, jsonb_build_object(
          '_id', id, 'type', type, 'settingType', setting_type, 'description', description, 'note', note,
          'oldPoints', old_points, 'newPoints', new_points, 'customer', customer_id, 'shop', shop_id,
          'createdAt', ${now.toISOString()}::text, 'updatedAt', ${now.toISOString()}::text)
        from activity)`
    : sql``;
  const { rows } = await sql<WrittenRow>`
    with target as (
      select id, points from customers where shop_id = ${shopId} and ${match} for no key update
    ), updated as (
      update customers c set points = ${next}, updated_at = ${now}
      from target t where c.id = t.id and ${allowed}
      returning c.*, t.points as old_points
    ), activity as (
      insert into activities (id, shop_id, customer_id, type, setting_type, description, note, old_points, new_points, created_at, updated_at)
      select ${newId()}, shop_id, id, ${change.type}, ${change.settingType}, ${change.description}, ${change.note}, old_points, points, ${now}, ${now}
      from updated
      returning *
    )${event}
    select a.*, u.shopify_customer_id, u.email, u.birthday, u.created_at as customer_created_at from activity a, updated u
  `.execute(db);
  const row = rows[0];
  if (!row) return undefined;
  if (change.topic) announceOutboxWrite(db);
  const customer = toCustomer({
    ...row,
    id: row.customer_id,
    points: row.new_points,
    created_at: row.customer_created_at,
  });
  return { activity: toActivity(row), customer };
}

/**
 * writeBalanceChange for a caller that holds the customer's row lock (lockCustomer) in `trx` and
 * has checked the rule (nextBalance), so the change cannot be refused.
 */
export async function applyBalanceChange(
  trx: Trx,
  customer: CustomerRow,
  change: BalanceChange,
): Promise<{ activity: Activity; customer: Customer }> {
  const written = await writeBalanceChange(trx, customer.shop_id, { customerId: customer.id }, change);
  if (!written) throw new Error(`balance change refused for locked customer ${customer.id}`);
  return written;
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

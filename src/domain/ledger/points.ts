import { type RawBuilder, sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../../db/database.js';
import { GROUP_COMMIT, groupCommit } from '../../db/group-commit.js';
import type { ActivityRow, CustomerRow } from '../../db/schema.js';
import { inTransaction, type Queryable, type Trx } from '../../db/transaction.js';
import type { Actor } from '../audit/index.js';
import { type Customer, customerIdentifierSchema, lockCustomer, parseIdentifier, toCustomer } from '../customers/index.js';
import { announceOutboxWrite, type EventTopic, newEventId, newId, type Page, type PageArgs, pageBySeq, pagesBySeq, parseInput, RuleViolationError, type SeqList } from '../kernel/index.js';

export const ACTIVITY_TYPES = [
  'add_points',
  'subtract_points',
  'update_points',
  'redeem_points',
  'referral_reward',
  // The loyalty engine: points an earning rule gave, and points a refund took back.
  'earn_points',
  'clawback_points',
  // Points that reached their expiry (expiry.ts).
  'expire_points',
  // A discount code's points given back: cancelled, expired or its order refunded (rewards/code-states.ts).
  'refund_redemption',
] as const;
export type ActivityType = (typeof ACTIVITY_TYPES)[number];

/** Where a change came from: a direct API call, a customers import, a redemption, a referral, an order, another earning rule, expiry. */
export type SettingType = 'api' | 'import' | 'redemption' | 'referral' | 'order' | 'rule' | 'expiry';

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
  actor?: Actor,
): Promise<{ activity: Activity; customer: Customer }> {
  const data = parseInput(pointsChangeSchemas[op], input);
  const change: BalanceChange = {
    op,
    amount: data.amount,
    ...OPERATIONS[op],
    settingType: 'api',
    description: data.description ?? null,
    note: data.note ?? null,
    actor,
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
  /** The person or key making the change by hand: the same statement writes its audit_log row (points.<op>). */
  actor?: Actor | undefined;
};

/** The customer a balance change is for: as an API caller names them, or by our id. */
type Target = { identifier: string } | { customerId: string };

/** Each way of naming a customer, as a join condition (an index probe) between `input i` and `customers c`. */
const MATCH = {
  customerId: sql<boolean>`c.id = i.customer_key`,
  shopifyCustomerId: sql<boolean>`c.shopify_customer_id = i.customer_key`,
  email: sql<boolean>`lower(c.email) = i.customer_key`,
};
type MatchBy = keyof typeof MATCH;

/** The way a change names its customer, and the value to match. */
function matchKey(target: Target): { by: MatchBy; customerKey: string } {
  if ('customerId' in target) return { by: 'customerId', customerKey: target.customerId };
  const named = parseIdentifier(target.identifier);
  return 'email' in named ? { by: 'email', customerKey: named.email } : { by: 'shopifyCustomerId', customerKey: named.shopifyCustomerId };
}

type ChangeRequest = { shopId: string; customerKey: string; change: BalanceChange };
type Written = { activity: Activity; customer: Customer };

type WrittenRow = ActivityRow &
  Pick<CustomerRow, 'shopify_customer_id' | 'email' | 'birthday' | 'pending_points'> & { customer_created_at: Date; ord: number };

/**
 * Writes the balance change, its ledger entry and (with a topic) its outbox event in one statement:
 * the hot path of the service. Outside a transaction, concurrent changes that name their customers
 * the same way share that statement (group commit, src/db/group-commit.ts). Undefined when nothing
 * was written: no such customer, or the rule refused.
 */
export async function writeBalanceChange(
  db: Queryable,
  shopId: string,
  target: Target,
  change: BalanceChange,
): Promise<Written | undefined> {
  const { by, customerKey } = matchKey(target);
  const request = { shopId, customerKey, change };
  if (db.isTransaction) return (await writeBalanceChanges(db, by, [request]))[0];
  let writers = groupCommits.get(db);
  if (!writers) groupCommits.set(db, (writers = {}));
  writers[by] ??= groupCommit({
    write: (requests) => writeBalanceChanges(db, by, requests),
    // Two changes of one customer never share a statement: one UPDATE cannot change a row twice.
    key: (r) => `${r.shopId} ${r.customerKey}`,
    ...GROUP_COMMIT,
  });
  return writers[by](request);
}

/**
 * Balance changes by our customer ids, in a transaction that holds those customers' row locks (so
 * none is refused for a balance that moved): as few statements as one UPDATE allows, since it
 * cannot change a row twice: a customer's second change goes in the next statement. Results in order.
 */
export async function writeLockedBalanceChanges(trx: Trx, changes: ReadonlyArray<{ shopId: string; customerId: string; change: BalanceChange }>): Promise<Written[]> {
  const results: Written[] = [];
  let left = changes.map((c, index) => ({ index, request: { shopId: c.shopId, customerKey: c.customerId, change: c.change } }));
  while (left.length) {
    const seen = new Set<string>();
    const round = left.filter((c) => !seen.has(c.request.customerKey) && seen.add(c.request.customerKey));
    const written = await writeBalanceChanges(trx, 'customerId', round.map((c) => c.request));
    round.forEach((c, k) => {
      if (!written[k]) throw new Error(`balance change refused for locked customer ${c.request.customerKey}`);
      results[c.index] = written[k];
    });
    left = left.filter((c) => !round.includes(c));
  }
  return results;
}

const groupCommits = new WeakMap<DB, Partial<Record<MatchBy, (request: ChangeRequest) => Promise<Written | undefined>>>>();

/**
 * Balance changes for different customers, all named the same way (`by`), in ONE statement. `input`
 * holds one row per change; `target` finds each change's customer and takes the row locks in id
 * order, so two such statements never deadlock, and READ COMMITTED then gives each the latest
 * committed balance, so oldPoints is exactly the balance replaced. The balance moves only where the
 * rule (nextBalance, in SQL) allows it; the ledger entry and the event (its data: the activity as
 * the API shows it, toActivity) are written for exactly those rows. The result for requests[i] is
 * at index i.
 */
async function writeBalanceChanges(db: Queryable, by: MatchBy, requests: ChangeRequest[]): Promise<Array<Written | undefined>> {
  const now = new Date();
  const column = <V>(pick: (r: ChangeRequest, i: number) => V) => requests.map(pick);
  const { rows } = await sql<WrittenRow>`
    with input as (
      select * from unnest(
        ${column((_, i) => i)}::int[], ${column((r) => r.shopId)}::text[], ${column((r) => r.customerKey)}::text[],
        ${column((r) => r.change.op)}::text[], ${column((r) => r.change.amount)}::bigint[],
        ${column((r) => r.change.type)}::text[], ${column((r) => r.change.settingType)}::text[],
        ${column((r) => r.change.description)}::text[], ${column((r) => r.change.note)}::text[],
        ${column(() => newId())}::text[], ${column((r) => (r.change.topic ? newEventId() : null))}::text[],
        ${column((r) => r.change.topic ?? null)}::text[],
        ${column((r) => r.change.actor?.kind ?? null)}::text[], ${column((r) => r.change.actor?.id ?? null)}::text[],
        ${column((r) => r.change.actor?.label ?? null)}::text[], ${column((r) => (r.change.actor ? newId() : null))}::text[]
      ) as i(ord, shop_id, customer_key, op, amount, type, setting_type, description, note, activity_id, event_id, topic,
        actor_kind, actor_id, actor_label, audit_id)
    ), target as (
      select c.id, c.points, i.ord from input i join customers c on c.shop_id = i.shop_id and ${MATCH[by]}
      order by c.id for no key update of c
    ), updated as (
      update customers c
      set points = case i.op when 'add' then t.points + i.amount when 'subtract' then t.points - i.amount else i.amount end,
        updated_at = ${now}
      from target t join input i on i.ord = t.ord
      where c.id = t.id
        and case i.op when 'add' then t.points + i.amount <= ${MAX_BALANCE} when 'subtract' then t.points >= i.amount else true end
      returning c.*, t.points as old_points, i.ord
    ), activity as (
      insert into activities (id, shop_id, customer_id, type, setting_type, description, note, old_points, new_points, created_at, updated_at)
      select i.activity_id, u.shop_id, u.id, i.type, i.setting_type, i.description, i.note, u.old_points, u.points, ${now}, ${now}
      from updated u join input i on i.ord = u.ord
      returning *
    ), event as (
      insert into outbox_events (id, shop_id, type, data)
      select i.event_id, a.shop_id, i.topic, ${activityJson(sql`a`, sql`${now.toISOString()}::text`)}
      from activity a join input i on i.activity_id = a.id
      where i.topic is not null
    )${requests.some((r) => r.change.actor) ? auditRows(now) : sql``}
    select a.*, u.ord, u.shopify_customer_id, u.email, u.birthday, u.pending_points, u.created_at as customer_created_at
    from activity a join updated u on u.id = a.customer_id
  `.execute(db);
  if (rows.length && requests.some((r) => r.change.topic)) announceOutboxWrite(db);
  const results: Array<Written | undefined> = requests.map(() => undefined);
  for (const row of rows) {
    const customer = toCustomer({ ...row, id: row.customer_id, points: row.new_points, created_at: row.customer_created_at });
    results[row.ord] = { activity: toActivity(row), customer };
  }
  return results;
}

/**
 * The audit_log rows of the statement's changes made by hand (an actor's), in the statement itself:
 * group commit and the audit agree, at no extra round trip. Left out of statements without one (the
 * program's own changes), which then read and write exactly what they did before the audit log.
 */
function auditRows(now: Date) {
  return sql`, audit as (
      insert into audit_log (id, shop_id, at, actor_kind, actor_id, actor_label, kind, subject_type, subject_id, before, after)
      select i.audit_id, a.shop_id, ${now}, i.actor_kind, i.actor_id, i.actor_label, 'points.' || i.op, 'customer', a.customer_id,
        jsonb_build_object('points', a.old_points),
        jsonb_build_object('points', a.new_points, 'activity', a.id, 'description', a.description, 'note', a.note)
      from activity a join input i on i.activity_id = a.id
      where i.actor_id is not null)`;
}

/**
 * The activity as the API shows it (toActivity), built in SQL from ledger row `a` (the RETURNING of
 * its insert) and its time as JSON text: the data of the event a statement writes with the entry.
 */
export function activityJson(a: RawBuilder<unknown>, at: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`jsonb_build_object(
    '_id', ${a}.id, 'type', ${a}.type, 'settingType', ${a}.setting_type, 'description', ${a}.description, 'note', ${a}.note,
    'oldPoints', ${a}.old_points, 'newPoints', ${a}.new_points, 'customer', ${a}.customer_id, 'shop', ${a}.shop_id,
    'createdAt', ${at}, 'updatedAt', ${at})`;
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
function ledger(db: Queryable, shopId: string): SeqList<ActivityRow> {
  return {
    table: 'activities',
    parent: 'customer_id',
    rowsOf: (customerId) => db.selectFrom('activities').selectAll().where('shop_id', '=', shopId).where('customer_id', '=', customerId),
    column: 'seq',
    direction: 'desc',
  };
}

export function listActivities(db: Queryable, shopId: string, customerId: string, args: PageArgs): Promise<Page<Activity>> {
  return pageBySeq(db, customerId, ledger(db, shopId), args, toActivity);
}

/** The shop's whole ledger, newest first (a dashboard's recent activity): keyed by (shop_id, seq). */
export function listShopActivities(db: Queryable, shopId: string, args: PageArgs): Promise<Page<Activity>> {
  return pageBySeq(db, shopId, { ...ledger(db, shopId), parent: 'shop_id', rowsOf: () => db.selectFrom('activities').selectAll().where('shop_id', '=', shopId) }, args, toActivity);
}

/** listActivities for many customers in one statement: a page of each one's ledger, in the order of `customerIds`. */
export function listActivitiesOfCustomers(db: Queryable, shopId: string, customerIds: readonly string[], args: PageArgs): Promise<Array<Page<Activity>>> {
  return pagesBySeq(db, customerIds, ledger(db, shopId), args, toActivity);
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

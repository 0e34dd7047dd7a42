import type { CodeStatus, DiscountCodeRow } from '../../db/schema.js';
import type { Trx } from '../../db/transaction.js';
import { ConflictError, type EventTopic, recordEvent, RuleViolationError } from '../kernel/index.js';
import { type Activity, writeBalanceChange } from '../ledger/index.js';
import { type DiscountCode, toDiscountCode } from './discount-codes.js';

/**
 * A code's life (DESIGN.md "Rewards at checkout: a code's life"): `issued`, then exactly one of
 * `used` (by an order that carries it), `expired` (by the scheduler, at its expiresAt) or
 * `cancelled` (by the shop). Every end goes through `endCode`, under the code's row lock, so when an
 * order, an expiry and a cancellation race for one code, the first to lock it wins and the others
 * find it ended. No end is undone. The points a code cost come back at most once
 * (`returnCodePoints`), where the shop says so.
 */
export const CODE_STATUSES = ['issued', 'used', 'expired', 'cancelled'] as const satisfies readonly CodeStatus[];

/** How an issued code ends. */
export type CodeEnd =
  | { status: 'used'; at: Date; orderId: string; customerId: string }
  | { status: 'expired' }
  | { status: 'cancelled'; at: Date };

const END_TOPICS: Record<CodeEnd['status'], EventTopic> = {
  used: 'redemptions/used',
  expired: 'redemptions/expired',
  cancelled: 'redemptions/cancelled',
};

/** A code of the shop by its text (or our id), locked until the transaction ends; undefined when there is none. */
export function lockCode(trx: Trx, shopId: string, by: { code: string } | { id: string }): Promise<DiscountCodeRow | undefined> {
  const query = trx.selectFrom('discount_codes').selectAll().where('shop_id', '=', shopId);
  return ('code' in by ? query.where('code', '=', by.code) : query.where('id', '=', by.id)).forUpdate().executeTakeFirst();
}

/**
 * Ends a code `lockCode` locked, if it is still issued: its new state and its outbox event commit
 * together. A code that has ended already is left as it is (`changed` false); whether that is an
 * error is the caller's to say (a cancellation refuses, an order's second PUT does not care).
 */
export async function endCode(trx: Trx, row: DiscountCodeRow, end: CodeEnd): Promise<{ row: DiscountCodeRow; changed: boolean }> {
  if (row.status !== 'issued') return { row, changed: false };
  const ended = await trx
    .updateTable('discount_codes')
    .set(
      end.status === 'used'
        ? { status: 'used', used_at: end.at, order_id: end.orderId, other_customer: end.customerId !== row.customer_id }
        : end.status === 'cancelled'
          ? { status: 'cancelled', cancelled_at: end.at }
          : { status: 'expired' },
    )
    .where('id', '=', row.id)
    .where('status', '=', 'issued')
    .returningAll()
    .executeTakeFirstOrThrow();
  await recordEvent(trx, ended.shop_id, END_TOPICS[end.status], toDiscountCode(ended));
  return { row: ended, changed: true };
}

/** A code that is not issued any more, refused with its state: 409 code_not_issued (a clash with its state, not a rule). */
export function codeNotIssued(row: DiscountCodeRow): ConflictError {
  return new ConflictError('code_not_issued', `the code ${row.code} is ${row.status}`, ['code']);
}

/**
 * Gives back the points a code cost, once (a refund_redemption ledger entry and its points/refunded
 * event), to the customer it was issued to. Returns undefined when they came back before. The code
 * must be locked (`lockCode`), so two returns of one code never both write.
 */
export async function returnCodePoints(trx: Trx, row: DiscountCodeRow, description: string): Promise<{ activity: Activity; code: DiscountCode } | undefined> {
  if (row.returned_activity_id !== null) return undefined;
  const written = await writeBalanceChange(trx, row.shop_id, { customerId: row.customer_id }, {
    op: 'add',
    amount: row.points_amount,
    type: 'refund_redemption',
    settingType: 'redemption',
    description,
    note: null,
    topic: 'points/refunded',
  });
  if (!written) throw new RuleViolationError('points_limit_exceeded', 'the balance is at its maximum', ['code']);
  const returned = await trx
    .updateTable('discount_codes')
    .set({ returned_activity_id: written.activity._id })
    .where('id', '=', row.id)
    .returningAll()
    .executeTakeFirstOrThrow();
  return { activity: written.activity, code: toDiscountCode(returned) };
}

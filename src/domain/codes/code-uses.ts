import { type RawBuilder, sql } from 'kysely';
import type { DiscountCodeRow } from '../../db/schema.js';
import type { Trx } from '../../db/transaction.js';
import { recordShopEvents } from '../kernel/index.js';
import { toDiscountCode } from './discount-codes.js';

/**
 * Codes used by orders, many at once (order batches write dozens of orders in one statement): the
 * batched twin of `endCode`'s `used`, under the same rules. Only an issued code changes (the first
 * order to lock it wins; a used, expired or cancelled one stays as it is); a code of another
 * customer is used all the same and flagged; each change has its redemptions/used event.
 */

/**
 * Marks used, by their orders, the issued codes of the rows of `uses` (u: id, at, order_id,
 * customer_id: the code's id, the shop's order id and our customer id): endCode's `used`, for many
 * codes. The caller adds its RETURNING.
 */
export function markCodesUsed(uses: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`update discount_codes d
    set status = 'used', used_at = u.at, order_id = u.order_id, other_customer = d.customer_id <> u.customer_id
    from ${uses}
    where d.id = u.id and d.status = 'issued'`;
}

/** A time as JSON.stringify writes a Date (toDiscountCode's dates). */
const jsonTime = (t: RawBuilder<unknown>) => sql`to_char(${t} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** toDiscountCode in SQL, for a row `d` of discount_codes: the data of the event a statement writes with a code. */
export function discountCodeJson(d: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`jsonb_build_object(
    '_id', ${d}.id, 'code', ${d}.code, 'value', ${d}.value::float8, 'type', ${d}.type, 'currency', ${d}.currency, 'variantId', ${d}.variant_id,
    'reward', ${d}.reward_id, 'pointsAmount', ${d}.points_amount, 'customer', ${d}.customer_id, 'activity', ${d}.activity_id,
    'expiresAt', ${jsonTime(sql`${d}.expires_at`)}, 'createdAt', ${jsonTime(sql`${d}.created_at`)}, 'status', ${d}.status,
    'usedAt', ${jsonTime(sql`${d}.used_at`)}, 'orderId', ${d}.order_id, 'usedByOtherCustomer', ${d}.other_customer,
    'cancelledAt', ${jsonTime(sql`${d}.cancelled_at`)}, 'pointsReturned', ${d}.returned_activity_id is not null,
    'shopifySync', ${d}.shopify_sync, 'shopifyId', ${d}.shopify_id, 'shopifyError', ${d}.shopify_error)`;
}

/** A code of a shop, by its text, that an order of the shop carried. */
export type CodeUse = { shopId: string; code: string; at: Date; orderId: string; customerId: string };

/**
 * Locks, in id order, the issued codes `named` names and the used codes of the orders `usedBy`
 * names whose points have not come back: what an order batch may change. Taken before the batch
 * locks its customers, as a cancellation or an expiry locks a code and then (returning its points)
 * its customer: never the other way round, so they cannot deadlock; the id order keeps two batches
 * from deadlocking on each other's codes.
 */
export async function lockCodesForOrders(
  trx: Trx,
  named: ReadonlyArray<{ shopId: string; code: string }>,
  usedBy: ReadonlyArray<{ shopId: string; orderId: string }> = [],
): Promise<DiscountCodeRow[]> {
  if (named.length === 0 && usedBy.length === 0) return [];
  const { rows } = await sql<DiscountCodeRow>`
    select * from discount_codes d
    where (d.status = 'issued' and (d.shop_id, d.code) in (select * from unnest(${named.map((n) => n.shopId)}::text[], ${named.map((n) => n.code)}::text[])))
      or (d.status = 'used' and d.returned_activity_id is null
        and (d.shop_id, d.order_id) in (select * from unnest(${usedBy.map((u) => u.shopId)}::text[], ${usedBy.map((u) => u.orderId)}::text[])))
    order by d.id
    for update`.execute(trx);
  return rows;
}

/**
 * Marks the issued codes the uses name used by their orders, in one statement, with their events in
 * one more; the codes changed. The codes must be locked (`lockCodesForOrders`). Of two uses of one
 * code, the first wins.
 */
export async function useCodes(trx: Trx, uses: readonly CodeUse[]): Promise<DiscountCodeRow[]> {
  const firstUses = new Map<string, CodeUse>();
  for (const u of uses) if (!firstUses.has(`${u.shopId} ${u.code}`)) firstUses.set(`${u.shopId} ${u.code}`, u);
  const once = [...firstUses.values()];
  if (once.length === 0) return [];
  const { rows } = await sql<DiscountCodeRow>`${markCodesUsed(sql`(
      select c.id, i.at, i.order_id, i.customer_id
      from unnest(${once.map((u) => u.shopId)}::text[], ${once.map((u) => u.code)}::text[], ${once.map((u) => u.at.toISOString())}::timestamptz[],
        ${once.map((u) => u.orderId)}::text[], ${once.map((u) => u.customerId)}::text[]) as i(shop_id, code, at, order_id, customer_id)
      join discount_codes c on c.shop_id = i.shop_id and c.code = i.code) u`)}
    returning d.*`.execute(trx);
  const byCode = new Map(rows.map((r) => [`${r.shop_id} ${r.code}`, r]));
  const used = once.flatMap((u) => byCode.get(`${u.shopId} ${u.code}`) ?? []);
  await recordShopEvents(trx, used.map((row) => ({ shopId: row.shop_id, type: 'redemptions/used' as const, data: toDiscountCode(row) })));
  return used;
}

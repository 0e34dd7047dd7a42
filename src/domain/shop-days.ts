import type { DB } from '../db/database.js';
import type { ShopDayRunsTable } from '../db/schema.js';
import type { Trx } from '../db/transaction.js';
import { startOfShopDay } from './rule-awards.js';

/**
 * Daily work per shop (the birthday rule's run, the tier evaluation): a shop_day_runs row per shop
 * and kind holds the shop-local day to do next, due when that day begins in the shop's time zone.
 * The kinds share how a run is claimed, how late the oldest is, and how it moves on.
 */
export type ShopDayKind = ShopDayRunsTable['kind'];

/** The most overdue run of `kind`, locked (FOR UPDATE SKIP LOCKED: another instance takes the next); undefined when none is due. */
export function claimDueShopDay(trx: Trx, kind: ShopDayKind, now: Date) {
  return trx.selectFrom('shop_day_runs').selectAll().where('kind', '=', kind).where('due_at', '<=', now).orderBy('due_at').limit(1).forUpdate().skipLocked().executeTakeFirst();
}

/** When the oldest run of `kind` still waiting fell due (the /metrics lag), or null. */
export async function oldestDueShopDay(db: DB, kind: ShopDayKind, now: Date): Promise<Date | null> {
  const row = await db.selectFrom('shop_day_runs').select('due_at').where('kind', '=', kind).where('due_at', '<=', now).orderBy('due_at').limit(1).executeTakeFirst();
  return row?.due_at ?? null;
}

/** Moves the shop's run of `kind` to `day` ('YYYY-MM-DD'), due when it begins in the shop's time zone. */
export async function moveShopDay(trx: Trx, shopId: string, kind: ShopDayKind, day: string): Promise<void> {
  const { timezone } = await trx.selectFrom('shops').select('timezone').where('id', '=', shopId).executeTakeFirstOrThrow();
  await trx.updateTable('shop_day_runs').set({ day, due_at: startOfShopDay(day, timezone), after_id: null }).where('shop_id', '=', shopId).where('kind', '=', kind).execute();
}

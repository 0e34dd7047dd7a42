import type { DB } from '../../db/database.js';
import type { ShopDayRunsTable } from '../../db/schema.js';
import type { Trx } from '../../db/transaction.js';
import { failedItems, failingItems, runClaimed, startOfShopDay } from '../kernel/index.js';

/**
 * Daily work per shop (the birthday rule's run, the tier evaluation): a shop_day_runs row per shop
 * and kind holds the shop-local day to do next, due when that day begins in the shop's time zone.
 * The kinds share how a run is claimed, how late the oldest is, and how it moves on. A shop's run
 * is one item of due work (keyed by the shop): when it fails, that shop's run waits for its next
 * try or is set aside, and every other shop's goes on.
 */
export type ShopDayKind = ShopDayRunsTable['kind'];
export type ShopDayRun = Awaited<ReturnType<typeof claimDueShopDay>> & {};

/** The most overdue run of `kind` of a shop not in `skip`, locked (FOR UPDATE SKIP LOCKED: another instance takes the next); undefined when none is due. */
function claimDueShopDay(trx: Trx, kind: ShopDayKind, now: Date, skip: readonly string[]) {
  let query = trx.selectFrom('shop_day_runs').selectAll().where('kind', '=', kind).where('due_at', '<=', now);
  if (skip.length) query = query.where('shop_id', 'not in', skip);
  return query.orderBy('due_at').limit(1).forUpdate().skipLocked().executeTakeFirst();
}

/**
 * Runs the due runs of `kind` (the DueWork `name`), one shop-day step per transaction, until
 * `limit` units are done or none is due; `step` does a claimed run's next part and returns its units.
 */
export async function runDueShopDays(db: DB, name: string, kind: ShopDayKind, now: Date, limit: number, step: (trx: Trx, run: ShopDayRun, limit: number) => Promise<number>): Promise<number> {
  const failing = await failingItems(db, name, now);
  let done = 0;
  while (done < limit) {
    const units = await runClaimed(db, now, failing, {
      claim: async (trx, skip) => {
        const run = await claimDueShopDay(trx, kind, now, skip);
        return run ? [run] : [];
      },
      keyOf: (run) => ({ item: run.shop_id, shopId: run.shop_id }),
      work: (trx, [run]) => step(trx, run!, limit - done),
    });
    if (units === undefined) break;
    done += units;
  }
  return done;
}

/** When the oldest run of `kind` still waiting fell due (the /metrics lag), or null; runs of shops whose run failed are not waiting. */
export async function oldestDueShopDay(db: DB, name: string, kind: ShopDayKind, now: Date): Promise<Date | null> {
  const skip = await failedItems(db, name);
  let query = db.selectFrom('shop_day_runs').select('due_at').where('kind', '=', kind).where('due_at', '<=', now);
  if (skip.length) query = query.where('shop_id', 'not in', skip);
  const row = await query.orderBy('due_at').limit(1).executeTakeFirst();
  return row?.due_at ?? null;
}

/** Moves the shop's run of `kind` to `day` ('YYYY-MM-DD'), due when it begins in the shop's time zone. */
export async function moveShopDay(trx: Trx, shopId: string, kind: ShopDayKind, day: string): Promise<void> {
  const { timezone } = await trx.selectFrom('shops').select('timezone').where('id', '=', shopId).executeTakeFirstOrThrow();
  await trx.updateTable('shop_day_runs').set({ day, due_at: startOfShopDay(day, timezone), after_id: null }).where('shop_id', '=', shopId).where('kind', '=', kind).execute();
}

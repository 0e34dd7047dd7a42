import type { DB } from '../../db/database.js';
import type { EarningRuleRow } from '../../db/schema.js';
import type { Trx } from '../../db/transaction.js';
import { type DueWork, newId, nextDay, RuleViolationError, shopPeriods, startOfShopDay } from '../kernel/index.js';
import { credit } from './rule-credit.js';
import { moveShopDay, oldestDueShopDay, runDueShopDays, type ShopDayRun } from './shop-days.js';

/**
 * The birthday rule's daily run (DESIGN.md "Earning rules" and "Time-driven work"). A shop with an
 * active birthday rule has a shop_day_runs row: the shop-local day to do next, due when that day
 * begins in the shop's time zone. Whichever instance claims the row (FOR UPDATE SKIP LOCKED) awards
 * that day's birthdays in batches, then moves the row to the next day; a service down for days
 * catches up day by day. The award's unique key (rule, customer, year) makes each birthday earn
 * once whatever the instance, retry or restart.
 */
export const birthdayRun: DueWork = {
  name: 'birthdays',
  // One shop-day step per transaction: short, so live writes never wait long on the customers it locks.
  runDue: (db: DB, now: Date, limit: number) => runDueShopDays(db, 'birthdays', 'birthdays', now, limit, awardDay),
  oldestDue: (db: DB, now: Date) => oldestDueShopDay(db, 'birthdays', 'birthdays', now),
};

/** Awards up to `limit` birthdays of a claimed shop-day. Counts the day's move as one item. */
async function awardDay(trx: Trx, run: ShopDayRun, limit: number): Promise<number> {
  const rule = await activeBirthdayRule(trx, run.shop_id);
  // The rule was deactivated or deleted: the run ends; activating a rule starts it again from that day.
  if (!rule) {
    await trx.deleteFrom('shop_day_runs').where('shop_id', '=', run.shop_id).where('kind', '=', 'birthdays').execute();
    return 1;
  }
  const awarded = await awardBirthdays(trx, run.shop_id, rule, run.day, limit);
  if (awarded < limit) await moveShopDay(trx, run.shop_id, 'birthdays', nextDay(run.day));
  return awarded + (awarded < limit ? 1 : 0);
}

function activeBirthdayRule(trx: Trx, shopId: string): Promise<EarningRuleRow | undefined> {
  return trx.selectFrom('earning_rules').selectAll().where('shop_id', '=', shopId).where('type', '=', 'birthday').where('active', '=', true).executeTakeFirst();
}

/** Awards up to `limit` customers whose birthday is `day` and who have not earned it in its year, in id order (the engine's lock order). */
async function awardBirthdays(trx: Trx, shopId: string, rule: EarningRuleRow, day: string, limit: number): Promise<number> {
  const year = day.slice(0, 4);
  const customers = await trx
    .selectFrom('customers as c')
    .select('c.id')
    .where('c.shop_id', '=', shopId)
    .where('c.birthday', 'is not', null)
    .where((eb) => eb(eb.fn('right', ['c.birthday', eb.lit(5)]), 'in', birthdaysOn(day)))
    .where(({ not, exists, selectFrom }) =>
      not(exists(selectFrom('rule_awards as a').select('a.id').where('a.rule_id', '=', rule.id).whereRef('a.customer_id', '=', 'c.id').where('a.period', '=', year))),
    )
    .orderBy('c.id')
    .limit(limit)
    .execute();
  for (const { id } of customers) {
    const awardId = newId();
    await trx
      .insertInto('rule_awards')
      .values({ id: awardId, shop_id: shopId, rule_id: rule.id, customer_id: id, period: year, points: rule.earn_point, rule_snapshot: JSON.stringify(rule) })
      .execute();
    try {
      await credit(trx, shopId, id, rule, rule.name);
    } catch (err) {
      // A balance at its ceiling earns nothing this year; the run goes on (it would stall on it otherwise).
      if (!(err instanceof RuleViolationError)) throw err;
      await trx.updateTable('rule_awards').set({ points: 0 }).where('id', '=', awardId).execute();
    }
  }
  return customers.length;
}

/**
 * Starts the shop's birthday run from today (shop-local) when its birthday rule is active, in the
 * rule's writing transaction; a run already going keeps its day.
 */
export async function startBirthdayRun(trx: Trx, shopId: string, now = new Date()): Promise<void> {
  if (!(await activeBirthdayRule(trx, shopId))) return;
  const { timezone } = await trx.selectFrom('shops').select('timezone').where('id', '=', shopId).executeTakeFirstOrThrow();
  const { day } = shopPeriods(now, timezone);
  await trx
    .insertInto('shop_day_runs')
    .values({ shop_id: shopId, kind: 'birthdays', day, due_at: startOfShopDay(day, timezone) })
    .onConflict((oc) => oc.columns(['shop_id', 'kind']).doNothing())
    .execute();
}

/** The month-days ('MM-DD') born on which `localDay` (the shop's date) is the birthday: 29 February falls on 28 February in other years. */
export function birthdaysOn(localDay: string): string[] {
  const year = Number(localDay.slice(0, 4));
  const leap = (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0;
  const monthDay = localDay.slice(5);
  return monthDay === '02-28' && !leap ? ['02-28', '02-29'] : [monthDay];
}

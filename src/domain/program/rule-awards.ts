import { z } from 'zod';
import type { DB } from '../../db/database.js';
import type { EarningRuleRow } from '../../db/schema.js';
import { inTransaction, type Queryable, type Trx } from '../../db/transaction.js';
import { type Customer, customerIdentifierSchema, type CustomerKey, getCustomer, lockCustomer } from '../customers/index.js';
import { newId, NotFoundError, parseInput, RuleViolationError, shopPeriods } from '../kernel/index.js';
import type { Activity } from '../ledger/index.js';
import { type Actor, recordAudit } from '../audit/index.js';
import { type EarningRule, toEarningRule } from './earning-rules.js';
import { credit } from './rule-credit.js';

/**
 * Earns of the rules that are not orders: a sign-up (once), a custom action the shop's backend
 * reports (per its limit, idempotent by reference). Each is a rule_awards row, whose unique keys
 * make it happen at most once whatever races, and a ledger entry (earn_points, settingType rule).
 */

function periodOf(rule: EarningRuleRow, at: Date, timeZone: string): string | null {
  if (rule.type === 'sign_up' || rule.action_limit === 'once') return 'once';
  if (rule.action_limit === 'unlimited') return null;
  const periods = shopPeriods(at, timeZone);
  return rule.type === 'birthday' ? periods.year : rule.action_limit === 'day' ? periods.day : periods.week;
}

/**
 * From when a customer's sign-up, as Shopify dates it, earns the sign-up bonus: the shop's
 * signUpBonusSince, else when it connected its Shopify store, else when the shop was created.
 */
export const signUpBonusSince = (shop: { sign_up_bonus_since: Date | null; shopify_connected_at: Date | null; created_at: Date }): Date =>
  shop.sign_up_bonus_since ?? shop.shopify_connected_at ?? shop.created_at;

/**
 * The shop's active sign_up rule, if any, awards a customer just created (in the creating
 * transaction: a sign-up and its points commit together). Returns the customer after the award.
 * `signedUpAt` is when the customer signed up as the source says (Shopify's created_at): a shop
 * that connects mid-life first sees its existing customers on their orders and updates, and they
 * did not sign up now. Only one who signed up since signUpBonusSince earns; null (unknown), none.
 */
export async function awardSignUp(trx: Trx, shopId: string, customer: Customer, signedUpAt?: Date | null): Promise<Customer> {
  const rule = await trx.selectFrom('earning_rules').selectAll().where('shop_id', '=', shopId).where('type', '=', 'sign_up').where('active', '=', true).executeTakeFirst();
  if (!rule) return customer;
  if (signedUpAt !== undefined) {
    const shop = await trx.selectFrom('shops').select(['sign_up_bonus_since', 'shopify_connected_at', 'created_at']).where('id', '=', shopId).executeTakeFirstOrThrow();
    if (signedUpAt === null || signedUpAt < signUpBonusSince(shop)) return customer;
  }
  const awarded = await trx
    .insertInto('rule_awards')
    .values({ id: newId(), shop_id: shopId, rule_id: rule.id, customer_id: customer._id, period: 'once', points: rule.earn_point, rule_snapshot: JSON.stringify(rule) })
    .onConflict((oc) => oc.columns(['rule_id', 'customer_id', 'period']).where('period', 'is not', null).doNothing())
    .returning('id')
    .executeTakeFirst();
  if (!awarded) return customer;
  return (await credit(trx, shopId, customer._id, rule, rule.name)).customer;
}

export const actionInputSchema = z.strictObject({
  customerIdentifier: customerIdentifierSchema,
  action: z.string().trim().min(1).max(64),
  /** The shop's own id of this occurrence (a review id, say): the same reference earns once. */
  reference: z.string().trim().min(1).max(255),
});

export type ActionAward = { created: boolean; points: number; period: string | null; activity: Activity | null; customer: Customer | null };

/**
 * POST /actions: the custom rule for `action` awards the customer, at most once per reference and
 * within the rule's limit (once, per shop-local day or ISO week, unlimited). A reference seen
 * before answers what it earned then (created: false) and changes nothing.
 */
export async function reportAction(db: DB, shopId: string, input: unknown, now = new Date(), actor?: Actor): Promise<ActionAward> {
  const data = parseInput(actionInputSchema, input);
  return inTransaction(db, async (trx) => {
    const rule = await trx.selectFrom('earning_rules').selectAll().where('shop_id', '=', shopId).where('action', '=', data.action).executeTakeFirst();
    if (!rule) throw new NotFoundError('rule_not_found', `this shop has no custom rule for action "${data.action}"`, ['action']);
    // The customer's row lock orders concurrent reports of one customer: limits are counted exactly.
    const customer = await lockCustomer(trx, shopId, data.customerIdentifier);
    const seen = () => trx.selectFrom('rule_awards').select(['points', 'period']).where('shop_id', '=', shopId).where('rule_id', '=', rule.id).where('reference', '=', data.reference).executeTakeFirst();
    const repeat = (award: { points: number; period: string | null }): ActionAward => ({ created: false, points: award.points, period: award.period, activity: null, customer: null });
    const before = await seen();
    if (before) return repeat(before);
    if (!rule.active) throw new RuleViolationError('rule_inactive', `the rule for action "${data.action}" is inactive`, ['action']);
    const { timezone } = await trx.selectFrom('shops').select('timezone').where('id', '=', shopId).executeTakeFirstOrThrow();
    const period = periodOf(rule, now, timezone);
    const awarded = await trx
      .insertInto('rule_awards')
      .values({ id: newId(), shop_id: shopId, rule_id: rule.id, customer_id: customer.id, period, reference: data.reference, points: rule.earn_point, rule_snapshot: JSON.stringify(rule), created_at: now })
      // Either key may conflict: the period's (the limit) or the reference's (another customer reported it meanwhile).
      .onConflict((oc) => oc.doNothing())
      .returning('id')
      .executeTakeFirst();
    if (!awarded) {
      const meanwhile = await seen();
      if (meanwhile) return repeat(meanwhile);
      const limit = { once: 'once', day: 'once a day', week: 'once a week', unlimited: '' }[rule.action_limit ?? 'once'];
      throw new RuleViolationError('action_limit_reached', `"${data.action}" earns ${limit}; this customer has earned it${period === 'once' ? '' : ` in ${period}`}`, ['action']);
    }
    const written = await credit(trx, shopId, customer.id, rule, `${rule.name} (${data.reference})`);
    // A repeated reference changed nothing and is not recorded.
    await recordAudit(trx, shopId, actor, {
      kind: 'action.report',
      subject: { type: 'customer', id: customer.id },
      before: { points: customer.points },
      after: { points: written.customer.points, activity: written.activity._id, action: data.action, reference: data.reference },
    }, now);
    return { created: true, points: rule.earn_point, period, activity: written.activity, customer: written.customer };
  });
}

export type RuleEligibility = EarningRule & { isEarned: boolean };

const eligibilityQuery = z.object({ customerIdentifier: customerIdentifierSchema });

/**
 * The shop's rules with `isEarned` for a customer, as BLOY has it: sign-up, birthday (this year)
 * and custom actions (in their current period) already earned; place_order earns per order, never "earned".
 */
export async function earningRuleEligibility(db: Queryable, shopId: string, query: unknown, now = new Date()): Promise<RuleEligibility[]> {
  const { customerIdentifier } = parseInput(eligibilityQuery, query);
  return eligibilityOf(db, shopId, customerIdentifier, now);
}

/** The shop's active rules only, with `isEarned` for a customer named by a key (a storefront's token: its id). */
export async function activeEligibilityOf(db: Queryable, shopId: string, who: CustomerKey, now = new Date()): Promise<RuleEligibility[]> {
  return (await eligibilityOf(db, shopId, who, now)).filter((rule) => rule.active);
}

async function eligibilityOf(db: Queryable, shopId: string, who: CustomerKey, now = new Date()): Promise<RuleEligibility[]> {
  const customer = await getCustomer(db, shopId, who);
  const { timezone, currency } = await db.selectFrom('shops').select(['timezone', 'currency']).where('id', '=', shopId).executeTakeFirstOrThrow();
  const rows = await db.selectFrom('earning_rules').selectAll().where('shop_id', '=', shopId).orderBy('created_at').orderBy('id').execute();
  const awards = await db.selectFrom('rule_awards').select(['rule_id', 'period']).where('customer_id', '=', customer.id).where('period', 'is not', null).execute();
  const earned = new Set(awards.map((a) => `${a.rule_id} ${a.period}`));
  return rows.map((row) => {
    const period = row.type === 'place_order' ? null : periodOf(row, now, timezone);
    return { ...toEarningRule(row, currency), isEarned: period !== null && earned.has(`${row.id} ${period}`) };
  });
}

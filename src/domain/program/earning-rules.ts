import { sql } from 'kysely';
import { z } from 'zod';
import type { DB } from '../../db/database.js';
import type { ActionLimit, EarningRuleRow, EarningRuleType } from '../../db/schema.js';
import { inTransaction, type Queryable, type Trx } from '../../db/transaction.js';
import { ConflictError, formatMoney, isId, newId, NotFoundError, parseInput, parseMoney, RuleViolationError, ValidationError } from '../kernel/index.js';
import { type Actor, changedFields, recordAudit } from '../audit/index.js';
import { MAX_AMOUNT } from '../ledger/index.js';
import { startBirthdayRun } from './birthday-run.js';

export const EARNING_RULE_TYPES = ['place_order', 'sign_up', 'birthday', 'custom'] as const satisfies readonly EarningRuleType[];
export const ACTION_LIMITS = ['once', 'day', 'week', 'unlimited'] as const satisfies readonly ActionLimit[];

/** A rule as the API shows it; fields of other types are null (or empty). */
export type EarningRule = {
  _id: string;
  type: EarningRuleType;
  name: string;
  active: boolean;
  earnPoint: number;
  /** place_order: earnPoint points per this much eligible money, a decimal string in the shop's currency. */
  spent: string | null;
  includeProductIds: string[];
  excludeProductIds: string[];
  includeCollectionIds: string[];
  excludeCollectionIds: string[];
  includeShipping: boolean;
  includeTax: boolean;
  /** place_order: gift-card lines count too; by default they never earn (the money comes back when the card is spent). */
  includeGiftCards: boolean;
  action: string | null;
  actionLimit: ActionLimit | null;
  createdAt: Date;
  updatedAt: Date;
};

const idList = z.array(z.string().trim().min(1).max(255)).max(500);

/** Every field a rule can have; which ones a type takes is checked after (ruleFields). */
const ruleFields = {
  type: z.enum(EARNING_RULE_TYPES),
  name: z.string().trim().min(1).max(255),
  active: z.boolean(),
  earnPoint: z.number().int().min(1).max(MAX_AMOUNT),
  spent: z.string(),
  includeProductIds: idList,
  excludeProductIds: idList,
  includeCollectionIds: idList,
  excludeCollectionIds: idList,
  includeShipping: z.boolean(),
  includeTax: z.boolean(),
  includeGiftCards: z.boolean(),
  action: z.string().regex(/^[a-z0-9_.-]{1,64}$/, 'lower-case letters, digits, _ . and -, at most 64'),
  actionLimit: z.enum(ACTION_LIMITS),
};
type RuleFields = { [K in keyof typeof ruleFields]: z.output<(typeof ruleFields)[K]> };

const PLACE_ORDER_ONLY = ['spent', 'includeProductIds', 'excludeProductIds', 'includeCollectionIds', 'excludeCollectionIds', 'includeShipping', 'includeTax', 'includeGiftCards'] as const;
const CUSTOM_ONLY = ['action', 'actionLimit'] as const;

export const earningRuleCreateSchema = z.strictObject({
  ...Object.fromEntries(Object.entries(ruleFields).map(([k, v]) => [k, v.nullish()])),
  type: ruleFields.type,
  name: ruleFields.name,
  earnPoint: ruleFields.earnPoint,
}) as unknown as z.ZodType<Partial<RuleFields> & Pick<RuleFields, 'type' | 'name' | 'earnPoint'>>;

/** An update names the rule and the fields to change; the type stays. */
export const earningRuleUpdateSchema = z.strictObject({
  id: z.string().refine(isId, 'not an earning rule id'),
  ...Object.fromEntries(Object.entries(ruleFields).filter(([k]) => k !== 'type').map(([k, v]) => [k, v.nullish()])),
}) as unknown as z.ZodType<{ id: string } & Partial<Omit<RuleFields, 'type'>>>;

export function toEarningRule(row: EarningRuleRow, currency: string): EarningRule {
  return {
    _id: row.id,
    type: row.type,
    name: row.name,
    active: row.active,
    earnPoint: row.earn_point,
    spent: row.spent_minor === null ? null : formatMoney(Number(row.spent_minor), currency),
    includeProductIds: row.include_product_ids,
    excludeProductIds: row.exclude_product_ids,
    includeCollectionIds: row.include_collection_ids,
    excludeCollectionIds: row.exclude_collection_ids,
    includeShipping: row.include_shipping,
    includeTax: row.include_tax,
    includeGiftCards: row.include_gift_cards,
    action: row.action,
    actionLimit: row.action_limit,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}

/** The columns of a rule of `type`, refusing fields that belong to another type and requiring its own. */
function columnsOf(type: EarningRuleType, fields: Partial<RuleFields>, currency: string) {
  const given = (names: readonly string[]) => names.filter((n) => fields[n as keyof RuleFields] !== undefined && fields[n as keyof RuleFields] !== null);
  const foreign = [...(type === 'place_order' ? [] : given(PLACE_ORDER_ONLY)), ...(type === 'custom' ? [] : given(CUSTOM_ONLY))];
  if (foreign.length) {
    throw new ValidationError(`${foreign[0]}: not a field of ${type} rules`, foreign.map((path) => ({ path, message: `not a field of ${type} rules` })));
  }
  const missing = [...(type === 'place_order' && !fields.spent ? ['spent'] : []), ...(type === 'custom' ? CUSTOM_ONLY.filter((n) => !fields[n]) : [])];
  if (missing.length) throw new ValidationError(`${missing[0]}: required for ${type} rules`, missing.map((path) => ({ path, message: 'required' })));
  let spentMinor: number | null = null;
  if (type === 'place_order') {
    const parsed = parseMoney(fields.spent, currency);
    if (!parsed.ok || parsed.minor === 0) throw new ValidationError(`spent: ${parsed.ok ? 'must be more than 0' : parsed.message}`, [{ path: 'spent', message: parsed.ok ? 'must be more than 0' : parsed.message }]);
    spentMinor = parsed.minor;
  }
  return {
    name: fields.name!,
    active: fields.active ?? true,
    earn_point: fields.earnPoint!,
    spent_minor: spentMinor,
    include_product_ids: JSON.stringify(fields.includeProductIds ?? []),
    exclude_product_ids: JSON.stringify(fields.excludeProductIds ?? []),
    include_collection_ids: JSON.stringify(fields.includeCollectionIds ?? []),
    exclude_collection_ids: JSON.stringify(fields.excludeCollectionIds ?? []),
    include_shipping: fields.includeShipping ?? false,
    include_tax: fields.includeTax ?? false,
    include_gift_cards: fields.includeGiftCards ?? false,
    action: type === 'custom' ? fields.action! : null,
    action_limit: type === 'custom' ? fields.actionLimit! : null,
  };
}

async function shopCurrency(db: Queryable, shopId: string): Promise<string> {
  return (await db.selectFrom('shops').select('currency').where('id', '=', shopId).executeTakeFirstOrThrow()).currency;
}

/** The shop's currency; a rule is about to change, so what its orders earn may too (order-first-states.ts). */
async function changingProgram(trx: Trx, shopId: string): Promise<string> {
  const shop = await trx
    .updateTable('shops')
    .set({ program_version: sql`program_version + 1` })
    .where('id', '=', shopId)
    .returning('currency')
    .executeTakeFirstOrThrow();
  return shop.currency;
}

/**
 * A shop has one active sign_up and one active birthday rule at most (each earns once per
 * customer, or per year): a second would pay twice. Checked under a lock on the shop's row.
 */
async function refuseSecondActive(trx: Trx, shopId: string, type: EarningRuleType, active: boolean, except?: string): Promise<void> {
  if (!active || (type !== 'sign_up' && type !== 'birthday')) return;
  await trx.selectFrom('shops').select('id').where('id', '=', shopId).forUpdate().execute();
  let query = trx.selectFrom('earning_rules').select('id').where('shop_id', '=', shopId).where('type', '=', type).where('active', '=', true);
  if (except) query = query.where('id', '<>', except);
  if (await query.executeTakeFirst()) {
    throw new RuleViolationError('earning_rule_exists', `the shop already has an active ${type} rule; deactivate it first`, ['active']);
  }
}

/** A unique custom action per shop: the database's unique index says so, as a 409. */
function translateActionConflict(err: unknown, action: string | null | undefined): never {
  if ((err as { code?: string }).code === '23505' && action) {
    throw new ConflictError('action_exists', `the shop already has a custom rule for action "${action}"`, ['action']);
  }
  throw err;
}

export async function createEarningRule(db: DB, shopId: string, input: unknown, actor?: Actor): Promise<{ earningRule: EarningRule }> {
  const fields = parseInput(earningRuleCreateSchema, input);
  return inTransaction(db, async (trx) => {
    const currency = await changingProgram(trx, shopId);
    const columns = columnsOf(fields.type, fields, currency);
    await refuseSecondActive(trx, shopId, fields.type, columns.active);
    const row = await trx
      .insertInto('earning_rules')
      .values({ id: newId(), shop_id: shopId, type: fields.type, ...columns })
      .returningAll()
      .executeTakeFirstOrThrow()
      .catch((err) => translateActionConflict(err, fields.action));
    if (row.type === 'birthday') await startBirthdayRun(trx, shopId);
    const earningRule = toEarningRule(row, currency);
    await recordAudit(trx, shopId, actor, { kind: 'earningRule.create', subject: { type: 'earningRule', id: row.id }, after: earningRule });
    return { earningRule };
  });
}

export async function updateEarningRule(db: DB, shopId: string, input: unknown, actor?: Actor): Promise<{ earningRule: EarningRule }> {
  const { id, ...patch } = parseInput(earningRuleUpdateSchema, input);
  return inTransaction(db, async (trx) => {
    const currency = await changingProgram(trx, shopId);
    const current = toEarningRule(await getRuleRow(trx, shopId, id, true), currency);
    const changes = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined));
    // The rule's own fields as they are, then the changes: only a field the caller sent can belong to another type.
    const own = [...(current.type === 'place_order' ? PLACE_ORDER_ONLY : []), ...(current.type === 'custom' ? CUSTOM_ONLY : [])];
    const kept = { name: current.name, active: current.active, earnPoint: current.earnPoint, ...Object.fromEntries(own.map((k) => [k, current[k]])) };
    const fields = { ...kept, ...changes } as Partial<RuleFields>;
    const columns = columnsOf(current.type, fields, currency);
    await refuseSecondActive(trx, shopId, current.type, columns.active, id);
    const row = await trx
      .updateTable('earning_rules')
      .set({ ...columns, updated_at: new Date() })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow()
      .catch((err) => translateActionConflict(err, fields.action));
    if (row.type === 'birthday') await startBirthdayRun(trx, shopId);
    const earningRule = toEarningRule(row, currency);
    await recordAudit(trx, shopId, actor, { kind: 'earningRule.update', subject: { type: 'earningRule', id }, ...changedFields(current, earningRule) });
    return { earningRule };
  });
}

/** Deletes a rule. What it earned stays: every earn keeps a snapshot of its rule. */
export async function deleteEarningRule(db: DB, shopId: string, id: string, actor?: Actor): Promise<{ deletedId: string }> {
  return inTransaction(db, async (trx) => {
    const row = await getRuleRow(trx, shopId, id, true);
    const currency = await changingProgram(trx, shopId);
    await trx.deleteFrom('earning_rules').where('id', '=', row.id).execute();
    await recordAudit(trx, shopId, actor, { kind: 'earningRule.delete', subject: { type: 'earningRule', id: row.id }, before: toEarningRule(row, currency) });
    return { deletedId: row.id };
  });
}

async function getRuleRow(db: Queryable, shopId: string, id: string, lock = false): Promise<EarningRuleRow> {
  if (!isId(id)) throw new ValidationError('id: not an earning rule id', [{ path: 'id', message: 'malformed id' }]);
  let query = db.selectFrom('earning_rules').selectAll().where('shop_id', '=', shopId).where('id', '=', id);
  if (lock) query = query.forUpdate();
  const row = await query.executeTakeFirst();
  if (!row) throw new NotFoundError('earning_rule_not_found', `this shop has no earning rule ${id}`, ['id']);
  return row;
}

/** The shop's rules, active and inactive, oldest first (a shop has a handful). */
export async function listEarningRules(db: Queryable, shopId: string): Promise<EarningRule[]> {
  const currency = await shopCurrency(db, shopId);
  const rows = await db.selectFrom('earning_rules').selectAll().where('shop_id', '=', shopId).orderBy('created_at').orderBy('id').execute();
  return rows.map((row) => toEarningRule(row, currency));
}

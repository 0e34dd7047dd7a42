import { ACTION_LIMITS, type ActionAward, createEarningRule, deleteEarningRule, EARNING_RULE_TYPES, type EarningRule as EarningRuleShape, listEarningRules, reportAction, updateEarningRule } from '../domain/program/index.js';
import { Activity } from './activity.js';
import { actorOf, builder, STOREFRONT } from './builder.js';
import { deletePayload, UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const EarningRuleType = builder.enumType('EarningRuleType', { subGraphs: STOREFRONT, values: EARNING_RULE_TYPES });
const ActionLimit = builder.enumType('ActionLimit', { subGraphs: STOREFRONT, values: ACTION_LIMITS });

export const EarningRule = builder.objectRef<EarningRuleShape>('EarningRule').implement({
  subGraphs: STOREFRONT,
  description:
    'How customers earn points: place_order (per money spent), sign_up, birthday, or a custom action the shop\'s backend reports. ' +
    'Fields of other types are null or empty. An earn keeps a snapshot of its rule: changing or deleting a rule never changes what was earned.',
  fields: (t) => ({
    _id: t.exposeID('_id'),
    type: t.field({ type: EarningRuleType, resolve: (r) => r.type }),
    name: t.exposeString('name'),
    active: t.exposeBoolean('active'),
    earnPoint: t.exposeInt('earnPoint', { description: 'Points per earn (place_order: per `spent`).' }),
    spent: t.exposeString('spent', { nullable: true, description: 'place_order: a decimal string in the shop\'s currency.' }),
    includeProductIds: t.exposeStringList('includeProductIds', { description: 'place_order: only these products (with includeCollectionIds; empty: all).' }),
    excludeProductIds: t.exposeStringList('excludeProductIds', { description: 'place_order: never these; an exclusion wins over an inclusion.' }),
    includeCollectionIds: t.exposeStringList('includeCollectionIds'),
    excludeCollectionIds: t.exposeStringList('excludeCollectionIds'),
    includeShipping: t.exposeBoolean('includeShipping'),
    includeTax: t.exposeBoolean('includeTax'),
    includeGiftCards: t.exposeBoolean('includeGiftCards', { description: 'place_order: gift-card lines count too; false (default): they never earn.' }),
    action: t.exposeString('action', { nullable: true, description: 'custom: the action name the shop\'s backend reports.' }),
    actionLimit: t.field({ type: ActionLimit, nullable: true, resolve: (r) => r.actionLimit }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const ruleInputFields = (t: Parameters<Parameters<typeof builder.inputType>[1]['fields']>[0]) => ({
  name: t.string({ required: false }),
  active: t.boolean({ required: false, description: 'Default true.' }),
  earnPoint: t.int({ required: false, description: '1 to 1,000,000,000.' }),
  spent: t.string({ required: false, description: 'place_order (required there): money per earnPoint points, e.g. "1.00".' }),
  includeProductIds: t.stringList({ required: false }),
  excludeProductIds: t.stringList({ required: false }),
  includeCollectionIds: t.stringList({ required: false }),
  excludeCollectionIds: t.stringList({ required: false }),
  includeShipping: t.boolean({ required: false }),
  includeTax: t.boolean({ required: false }),
  includeGiftCards: t.boolean({ required: false, description: 'place_order: let gift-card lines (OrderLineInput.giftCard) earn; default false.' }),
  action: t.string({ required: false, description: 'custom (required there): lower-case letters, digits, _ . -; unique per shop.' }),
  actionLimit: t.field({ type: ActionLimit, required: false, description: 'custom (required there).' }),
});

const EarningRuleCreateInput = builder.inputType('EarningRuleCreateInput', {
  fields: (t) => ({ type: t.field({ type: EarningRuleType, required: true }), ...ruleInputFields(t) }),
});
const EarningRuleUpdateInput = builder.inputType('EarningRuleUpdateInput', {
  description: 'Omitted fields keep their value; the type cannot change.',
  fields: (t) => ({ id: t.id({ required: true }), ...ruleInputFields(t) }),
});

const EarningRulePayload = builder.objectRef<{ earningRule?: EarningRuleShape; userErrors: UserErrorShape[] }>('EarningRulePayload').implement({
  fields: (t) => ({
    earningRule: t.field({ type: EarningRule, nullable: true, resolve: (p) => p.earningRule ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

builder.queryFields((t) => ({
  earningRules: t.field({
    type: [EarningRule],
    description: 'The shop\'s earning rules, active and inactive, oldest first.',
    resolve: (_root, _args, ctx) => listEarningRules(ctx.db, ctx.shop.id),
  }),
}));

builder.mutationFields((t) => ({
  earningRuleCreate: t.field({
    type: EarningRulePayload,
    args: { input: t.arg({ type: EarningRuleCreateInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => createEarningRule(ctx.db, ctx.shop.id, input, actorOf(ctx))),
  }),
  earningRuleUpdate: t.field({
    type: EarningRulePayload,
    args: { input: t.arg({ type: EarningRuleUpdateInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => updateEarningRule(ctx.db, ctx.shop.id, input, actorOf(ctx))),
  }),
  earningRuleDelete: t.field({
    type: deletePayload('EarningRuleDeletePayload', 'deletedEarningRuleId'),
    description: 'Deletes the rule; what it earned stays (each earn keeps a snapshot of its rule).',
    args: { id: t.arg.id({ required: true }) },
    resolve: (_root, { id }, ctx) => withUserErrors(() => deleteEarningRule(ctx.db, ctx.shop.id, String(id), actorOf(ctx))),
  }),
}));

const ActionReportInput = builder.inputType('ActionReportInput', {
  fields: (t) => ({
    customerIdentifier: t.string({ description: 'Shop customer id or e-mail.' }),
    action: t.string({ description: 'The custom rule\'s action.' }),
    reference: t.string({ description: 'The shop\'s own id of this occurrence: the same reference earns once.' }),
  }),
});

const ActionReportPayload = builder.objectRef<Partial<ActionAward> & { userErrors: UserErrorShape[] }>('ActionReportPayload').implement({
  fields: (t) => ({
    created: t.boolean({ nullable: true, description: 'False when this reference was rewarded before (nothing changed).', resolve: (p) => p.created ?? null }),
    points: t.int({ nullable: true, resolve: (p) => p.points ?? null }),
    activity: t.field({ type: Activity, nullable: true, description: 'The ledger entry, when rewarded now.', resolve: (p) => p.activity ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

builder.mutationFields((t) => ({
  actionReport: t.field({
    type: ActionReportPayload,
    description: 'POST /rest-api/v1/actions: the custom rule for `action` awards its points, once per reference and within its limit.',
    args: { input: t.arg({ type: ActionReportInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => reportAction(ctx.db, ctx.shop.id, input, ctx.now(), actorOf(ctx))),
  }),
}));

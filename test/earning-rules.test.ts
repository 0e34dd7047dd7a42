import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.js';

let t: TestApp;
let shop: { shopId: string; apiKey: string };

const RULE = '_id type name active earnPoint spent includeProductIds excludeCollectionIds includeShipping action actionLimit';
const create = (input: Record<string, unknown>, apiKey = shop.apiKey) =>
  t.graphql(apiKey, `mutation($input: EarningRuleCreateInput!) { earningRuleCreate(input: $input) { earningRule { ${RULE} } userErrors { code field message } } }`, { input });
const update = (input: Record<string, unknown>) =>
  t.graphql(shop.apiKey, `mutation($input: EarningRuleUpdateInput!) { earningRuleUpdate(input: $input) { earningRule { ${RULE} } userErrors { code field message } } }`, { input });

beforeAll(async () => {
  t = await startTestApp();
  shop = await t.shop();
});
afterAll(() => t?.stop());

describe('earning rules', () => {
  it('creates, lists (GraphQL and REST), updates and deletes; money in the shop\'s currency', async () => {
    const placeOrder = await create({ type: 'place_order', name: '1 pt per $1', earnPoint: 1, spent: '1', excludeCollectionIds: ['gift-cards'] });
    expect(placeOrder.data.earningRuleCreate).toMatchObject({ userErrors: [], earningRule: { type: 'place_order', spent: '1.00', active: true, excludeCollectionIds: ['gift-cards'], action: null } });
    const id = placeOrder.data.earningRuleCreate.earningRule._id;
    const custom = await create({ type: 'custom', name: 'Review', earnPoint: 50, action: 'review.posted', actionLimit: 'day' });
    expect(custom.data.earningRuleCreate.earningRule).toMatchObject({ action: 'review.posted', actionLimit: 'day', spent: null });

    const rest = await (await fetch(`${t.url}/rest-api/v1/earningRules`, { headers: { authorization: `Bearer ${shop.apiKey}` } })).json();
    expect(rest.data.map((r: { type: string }) => r.type)).toEqual(['place_order', 'custom']);

    const changed = await update({ id, earnPoint: 2, includeShipping: true, active: false });
    expect(changed.data.earningRuleUpdate.earningRule).toMatchObject({ earnPoint: 2, includeShipping: true, active: false, spent: '1.00' });
    const deleted = await t.graphql(shop.apiKey, `mutation($id: ID!) { earningRuleDelete(id: $id) { deletedEarningRuleId userErrors { code } } }`, { id });
    expect(deleted.data.earningRuleDelete).toEqual({ deletedEarningRuleId: id, userErrors: [] });
    expect((await t.graphql(shop.apiKey, '{ earningRules { type } }')).data.earningRules).toEqual([{ type: 'custom' }]);
    // Another shop sees none of them.
    const other = await t.shop('Other');
    expect((await t.graphql(other.apiKey, '{ earningRules { _id } }')).data.earningRules).toEqual([]);
    const foreign = await update({ id: custom.data.earningRuleCreate.earningRule._id, earnPoint: 1 }).then(() =>
      t.graphql(other.apiKey, `mutation($input: EarningRuleUpdateInput!) { earningRuleUpdate(input: $input) { userErrors { code } } }`, { input: { id: custom.data.earningRuleCreate.earningRule._id, earnPoint: 9 } }),
    );
    expect(foreign.data.earningRuleUpdate.userErrors).toEqual([{ code: 'earning_rule_not_found' }]);
  });

  it.each<[string, Record<string, unknown>, string, string[]]>([
    ['earnPoint 0', { type: 'sign_up', name: 'x', earnPoint: 0 }, 'validation_error', ['input', 'earnPoint']],
    ['spent with three decimals in USD', { type: 'place_order', name: 'x', earnPoint: 1, spent: '1.234' }, 'validation_error', ['input', 'spent']],
    ['spent of 0', { type: 'place_order', name: 'x', earnPoint: 1, spent: '0' }, 'validation_error', ['input', 'spent']],
    ['place_order without spent', { type: 'place_order', name: 'x', earnPoint: 1 }, 'validation_error', ['input', 'spent']],
    ['a place_order field on a sign_up rule', { type: 'sign_up', name: 'x', earnPoint: 1, spent: '1.00' }, 'validation_error', ['input', 'spent']],
    ['custom without its action', { type: 'custom', name: 'x', earnPoint: 1, actionLimit: 'once' }, 'validation_error', ['input', 'action']],
    ['a custom field on a birthday rule', { type: 'birthday', name: 'x', earnPoint: 1, action: 'x' }, 'validation_error', ['input', 'action']],
    ['an action name with spaces', { type: 'custom', name: 'x', earnPoint: 1, action: 'left a review', actionLimit: 'once' }, 'validation_error', ['input', 'action']],
  ])('refuses %s, changing nothing', async (_name, input, code, field) => {
    const before = (await t.graphql(shop.apiKey, '{ earningRules { _id } }')).data.earningRules;
    const res = await create(input);
    expect(res.data.earningRuleCreate.userErrors[0]).toMatchObject({ code, field });
    expect((await t.graphql(shop.apiKey, '{ earningRules { _id } }')).data.earningRules).toEqual(before);
  });

  it('one active sign_up rule and one custom rule per action', async () => {
    const s = await t.shop('Unique rules');
    expect((await create({ type: 'sign_up', name: 'Welcome', earnPoint: 100 }, s.apiKey)).data.earningRuleCreate.userErrors).toEqual([]);
    const second = await create({ type: 'sign_up', name: 'Welcome again', earnPoint: 100 }, s.apiKey);
    expect(second.data.earningRuleCreate.userErrors[0]).toMatchObject({ code: 'earning_rule_exists' });
    expect((await create({ type: 'sign_up', name: 'Inactive twin', earnPoint: 1, active: false }, s.apiKey)).data.earningRuleCreate.userErrors).toEqual([]);
    await create({ type: 'custom', name: 'Share', earnPoint: 5, action: 'share', actionLimit: 'week' }, s.apiKey);
    const twin = await create({ type: 'custom', name: 'Share twice', earnPoint: 5, action: 'share', actionLimit: 'once' }, s.apiKey);
    expect(twin.data.earningRuleCreate.userErrors[0]).toMatchObject({ code: 'action_exists', field: ['input', 'action'] });
  });

  it('a shop\'s currency is fixed once it has place_order rules', async () => {
    const s = await t.shop('Yen shop');
    const settings = (input: Record<string, unknown>) =>
      t.graphql(s.apiKey, 'mutation($input: ShopSettingsInput!) { shopSettingsUpdate(input: $input) { settings { currency } userErrors { code } } }', { input });
    expect((await settings({ currency: 'jpy' })).data.shopSettingsUpdate).toEqual({ settings: { currency: 'JPY' }, userErrors: [] });
    expect((await create({ type: 'place_order', name: '1 pt per ¥100', earnPoint: 1, spent: '100' }, s.apiKey)).data.earningRuleCreate.earningRule.spent).toBe('100');
    expect((await settings({ currency: 'USD' })).data.shopSettingsUpdate.userErrors).toEqual([{ code: 'currency_in_use' }]);
    expect((await settings({ timezone: 'Mars/Olympus' })).data.shopSettingsUpdate.userErrors).toEqual([{ code: 'validation_error' }]);
  });
});

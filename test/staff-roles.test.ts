import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { roleAllows, STAFF_ROLES, type StaffRole } from '../src/domain/staff/index.js';
import { LEAST_ROLE } from '../src/graphql/roles.js';
import { schema } from '../src/graphql/schema.js';
import { startTestApp, type TestApp } from './helpers.js';
import { member, type StaffClient, staffGraphql } from './staff-helpers.js';

describe('the role table', () => {
  const rootFields = [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()].flatMap((type) =>
    Object.keys(type!.getFields()).map((field) => `${type!.name}.${field}`),
  );

  it('names every root field of the admin schema, and nothing else', () => {
    expect(rootFields.filter((f) => !(f in LEAST_ROLE)), 'root fields without a least role').toEqual([]);
    expect(Object.keys(LEAST_ROLE).filter((f) => !rootFields.includes(f)), 'rows for fields that do not exist').toEqual([]);
  });

  it('is the table in docs/console.md, row for row', () => {
    const doc = readFileSync(path.resolve(import.meta.dirname, '../docs/console.md'), 'utf8');
    const rows = [...doc.matchAll(/^\| `((?:Query|Mutation|Subscription)\.\w+)` \| (\w+) \|$/gm)].map((m) => [m[1], m[2]]);
    expect(Object.fromEntries(rows)).toEqual(LEAST_ROLE);
    expect(rows.length).toBe(Object.keys(LEAST_ROLE).length);
  });

  it('keeps keys and people to owners, and the program from support', () => {
    expect(LEAST_ROLE['Query.apiKeys']).toBe('owner');
    expect(LEAST_ROLE['Query.staffMembers']).toBe('owner');
    expect(LEAST_ROLE['Mutation.apiKeyCreate']).toBe('owner');
    expect(LEAST_ROLE['Mutation.staffInvite']).toBe('owner');
    expect(LEAST_ROLE['Mutation.earningRuleCreate']).toBe('program_manager');
    expect(LEAST_ROLE['Mutation.pointsAdd']).toBe('support');
    expect(Object.entries(LEAST_ROLE).filter(([f, r]) => f.startsWith('Mutation.') && r === 'viewer')).toEqual([['Mutation.staffPasswordChange', 'viewer']]);
  });
});

describe('each role over /graphql', () => {
  let t: TestApp;
  let shopId: string;
  let apiKey: string;
  const people = {} as Record<StaffRole, StaffClient>;

  beforeAll(async () => {
    t = await startTestApp();
    ({ shopId, apiKey } = await t.shop());
    await t.customer(shopId, 'c-1', 100);
    for (const role of STAFF_ROLES) people[role] = await member(t, shopId, `${role}@example.com`, role);
  });
  afterAll(() => t?.stop());

  const key = async (query: string) => (await t.graphql(apiKey, query)).data;
  /** Representative operations: what each needs, what it is, and what it changes (read with the API key). */
  const OPERATIONS: Array<{ field: string; query: string; effect?: () => Promise<unknown> }> = [
    { field: 'Query.customers', query: `{ customers(first: 5) { edges { node { email points } } } }` },
    { field: 'Query.shop', query: `{ shop { id settings { pendingDays } } }` },
    {
      field: 'Mutation.pointsAdd',
      query: `mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: 7, note: "goodwill" }) { userErrors { code } } }`,
      effect: async () => (await key(`{ customer(identifier: "c-1") { points } }`)).customer.points,
    },
    {
      field: 'Mutation.shopSettingsUpdate',
      query: `mutation { shopSettingsUpdate(input: { codeWarningDays: 3 }) { userErrors { code } } }`,
      effect: async () => (await key(`{ shop { settings { codeWarningDays } } }`)).shop.settings.codeWarningDays,
    },
    { field: 'Query.apiKeys', query: `{ apiKeys { prefix current } }` },
    {
      field: 'Mutation.apiKeyCreate',
      query: `mutation { apiKeyCreate { apiKey { prefix } userErrors { code } } }`,
      effect: async () => (await key(`{ apiKeys { prefix } }`)).apiKeys.length,
    },
    { field: 'Query.staffMembers', query: `{ staffMembers { email role } }` },
  ];

  for (const role of STAFF_ROLES) {
    it(`${role}: allowed exactly what the table lets it, and a refusal changes nothing`, async () => {
      for (const op of OPERATIONS) {
        const allowed = roleAllows(role, LEAST_ROLE[op.field]!);
        const before = await op.effect?.();
        const res = await staffGraphql(t, people[role], op.query);
        if (allowed) {
          expect(res.status, `${role} ${op.field}: ${JSON.stringify(res.body)}`).toBe(200);
          expect(res.body.errors, `${role} ${op.field}`).toBeUndefined();
          if (op.effect && op.field !== 'Mutation.shopSettingsUpdate') expect(await op.effect(), `${role} ${op.field} did its change`).not.toEqual(before);
        } else {
          expect(res.status, `${role} ${op.field}`).toBe(403);
          expect(res.body.errors[0].extensions.code).toBe('forbidden');
          expect(res.body.errors[0].message).toContain(`your role (${role})`);
          expect(res.body.data ?? null).toBeNull();
          if (op.effect) expect(await op.effect(), `${role} ${op.field} changed nothing`).toEqual(before);
        }
      }
    });
  }

  it('the settings change of a program manager is made; a support person\'s is not', async () => {
    const SET = (days: number) => `mutation { shopSettingsUpdate(input: { codeWarningDays: ${days} }) { settings { codeWarningDays } userErrors { code } } }`;
    expect((await staffGraphql(t, people.program_manager, SET(9))).body.data.shopSettingsUpdate.settings.codeWarningDays).toBe(9);
    expect((await staffGraphql(t, people.support, SET(4))).status).toBe(403);
    expect((await key(`{ shop { settings { codeWarningDays } } }`)).shop.settings.codeWarningDays).toBe(9);
  });

  it('aliases, fragments and a mix of fields do not hide a refused one: nothing of the operation runs', async () => {
    const sneaky = `query { a: shop { id } ...F } fragment F on Query { b: apiKeys { prefix } }`;
    const res = await staffGraphql(t, people.program_manager, sneaky);
    expect(res.status).toBe(403);
    expect(res.body.errors[0].message).toContain('apiKeys');
    expect(res.body.data ?? null).toBeNull();

    const before = (await key(`{ customer(identifier: "c-1") { points } }`)).customer.points;
    const mixed = `mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: 1 }) { userErrors { code } } apiKeyCreate { userErrors { code } } }`;
    expect((await staffGraphql(t, people.support, mixed)).status).toBe(403);
    expect((await key(`{ customer(identifier: "c-1") { points } }`)).customer.points).toBe(before);
  });

  it('introspection is open to every role; API keys keep every right', async () => {
    const intro = await staffGraphql(t, people.viewer, `{ __typename __schema { queryType { name } } }`);
    expect(intro.body.data.__schema.queryType.name).toBe('Query');
    const listed = await key(`{ staffMembers { email role } apiKeys { prefix current } }`);
    expect(listed.staffMembers.map((m: any) => m.role)).toEqual(['owner', 'program_manager', 'support', 'viewer']);
    expect(listed.apiKeys.some((k: any) => k.current)).toBe(true);
  });

  it('a role change applies to the open session\'s next operation', async () => {
    const extra = await member(t, shopId, 'promoted@example.com', 'viewer');
    const ADD = `mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: 1, note: "apology" }) { userErrors { code } } }`;
    expect((await staffGraphql(t, extra, ADD)).status).toBe(403);
    const promoted = await staffGraphql(t, people.owner, `mutation($input: StaffRoleUpdateInput!) { staffRoleUpdate(input: $input) { member { role } } }`, {
      input: { staffId: extra.body.staff.id, role: 'support' },
    });
    expect(promoted.body.data.staffRoleUpdate.member.role).toBe('support');
    expect((await staffGraphql(t, extra, ADD)).body.data.pointsAdd.userErrors).toEqual([]);
  });

  it('a person adjusts points with a reason; a machine may go without', async () => {
    const read = async () => (await key(`{ customer(identifier: "c-1") { points } }`)).customer.points;
    const before = await read();
    for (const field of ['pointsAdd', 'pointsSubtract', 'pointsSet']) {
      const res = await staffGraphql(t, people.support, `mutation { ${field}(input: { customerIdentifier: "c-1", amount: 1, note: "  " }) { userErrors { code field } } }`);
      expect(res.body.data[field].userErrors).toEqual([{ code: 'validation_error', field: ['input', 'note'] }]);
    }
    expect(await read()).toBe(before);
    expect((await key(`mutation { pointsAdd(input: { customerIdentifier: "c-1", amount: 1 }) { userErrors { code } } }`)).pointsAdd.userErrors).toEqual([]);
    expect(await read()).toBe(before + 1);
  });

  it('a person\'s session is for its own shop only', async () => {
    const other = await t.shop('Other shop');
    await t.customer(other.shopId, 'c-other', 50);
    const res = await staffGraphql(t, people.owner, `{ customer(identifier: "c-other") { points } shop { id } }`);
    expect(res.body.data).toEqual({ customer: null, shop: { id: shopId } });
  });
});

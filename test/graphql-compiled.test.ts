import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { COMPILE_AFTER_RUNS } from '../src/graphql/yoga.js';
import { startTestApp, type TestApp } from './helpers.js';

// The real graphql-jit, watched: which documents it compiles.
const compiled = vi.hoisted(() => [] as string[]);
vi.mock('graphql-jit', async (importOriginal) => {
  const jit = await importOriginal<typeof import('graphql-jit')>();
  return {
    ...jit,
    compileQuery: (...args: Parameters<typeof jit.compileQuery>) => {
      compiled.push(args[1].loc?.source.body ?? '');
      return jit.compileQuery(...args);
    },
  };
});

let t: TestApp;
let apiKey: string;

beforeAll(async () => {
  t = await startTestApp();
  const shop = await t.shop();
  apiKey = shop.apiKey;
  await t.customer(shop.shopId, 'c-1', 50);
  await t.customer(shop.shopId, 'c-2', 5);
  for (const amount of [3, 4, 5]) await t.post('/rest-api/v1/points/add', { customerIdentifier: 'c-2', amount }, apiKey);
});
afterAll(() => t?.stop());

type Operation = { query: string; variables?: Record<string, unknown> };

// Each answers the same every time it runs (no new ids or times), so runs before and after compiling compare whole.
const operations: Record<string, Operation> = {
  'nested connections, fragments, aliases, directives': {
    query: `query C($id: String!, $first: Int = 2, $withEmail: Boolean!) {
      me: customer(identifier: $id) { ...Who points activities(first: $first) { edges { cursor node { _id type oldPoints newPoints createdAt } } pageInfo { hasNextPage endCursor } } }
      nobody: customer(identifier: "nobody") { points }
      customers(first: 5, emailPrefix: "c-") { edges { node { shopifyCustomerId email @include(if: $withEmail) points } } }
      __typename
    }
    fragment Who on Customer { shopifyCustomerId email @skip(if: false) }`,
    variables: { id: 'c-2', withEmail: true },
  },
  'the shop and its settings': { query: '{ shop { name settings { __typename } } pointsRedemptions(first: 3) { edges { node { _id } } } }' },
  'a mutation that sets the same balance': {
    query: 'mutation { pointsSet(input: { customerIdentifier: "c-1", amount: 50 }) { activity { type oldPoints newPoints } customer { points } userErrors { code field message } } }',
  },
  'userErrors: no such customer': {
    query: 'mutation($input: PointsChangeInput!) { pointsAdd(input: $input) { activity { _id } userErrors { code field message } } }',
    variables: { input: { customerIdentifier: 'nobody', amount: 1 } },
  },
  'userErrors: insufficient points': {
    query: 'mutation { pointsSubtract(input: { customerIdentifier: "c-1", amount: 1000 }) { activity { _id } customer { points } userErrors { code field message } } }',
  },
  'an argument the validation refuses': {
    query: 'mutation($input: PointsChangeInput!) { pointsAdd(input: $input) { activity { _id } userErrors { code field message } } }',
    variables: { input: { customerIdentifier: 'c-1', amount: -1 } },
  },
  'variables of the wrong type': {
    query: 'mutation($input: PointsChangeInput!) { pointsAdd(input: $input) { activity { _id } } }',
    variables: { input: { customerIdentifier: 'c-1', amount: 'ten' } },
  },
  'a missing variable': { query: 'query($id: String!) { customer(identifier: $id) { points } }' },
};

async function run(op: Operation) {
  const res = await t.post('/graphql', op, apiKey);
  return { status: res.status, body: await res.json() };
}

describe('compiled operations (graphql-jit)', () => {
  for (const [name, op] of Object.entries(operations)) {
    it(`answers ${name} the same before and after the document is compiled`, async () => {
      const first = await run(op);
      for (let i = 1; i < COMPILE_AFTER_RUNS + 3; i++) expect(await run(op)).toEqual(first);
      // Compiled once, when it came back after COMPILE_AFTER_RUNS runs (variables that do not fit are still answered by the general executor).
      expect(compiled.filter((source) => source === op.query)).toHaveLength(1);
    });
  }

  it('answers variables that do not fit a compiled document as the general executor does (400, its wording)', async () => {
    const query = 'mutation($input: PointsChangeInput!) { pointsAdd(input: $input) { activity { _id } userErrors { code } } }';
    const bad = [{ amount: 'ten' }, { amount: 1.5 }, { amount: 2 ** 40 }, { amount: 1, extra: 1 }, {}].map((input) => ({
      query,
      variables: { input: { customerIdentifier: 'nobody', ...input } },
    }));
    const before = await Promise.all(bad.map(run));
    for (const answer of before) expect(answer.status).toBe(400);
    for (let i = 0; i <= COMPILE_AFTER_RUNS; i++) expect((await run({ query, variables: { input: { customerIdentifier: 'nobody', amount: 1 } } })).status).toBe(200);
    expect(compiled).toContain(query);
    expect(await Promise.all(bad.map(run))).toEqual(before);
  });

  it('runs a one-off document without compiling it', async () => {
    const query = '{ customer(identifier: "c-1") { points email } }';
    for (let i = 0; i < COMPILE_AFTER_RUNS; i++) expect((await run({ query })).body.data.customer.points).toBe(50);
    expect(compiled).not.toContain(query);
  });

  it('gives the same balances through compiled mutations under concurrency', async () => {
    const query = 'mutation($input: PointsChangeInput!) { pointsSubtract(input: $input) { activity { newPoints } userErrors { code } } }';
    const results = await Promise.all(
      Array.from({ length: 30 }, () => run({ query, variables: { input: { customerIdentifier: 'c-1', amount: 2 } } })),
    );
    const ok = results.filter((r) => r.body.data.pointsSubtract.activity).length;
    expect(ok).toBe(25); // 50 points, 2 at a time
    expect(results.filter((r) => r.body.data.pointsSubtract.userErrors[0]?.code === 'insufficient_points')).toHaveLength(5);
    expect(compiled).toContain(query);
    const balance = await run({ query: '{ customer(identifier: "c-1") { points activities(first: 1) { edges { node { newPoints } } } } }' });
    expect(balance.body.data.customer).toEqual({ points: 0, activities: { edges: [{ node: { newPoints: 0 } }] } });
  });
});

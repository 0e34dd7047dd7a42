import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from './helpers.js';

// The HTTP status of a GraphQL answer, on both faces and whatever the client accepts
// (docs/storefront.md "Errors", docs/api.md "GraphQL"): a request refused before anything ran is a
// 400; an operation that ran is a 200, its refusals in `userErrors` or as a field's error.

const ORIGIN = 'https://shop.example.com';
// No Accept (curl), a browser's fetch, the legacy and the spec's JSON types, and SSE.
const ACCEPTS = [undefined, '*/*', 'application/json', 'application/graphql-response+json', 'text/event-stream'];

let t: TestApp;
let apiKey: string;
let token: string;
let freeProduct: string;

beforeAll(async () => {
  t = await startTestApp();
  ({ apiKey } = await t.shop('Statuses shop'));
  const setup = await t.graphql(
    apiKey,
    `mutation($o: [String!]) {
      s: shopSettingsUpdate(input: { storefrontOrigins: $o }) { userErrors { code } }
      c: customerUpsert(input: { shopifyCustomerId: "s-1", email: "s-1@example.com" }) { userErrors { code } }
      r: pointsRedemptionCreate(input: { name: "Free tote", type: free_product, rewardValue: 10, applyProductOption: products, applyVariants: ["tote-red"] }) { pointsRedemption { _id } userErrors { code } }
    }`,
    { o: [ORIGIN] },
  );
  expect(JSON.stringify(setup.data)).not.toContain('"code"');
  freeProduct = setup.data.r.pointsRedemption._id;
  expect((await t.post('/rest-api/v1/points/add', { customerIdentifier: 's-1', amount: 100 }, apiKey)).status).toBe(200);
  token = (await t.graphql(apiKey, 'mutation { customerAccessTokenCreate(input: { customerIdentifier: "s-1" }) { accessToken } }')).data.customerAccessTokenCreate.accessToken;
});

afterAll(async () => {
  await t?.stop();
});

type Face = { path: string; credential: () => string; query: string; badField: string; badArgument: string; badVariable: string; refusedArgument: string; wrap: (selection: string) => string };
const FACES: Record<string, Face> = {
  storefront: {
    path: '/storefront/graphql',
    credential: () => token,
    query: '{ me { points } }',
    badField: '{ me { pointz } }',
    badArgument: '{ rewards(first: "ten") { edges { node { _id } } } }',
    badVariable: 'query($n: Int) { rewards(first: $n) { edges { node { _id } } } }',
    refusedArgument: '{ rewards(first: 1000) { edges { node { _id } } } }',
    wrap: (selection) => `{ me { ${selection} } }`,
  },
  admin: {
    path: '/graphql',
    credential: () => apiKey,
    query: '{ customer(identifier: "s-1") { points } }',
    badField: '{ customer(identifier: "s-1") { pointz } }',
    badArgument: '{ customers(first: "ten") { edges { node { _id } } } }',
    badVariable: 'query($n: Int) { customers(first: $n) { edges { node { _id } } } }',
    refusedArgument: '{ customers(first: 1000) { edges { node { _id } } } }',
    wrap: (selection) => `{ customer(identifier: "s-1") { ${selection} } }`,
  },
};

/** One request as a page (with Origin, the storefront) or a server (without) sends it; the status and the first error's code. */
async function send(face: Face, body: unknown, accept: string | undefined, origin?: string) {
  const res = await t.post(face.path, typeof body === 'string' ? body : JSON.stringify(body), face.credential(), {
    ...(accept ? { accept } : {}),
    ...(origin ? { origin } : {}),
  });
  const text = await res.text();
  // An SSE answer carries its result in a `data:` line.
  const json = JSON.parse(res.headers.get('content-type')?.startsWith('text/event-stream') ? /^data: (.+)$/m.exec(text)![1]! : text);
  return { status: res.status, code: json.errors?.[0]?.extensions?.code ?? json.error, json, cors: res.headers.get('access-control-allow-origin') };
}

describe.each(Object.entries(FACES))('%s: statuses for every Accept', (name, face) => {
  const origins = name === 'storefront' ? [undefined, ORIGIN] : [undefined];

  it('a request refused before anything ran is a 400', async () => {
    const refused: Array<[string, unknown, string | undefined]> = [
      ['a syntax error', { query: '{ me { points }' }, 'GRAPHQL_PARSE_FAILED'],
      ['an unknown field', { query: face.badField }, 'GRAPHQL_VALIDATION_FAILED'],
      ['an argument of the wrong type', { query: face.badArgument }, 'GRAPHQL_VALIDATION_FAILED'],
      ['a variable that does not fit its type', { query: face.badVariable, variables: { n: 'ten' } }, undefined],
      ['a document over a limit', { query: face.wrap(Array.from({ length: 16 }, (_, i) => `a${i}: points`).join(' ')) }, 'max_aliases'],
      ['no query', { variables: {} }, 'BAD_REQUEST'],
    ];
    for (const origin of origins) {
      for (const accept of ACCEPTS) {
        for (const [what, body, code] of refused) {
          // A page can read why: the answer carries CORS headers for its origin.
          const cors = origin ?? null;
          expect(await send(face, body, accept, origin), `${what}, Accept ${accept}, Origin ${origin}`).toMatchObject({ status: 400, code, cors });
        }
      }
    }
  });

  it('an operation that ran is a 200, with its data or the error of the field that refused its argument', async () => {
    for (const origin of origins) {
      for (const accept of ACCEPTS.filter((a) => a !== 'text/event-stream')) {
        const ok = await send(face, { query: face.query }, accept, origin);
        expect(ok.status).toBe(200);
        expect(ok.json.errors).toBeUndefined();
        const refused = await send(face, { query: face.refusedArgument }, accept, origin);
        expect(refused, `Accept ${accept}, Origin ${origin}`).toMatchObject({ status: 200, code: 'validation_error', json: { data: null } });
        expect(refused.json.errors[0].extensions.details).toEqual([{ path: 'first', message: 'out of range' }]);
      }
    }
  });
});

describe('storefront redeem: refused input is a userError in a 200', () => {
  it('a free product without its variant, then with it', async () => {
    const face = FACES.storefront!;
    const redeem = 'mutation($input: RedeemInput!) { redeem(input: $input) { discountCode { variantId } userErrors { code field message } } }';
    for (const accept of [undefined, '*/*', 'application/graphql-response+json']) {
      const refused = await send(face, { query: redeem, variables: { input: { rewardId: freeProduct, pointsAmount: 10 } } }, accept, ORIGIN);
      expect(refused.status).toBe(200);
      expect(refused.json.data.redeem).toEqual({ discountCode: null, userErrors: [{ code: 'validation_error', field: ['input', 'variantId'], message: 'required' }] });
    }
    const redeemed = await send(face, { query: redeem, variables: { input: { rewardId: freeProduct, pointsAmount: 10, variantId: 'tote-red' } } }, '*/*', ORIGIN);
    expect(redeemed.status).toBe(200);
    expect(redeemed.json.data.redeem).toEqual({ discountCode: { variantId: 'tote-red' }, userErrors: [] });
  });
});

// The Shopify Admin API stand-in must be as strict as Shopify: these tests prove it refuses what
// Shopify refuses, so the service's own tests against it mean something.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CLIENT_CREDENTIALS_EXPIRES_IN,
  createShopifyAdminStandIn,
  moneyBag,
  type ShopifyAdminStandIn,
  type ShopifyStore,
} from './support/shopify-admin.ts';

const DOMAIN = 'shop-a.myshopify.com';
let shopify: ShopifyAdminStandIn;
let shop: ShopifyStore;
let token: string;

interface GraphqlBody {
  data?: Record<string, any> | null;
  errors?: { message: string; locations?: unknown; path?: string[]; extensions?: Record<string, any> }[];
  extensions?: { cost: { requestedQueryCost: number; actualQueryCost: number | null; throttleStatus: Record<string, number> } };
}

async function gql(query: string, variables?: Record<string, unknown>, options: { token?: string; domain?: string } = {}) {
  const res = await fetch(shopify.adminUrl(options.domain ?? DOMAIN), {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-shopify-access-token': options.token ?? token },
    body: JSON.stringify({ query, variables }),
  });
  return { status: res.status, body: (await res.json()) as GraphqlBody };
}

const CREATE_BASIC = /* GraphQL */ `
  mutation Create($input: DiscountCodeBasicInput!) {
    discountCodeBasicCreate(basicCodeDiscount: $input) {
      codeDiscountNode {
        id
        codeDiscount {
          __typename
          ... on DiscountCodeBasic {
            title
            status
            endsAt
            usageLimit
            codes(first: 1) { nodes { code } }
            customerGets { value { ... on DiscountAmount { amount { amount currencyCode } } } }
          }
        }
      }
      userErrors { field code message }
    }
  }
`;

const basicInput = (code: string) => ({
  title: `Reward ${code}`,
  code,
  startsAt: '2026-11-01T00:00:00Z',
  endsAt: '2027-01-01T00:00:00Z',
  usageLimit: 1,
  appliesOncePerCustomer: true,
  context: { customers: { add: ['gid://shopify/Customer/9007199254740995'] } },
  customerGets: { value: { discountAmount: { amount: '5.00', appliesOnEachItem: false } }, items: { all: true } },
  combinesWith: { orderDiscounts: false, productDiscounts: true, shippingDiscounts: true },
});

beforeAll(async () => {
  shopify = await createShopifyAdminStandIn();
  shop = shopify.store(DOMAIN);
  token = shop.addAccessToken(['write_discounts', 'read_orders', 'read_customers', 'read_products']);
  shopify.setClock(Date.parse('2026-11-27T12:00:00Z'));
});

afterAll(async () => {
  await shopify.close();
});

describe('strictness', () => {
  it('answers a misspelt field with Shopify’s validation error, HTTP 200, and runs nothing', async () => {
    const before = shop.bucket.status().currentlyAvailable;
    const { status, body } = await gql('query Shop { shop { nmae } }');
    expect(status).toBe(200);
    expect(body.data).toBeUndefined();
    expect(body.errors).toEqual([
      {
        message: "Field 'nmae' doesn't exist on type 'Shop'",
        locations: [{ line: 1, column: 21 }],
        path: ['query Shop', 'shop', 'nmae'],
        extensions: { code: 'undefinedField', typeName: 'Shop', fieldName: 'nmae' },
      },
    ]);
    expect(shop.bucket.status().currentlyAvailable).toBe(before);
  });

  it('refuses a variable of the wrong type', async () => {
    const { status, body } = await gql('query ($first: Int!) { products(first: $first) { nodes { id } } }', { first: 'ten' });
    expect(status).toBe(200);
    expect(body.errors).toHaveLength(1);
    expect(body.errors![0]!.message).toBe('Variable $first of type Int! was provided invalid value');
    expect(body.errors![0]!.extensions).toMatchObject({ code: 'INVALID_VARIABLE', value: 'ten' });
  });

  it('refuses a wrong value deep inside an input variable, naming where', async () => {
    const input = { ...basicInput('X'), customerGets: { value: { percentage: 'half' }, items: { all: true } } };
    const { body } = await gql(CREATE_BASIC, { input });
    expect(body.errors).toEqual([
      {
        message: 'Variable $input of type DiscountCodeBasicInput! was provided invalid value for customerGets.value.percentage',
        locations: [{ line: 2, column: 19 }],
        extensions: {
          code: 'INVALID_VARIABLE',
          value: input,
          problems: [{ path: ['customerGets', 'value', 'percentage'], explanation: 'Float cannot represent non numeric value: "half"' }],
        },
      },
    ]);
    expect(shop.discountByCode('X')).toBeUndefined();
  });

  it('refuses a variable used where its type does not fit', async () => {
    const { body } = await gql('query ($id: String!) { product(id: $id) { id } }');
    expect(body.errors![0]!.extensions!.code).toBe('variableMismatch');
  });

  it('answers 404 for another API version, an unknown store, and 401 without a valid token', async () => {
    const post = (url: string, headers: Record<string, string> = { 'x-shopify-access-token': token }) =>
      fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: '{"query":"{ shop { name } }"}' });
    const oldVersion = await post(shopify.adminUrl(DOMAIN).replace('2026-07', '2025-10'));
    expect(oldVersion.status).toBe(404);
    expect(await oldVersion.json()).toEqual({ errors: 'Not Found' });
    expect((await post(shopify.adminUrl('nobody.myshopify.com'))).status).toBe(404);
    const noToken = await post(shopify.adminUrl(DOMAIN), {});
    expect(noToken.status).toBe(401);
    expect(await noToken.json()).toEqual({ errors: '[API] Invalid API key or access token (unrecognized login or wrong password)' });
    expect((await post(shopify.adminUrl(DOMAIN), { 'x-shopify-access-token': 'shpat_wrong' })).status).toBe(401);
  });

  it('routes by Host header as well as by path prefix', async () => {
    // fetch may not set Host, so a plain request does.
    const body = await new Promise<string>((resolve, reject) => {
      const req = request(`${shopify.url}/admin/api/2026-07/graphql.json`, {
        method: 'POST',
        headers: { host: `${DOMAIN}:443`, 'content-type': 'application/json', 'x-shopify-access-token': token },
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (chunk: Buffer) => (text += chunk.toString()));
        res.on('end', () => resolve(text));
      });
      req.on('error', reject);
      req.end(JSON.stringify({ query: '{ shop { myshopifyDomain } }' }));
    });
    expect((JSON.parse(body) as GraphqlBody).data).toEqual({ shop: { myshopifyDomain: DOMAIN } });
  });

  it('fails loudly on a root field it does not implement', async () => {
    const { body } = await gql('{ draftOrders(first: 1) { nodes { id } } }');
    expect(body.errors![0]).toMatchObject({
      message: 'Shopify stand-in: QueryRoot.draftOrders is not implemented',
      path: ['draftOrders'],
      extensions: { code: 'STAND_IN_NOT_IMPLEMENTED' },
    });
  });

  it('denies fields the token’s scopes do not cover, naming the scope', async () => {
    const readOnly = shop.addAccessToken(['read_products']);
    const { body } = await gql(CREATE_BASIC, { input: basicInput('NOPE') }, { token: readOnly });
    expect(body.data).toEqual({ discountCodeBasicCreate: null });
    expect(body.errors![0]).toMatchObject({
      message: 'Access denied for discountCodeBasicCreate field. Required access: `write_discounts` access scope.',
      extensions: { code: 'ACCESS_DENIED' },
    });
    expect(shop.discountByCode('NOPE')).toBeUndefined();
  });

  it('reports the token’s scopes and the shop', async () => {
    const { body } = await gql('{ currentAppInstallation { accessScopes { handle } } shop { name myshopifyDomain currencyCode } }');
    expect(body.data).toEqual({
      currentAppInstallation: { accessScopes: ['write_discounts', 'read_orders', 'read_customers', 'read_products'].map((handle) => ({ handle })) },
      shop: { name: 'shop-a', myshopifyDomain: DOMAIN, currencyCode: 'USD' },
    });
  });
});

describe('cost bucket', () => {
  it('charges by Shopify’s rules, throttles when the bucket lacks the cost, and recovers as the clock moves', async () => {
    const store = shopify.store('throttled.myshopify.com', { maximumAvailable: 100, restoreRate: 10 });
    const own = store.addAccessToken(['read_products']);
    const query = '{ products(first: 10) { edges { node { id title } } } }';
    // A connection costs 2 + first × node (1): 12 requested; nothing seeded, so 2 actually.
    const first = await gql(query, undefined, { token: own, domain: 'throttled.myshopify.com' });
    expect(first.body.extensions!.cost).toEqual({
      requestedQueryCost: 12,
      actualQueryCost: 2,
      throttleStatus: { maximumAvailable: 100, currentlyAvailable: 98, restoreRate: 10 },
    });
    store.bucket.set(5);
    const throttled = await gql(query, undefined, { token: own, domain: 'throttled.myshopify.com' });
    expect(throttled.status).toBe(200);
    expect(throttled.body).toEqual({
      errors: [{ message: 'Throttled', extensions: { code: 'THROTTLED', documentation: 'https://shopify.dev/api/usage/rate-limits' } }],
      extensions: {
        cost: { requestedQueryCost: 12, actualQueryCost: null, throttleStatus: { maximumAvailable: 100, currentlyAvailable: 5, restoreRate: 10 } },
      },
    });
    shopify.advanceClock(700); // 5 + 0.7 s × 10 = 12 points
    const recovered = await gql(query, undefined, { token: own, domain: 'throttled.myshopify.com' });
    expect(recovered.body.errors).toBeUndefined();
    expect(recovered.body.extensions!.cost.throttleStatus.currentlyAvailable).toBe(10);
  });

  it('charges a mutation 10 and refuses a query over the single-query limit', async () => {
    const mutation = await gql(CREATE_BASIC, { input: basicInput('COST-1') });
    expect(mutation.body.extensions!.cost.requestedQueryCost).toBe(10);
    const huge = await gql('{ products(first: 250) { nodes { id collections(first: 250) { nodes { id } } } } }');
    expect(huge.body.errors![0]!.extensions).toMatchObject({ code: 'MAX_COST_EXCEEDED', maxCost: 1000 });
  });
});

describe('client-credentials grant', () => {
  it('exchanges a client id and secret for a token that lapses after 86399 s', async () => {
    const app = shop.addClientApp({ scopes: ['write_discounts', 'read_orders'] });
    const grant = (secret: string, asJson: boolean) =>
      fetch(`${shopify.url}/stores/${DOMAIN}/admin/oauth/access_token`, {
        method: 'POST',
        headers: { 'content-type': asJson ? 'application/json' : 'application/x-www-form-urlencoded' },
        body: asJson
          ? JSON.stringify({ client_id: app.clientId, client_secret: secret, grant_type: 'client_credentials' })
          : new URLSearchParams({ client_id: app.clientId, client_secret: secret, grant_type: 'client_credentials' }).toString(),
      });
    const wrong = await grant('shpss_wrong', false);
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toMatchObject({ error: 'invalid_client' });

    const ok = await grant(app.clientSecret, false);
    expect(ok.status).toBe(200);
    const issued = (await ok.json()) as { access_token: string; scope: string; expires_in: number };
    expect(issued).toEqual({ access_token: expect.stringMatching(/^shpat_/), scope: 'write_discounts,read_orders', expires_in: 86399 });
    expect((await (await grant(app.clientSecret, true)).json()) as object).toHaveProperty('access_token');

    const scopes = '{ currentAppInstallation { accessScopes { handle } } }';
    expect((await gql(scopes, undefined, { token: issued.access_token })).body.data).toEqual({
      currentAppInstallation: { accessScopes: [{ handle: 'write_discounts' }, { handle: 'read_orders' }] },
    });
    shopify.advanceClock(CLIENT_CREDENTIALS_EXPIRES_IN * 1000);
    expect((await gql(scopes, undefined, { token: issued.access_token })).status).toBe(401);
    expect(JSON.stringify(shop.calls)).not.toContain(app.clientSecret);
  });
});

describe('discounts', () => {
  it('creates a code, finds it by code, refuses a duplicate as TAKEN, deactivates and deletes it', async () => {
    const input = basicInput('SAVE-5');
    const created = await gql(CREATE_BASIC, { input });
    const node = created.body.data!.discountCodeBasicCreate.codeDiscountNode;
    expect(created.body.data!.discountCodeBasicCreate.userErrors).toEqual([]);
    expect(node.id).toMatch(/^gid:\/\/shopify\/DiscountCodeNode\/\d{16,}$/);
    expect(node.codeDiscount).toEqual({
      __typename: 'DiscountCodeBasic',
      title: 'Reward SAVE-5',
      status: 'ACTIVE',
      endsAt: '2027-01-01T00:00:00Z',
      usageLimit: 1,
      codes: { nodes: [{ code: 'SAVE-5' }] },
      customerGets: { value: { amount: { amount: '5.00', currencyCode: 'USD' } } },
    });
    expect(shop.discountByCode('save-5')!.input).toEqual(input);

    const found = await gql('query ($code: String!) { codeDiscountNodeByCode(code: $code) { id } }', { code: 'save-5' });
    expect(found.body.data).toEqual({ codeDiscountNodeByCode: { id: node.id } });

    const duplicate = await gql(CREATE_BASIC, { input: basicInput('SAVE-5') });
    expect(duplicate.body.data!.discountCodeBasicCreate).toEqual({
      codeDiscountNode: null,
      userErrors: [{ field: ['basicCodeDiscount', 'code'], code: 'TAKEN', message: 'Code must be unique. Please try a different code.' }],
    });

    const deactivated = await gql(
      'mutation ($id: ID!) { discountCodeDeactivate(id: $id) { codeDiscountNode { codeDiscount { ... on DiscountCodeBasic { status } } } userErrors { code } } }',
      { id: node.id },
    );
    expect(deactivated.body.data!.discountCodeDeactivate.codeDiscountNode.codeDiscount.status).toBe('EXPIRED');
    const byId = await gql('query ($id: ID!) { codeDiscountNode(id: $id) { codeDiscount { ... on DiscountCodeBasic { status } } } }', { id: node.id });
    expect(byId.body.data!.codeDiscountNode.codeDiscount.status).toBe('EXPIRED');

    const deleted = await gql('mutation ($id: ID!) { discountCodeDelete(id: $id) { deletedCodeDiscountId userErrors { code } } }', { id: node.id });
    expect(deleted.body.data!.discountCodeDelete).toEqual({ deletedCodeDiscountId: node.id, userErrors: [] });
    expect(shop.discountByCode('SAVE-5')).toBeUndefined();
  });

  it('answers bad input with DiscountErrorCode user errors', async () => {
    const { body } = await gql(CREATE_BASIC, {
      input: { ...basicInput(' '), title: '', endsAt: '2026-10-01T00:00:00Z', customerGets: { value: { percentage: 1.5 }, items: { all: true } } },
    });
    expect(body.data!.discountCodeBasicCreate.userErrors).toEqual([
      { field: ['basicCodeDiscount', 'code'], code: 'BLANK', message: "Code can't be blank" },
      { field: ['basicCodeDiscount', 'title'], code: 'BLANK', message: "Title can't be blank" },
      { field: ['basicCodeDiscount', 'endsAt'], code: 'END_DATE_BEFORE_START_DATE', message: 'Ends at needs to be after starts_at' },
      { field: ['basicCodeDiscount', 'customerGets', 'value', 'percentage'], code: 'VALUE_OUTSIDE_RANGE', message: 'Value must be between 0.0 and 1.0' },
    ]);
  });

  it('creates free-shipping codes', async () => {
    const { body } = await gql(
      `mutation ($input: DiscountCodeFreeShippingInput!) {
        discountCodeFreeShippingCreate(freeShippingCodeDiscount: $input) {
          codeDiscountNode { codeDiscount { __typename ... on DiscountCodeFreeShipping { status appliesOncePerCustomer } } }
          userErrors { code }
        }
      }`,
      { input: { title: 'Free shipping', code: 'SHIP-1', startsAt: '2026-11-01T00:00:00Z', context: { all: 'ALL' }, appliesOncePerCustomer: true } },
    );
    expect(body.data!.discountCodeFreeShippingCreate).toEqual({
      codeDiscountNode: { codeDiscount: { __typename: 'DiscountCodeFreeShipping', status: 'ACTIVE', appliesOncePerCustomer: true } },
      userErrors: [],
    });
  });
});

describe('webhook subscriptions', () => {
  const CREATE = `mutation ($topic: WebhookSubscriptionTopic!, $sub: WebhookSubscriptionInput!) {
    webhookSubscriptionCreate(topic: $topic, webhookSubscription: $sub) {
      webhookSubscription { id topic uri format }
      userErrors { field message }
    }
  }`;

  it('creates, lists by topic, refuses a taken address, and deletes', async () => {
    const uri = 'https://loyalty.example.com/integrations/shopify/webhooks';
    const created = await gql(CREATE, { topic: 'ORDERS_CREATE', sub: { uri, format: 'JSON' } });
    const hook = created.body.data!.webhookSubscriptionCreate.webhookSubscription;
    expect(hook).toMatchObject({ topic: 'ORDERS_CREATE', uri, format: 'JSON' });
    await gql(CREATE, { topic: 'ORDERS_PAID', sub: { uri, format: 'JSON' } });

    const taken = await gql(CREATE, { topic: 'ORDERS_CREATE', sub: { uri, format: 'JSON' } });
    expect(taken.body.data!.webhookSubscriptionCreate).toEqual({
      webhookSubscription: null,
      userErrors: [{ field: ['webhookSubscription', 'uri'], message: 'Address for this topic has already been taken' }],
    });
    const plainHttp = await gql(CREATE, { topic: 'ORDERS_CREATE', sub: { uri: 'http://insecure.example.com/hooks' } });
    expect(plainHttp.body.data!.webhookSubscriptionCreate.userErrors[0].message).toBe('Address protocol http:// is not supported');

    const listed = await gql('{ webhookSubscriptions(first: 10, topics: [ORDERS_CREATE]) { nodes { id topic uri } } }');
    expect(listed.body.data!.webhookSubscriptions.nodes).toEqual([{ id: hook.id, topic: 'ORDERS_CREATE', uri }]);

    const deleted = await gql('mutation ($id: ID!) { webhookSubscriptionDelete(id: $id) { deletedWebhookSubscriptionId userErrors { message } } }', { id: hook.id });
    expect(deleted.body.data!.webhookSubscriptionDelete).toEqual({ deletedWebhookSubscriptionId: hook.id, userErrors: [] });
    expect([...shop.webhooks.values()].map((h) => h.topic)).toEqual(['ORDERS_PAID']);
  });
});

describe('catalogue', () => {
  it('pages products and reads a product’s collections and a collection’s products', async () => {
    const store = shopify.store('catalogue.myshopify.com');
    const own = store.addAccessToken(['read_products']);
    const gifts = store.seedCollection({ title: 'Gift cards' });
    const sale = store.seedCollection({ title: 'Sale' });
    const card = store.seedProduct({ title: 'Gift card', isGiftCard: true, collections: [gifts.id!] });
    const hat = store.seedProduct({ title: 'Hat', collections: [sale.id!, gifts.id!] });
    store.seedProduct({ title: 'Scarf' });
    const on = { token: own, domain: 'catalogue.myshopify.com' };

    const page1 = await gql('{ products(first: 2) { nodes { title } pageInfo { hasNextPage endCursor } } }', undefined, on);
    expect(page1.body.data!.products.nodes).toEqual([{ title: 'Gift card' }, { title: 'Hat' }]);
    expect(page1.body.data!.products.pageInfo.hasNextPage).toBe(true);
    const page2 = await gql('query ($after: String) { products(first: 2, after: $after) { nodes { title } pageInfo { hasNextPage } } }', { after: page1.body.data!.products.pageInfo.endCursor }, on);
    expect(page2.body.data!.products).toEqual({ nodes: [{ title: 'Scarf' }], pageInfo: { hasNextPage: false } });

    const product = await gql('query ($id: ID!) { product(id: $id) { isGiftCard collections(first: 5) { nodes { title } } } }', { id: hat.id }, on);
    expect(product.body.data!.product).toEqual({ isGiftCard: false, collections: { nodes: [{ title: 'Sale' }, { title: 'Gift cards' }] } });
    const collection = await gql('query ($id: ID!) { collection(id: $id) { products(first: 5) { nodes { id } } } }', { id: gifts.id }, on);
    expect(collection.body.data!.collection.products.nodes).toEqual([{ id: card.id }, { id: hat.id }]);
    const gift = await gql('{ products(first: 5, query: "gift_card:true") { nodes { title } } }', undefined, on);
    expect(gift.body.data!.products.nodes).toEqual([{ title: 'Gift card' }]);
    const unpaged = await gql('{ collections { nodes { id } } }', undefined, on);
    expect(unpaged.body.errors![0]!.message).toBe('you must provide one of first or last');
  });
});

describe('bulk operations', () => {
  it('runs a bulk query to a JSONL file with nested lines carrying __parentId', async () => {
    const store = shopify.store('bulk.myshopify.com');
    const own = store.addAccessToken(['read_customers', 'read_orders']);
    const ann = store.seedCustomer({ email: 'ann@example.com', firstName: 'Ann' });
    const order = store.seedOrder({
      customer: ann.id,
      email: 'ann@example.com',
      totalPriceSet: moneyBag('30.00'),
      lineItems: [{ title: 'Hat', quantity: 2 }, { title: 'Scarf', quantity: 1 }],
    });
    const on = { token: own, domain: 'bulk.myshopify.com' };
    const run = await gql(
      `mutation ($q: String!) { bulkOperationRunQuery(query: $q) { bulkOperation { id status } userErrors { field code message } } }`,
      { q: '{ orders { edges { node { id email customer { id } totalPriceSet { shopMoney { amount } } lineItems { edges { node { title quantity } } } } } } }' },
      on,
    );
    const op = run.body.data!.bulkOperationRunQuery.bulkOperation;
    expect(op.status).toBe('CREATED');
    const poll = () => gql('query ($id: ID!) { bulkOperation(id: $id) { status objectCount rootObjectCount url } }', { id: op.id }, on);
    expect((await poll()).body.data!.bulkOperation).toMatchObject({ status: 'RUNNING', url: null });
    const done = (await poll()).body.data!.bulkOperation;
    expect(done).toMatchObject({ status: 'COMPLETED', objectCount: '3', rootObjectCount: '1' });
    const jsonl = await (await fetch(done.url)).text();
    expect(jsonl.trimEnd().split('\n').map((line) => JSON.parse(line))).toEqual([
      { id: order.id, email: 'ann@example.com', customer: { id: ann.id }, totalPriceSet: { shopMoney: { amount: '30.00' } } },
      { title: 'Hat', quantity: 2, __parentId: order.id },
      { title: 'Scarf', quantity: 1, __parentId: order.id },
    ]);
  });

  it('fails a bulk operation reading what the token may not, with ACCESS_DENIED', async () => {
    const store = shopify.store('bulk-denied.myshopify.com');
    const on = { token: store.addAccessToken(['read_customers']), domain: 'bulk-denied.myshopify.com' };
    const run = await gql('mutation { bulkOperationRunQuery(query: "{ orders { edges { node { id } } } }") { bulkOperation { id } userErrors { code } } }', undefined, on);
    const id = run.body.data!.bulkOperationRunQuery.bulkOperation.id;
    store.advanceBulkOperations();
    store.advanceBulkOperations();
    const op = await gql('query ($id: ID!) { node(id: $id) { ... on BulkOperation { status errorCode url } } }', { id }, on);
    expect(op.body.data!.node).toEqual({ status: 'FAILED', errorCode: 'ACCESS_DENIED', url: null });
  });

  it('refuses an invalid bulk query and more operations than the version allows at once', async () => {
    const store = shopify.store('bulk-limit.myshopify.com', { bulkConcurrency: 1, bulkProgress: 'manual' });
    const own = store.addAccessToken(['read_customers']);
    const on = { token: own, domain: 'bulk-limit.myshopify.com' };
    const run = (q: string) => gql('mutation ($q: String!) { bulkOperationRunQuery(query: $q) { bulkOperation { id } userErrors { code message } } }', { q }, on);
    const invalid = await run('{ customers { edges { node { emial } } } }');
    expect(invalid.body.data!.bulkOperationRunQuery.userErrors).toEqual([
      { code: 'INVALID', message: "Invalid bulk query: Field 'emial' doesn't exist on type 'Customer'" },
    ]);
    const first = await run('{ customers { edges { node { id } } } }');
    const id = first.body.data!.bulkOperationRunQuery.bulkOperation.id;
    const second = await run('{ customers { edges { node { id } } } }');
    expect(second.body.data!.bulkOperationRunQuery.userErrors).toEqual([
      { code: 'OPERATION_IN_PROGRESS', message: `A bulk query operation for this app and shop is already in progress: ${id}.` },
    ]);
    store.advanceBulkOperations();
    store.advanceBulkOperations();
    expect((await run('{ customers { edges { node { id } } } }')).body.data!.bulkOperationRunQuery.userErrors).toEqual([]);
  });
});

describe('failure switches and the call record', () => {
  it('answers 503 and 429 when told to, then recovers; records every call', async () => {
    const store = shopify.store('flaky.myshopify.com');
    const own = store.addAccessToken([]);
    const on = { token: own, domain: 'flaky.myshopify.com' };
    store.failNext({ status: 503 });
    store.failNext({ status: 429 });
    expect((await gql('{ shop { name } }', undefined, on)).status).toBe(503);
    const limited = await fetch(shopify.adminUrl('flaky.myshopify.com'), { method: 'POST', headers: { 'x-shopify-access-token': own }, body: '{"query":"{ shop { name } }"}' });
    expect([limited.status, limited.headers.get('retry-after')]).toEqual([429, '2.0']);
    const ok = await gql('query Name { shop { name } }', undefined, on);
    expect(ok.body.data).toEqual({ shop: { name: 'flaky' } });
    expect(store.calls.map((call) => call.status)).toEqual([503, 429, 200]);
    expect(store.callsTo('shop')).toMatchObject([{ operationName: null, query: 'query Name { shop { name } }', variables: {} }]);
  });

  it('hangs a request until the client gives up', async () => {
    const store = shopify.store('hung.myshopify.com');
    const own = store.addAccessToken([]);
    store.failNext({ hang: true });
    const hung = fetch(shopify.adminUrl('hung.myshopify.com'), {
      method: 'POST',
      headers: { 'x-shopify-access-token': own },
      body: '{"query":"{ shop { name } }"}',
      signal: AbortSignal.timeout(300),
    });
    await expect(hung).rejects.toThrow(/abort|timeout/i);
    expect(store.calls.map((call) => call.status)).toEqual([0]);
  });
});

/**
 * A local stand-in for Shopify's Admin GraphQL API, version 2026-07, for tests and benchmarks.
 *
 * Every document is parsed, validated and has its variables coerced against Shopify's published
 * Admin schema for 2026-07 (test/fixtures/shopify, see its README), then executed with graphql-js
 * on that schema, so responses have exactly the schema's shape and a renamed field fails here.
 *
 * URL scheme (a real HTTP server on 127.0.0.1, random port; `standIn.url` is its origin):
 *   POST {url}/stores/{domain}/admin/api/2026-07/graphql.json   the Admin GraphQL API of store {domain}
 *   POST {url}/stores/{domain}/admin/oauth/access_token         the client-credentials grant
 *   GET  {url}/bulk-results/{n}.jsonl                           a completed bulk operation's result
 * so a service whose Shopify origin is configurable maps `https://{domain}/admin/...` to
 * `{url}/stores/{domain}/admin/...` (standIn.adminUrl(domain) gives the GraphQL one). Requests to
 * `{url}/admin/...` are routed by their Host header instead (shop-a.myshopify.com:PORT).
 *
 * What Shopify does, and so does this:
 * - `X-Shopify-Access-Token` must be a token the store knows and that has not expired; otherwise
 *   401 `{"errors":"[API] Invalid API key or access token (unrecognized login or wrong password)"}`.
 *   Another API version in the path, or an unknown store: 404 `{"errors":"Not Found"}`.
 * - Invalid documents and variables: HTTP 200, `{ errors: [{ message, locations, path, extensions: { code } }] }`.
 * - Fields the token's scopes do not cover: an ACCESS_DENIED error naming the scope.
 * - The cost bucket (default 2000 points, restored at 100 a second, Shopify's Standard plan): every
 *   response carries `extensions.cost`; a query costing more than the bucket holds is answered
 *   `{ errors: [{ message: "Throttled", extensions: { code: "THROTTLED", ... } }], extensions: { cost } }`;
 *   one costing over 1000 gets MAX_COST_EXCEEDED.
 * - Client credentials: `{ access_token, scope, expires_in: 86399 }`; the token lapses on the
 *   stand-in's clock. A wrong id or secret: 400 with an OAuth error body.
 *
 * Implemented root fields: shop, currentAppInstallation, node(s), webhookSubscriptions,
 * webhookSubscription, codeDiscountNode, codeDiscountNodeByCode, product(s), productVariant,
 * collection(s), customer(s), order(s), bulkOperation(s), currentBulkOperation; mutations
 * discountCodeBasicCreate, discountCodeFreeShippingCreate, discountCodeDeactivate,
 * discountCodeDelete, webhookSubscriptionCreate, webhookSubscriptionDelete, bulkOperationRunQuery,
 * bulkOperationCancel. Any other root field, or a field the stored objects have no value for,
 * is an error with code STAND_IN_NOT_IMPLEMENTED, so a test notices.
 *
 * Usage:
 *   const shopify = await createShopifyAdminStandIn();
 *   const shop = shopify.store('shop-a.myshopify.com', { restoreRate: 50 });
 *   const token = shop.addAccessToken(['write_discounts', 'read_orders']);
 *   const app = shop.addClientApp({ scopes: ['write_discounts'] });     // { clientId, clientSecret }
 *   const sale = shop.seedCollection({ title: 'Sale' });
 *   shop.seedProduct({ title: 'Hat', collections: [sale.id!] });
 *   const ann = shop.seedCustomer({ email: 'ann@example.com' });
 *   shop.seedOrder({ customer: ann.id, totalPriceSet: moneyBag('30.00'), lineItems: [{ title: 'Hat', quantity: 2 }] });
 *   ... run the service against shopify.adminUrl('shop-a.myshopify.com') ...
 *   shop.discountByCode('SAVE-1')?.input;   shop.webhooks;   shop.callsTo('discountCodeBasicCreate');
 *   shopify.setClock(Date.parse('2026-12-01T00:00:00Z')); shopify.advanceClock(60_000);
 *   shop.failNext({ status: 503, times: 2 });  shop.failNext({ hang: true });
 *   await shopify.close();
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { randomBytes, randomUUID } from 'node:crypto';
import { Kind, type GraphQLFormattedError } from 'graphql';
import { adminSchema, ADMIN_API_VERSION } from './shopify-admin/schema.ts';
import { operationCost, SINGLE_QUERY_MAX_COST, type CostExtension } from './shopify-admin/cost.ts';
import { check } from './shopify-admin/validate.ts';
import { runDocument, type RequestContext } from './shopify-admin/resolvers.ts';
import { ShopifyStore, type RecordedCall, type StoreOptions } from './shopify-admin/store.ts';

export { ADMIN_API_VERSION } from './shopify-admin/schema.ts';
export { moneyBag, moneyV2, ShopifyStore, type RecordedCall, type StoreOptions } from './shopify-admin/store.ts';

/** How long a client-credentials token lasts, in seconds (Shopify's figure: a day less a second). */
export const CLIENT_CREDENTIALS_EXPIRES_IN = 86399;

const INVALID_TOKEN = { errors: '[API] Invalid API key or access token (unrecognized login or wrong password)' };
const NOT_FOUND = { errors: 'Not Found' };

export interface ShopifyAdminStandInOptions {
  /** Defaults for every store created (each can override). */
  storeDefaults?: StoreOptions;
  /** First numeric id handed out. Default 2^53 + 1: Shopify's ids pass 2^53, and a service must keep them as text. */
  firstId?: bigint;
}

export interface ShopifyAdminStandIn {
  /** The origin, e.g. http://127.0.0.1:41234 */
  url: string;
  /** The store's Admin GraphQL endpoint for the pinned version. */
  adminUrl(domain: string): string;
  /** The store, created on first use (unknown stores answer 404). */
  store(domain: string, options?: StoreOptions): ShopifyStore;
  /** Freezes the clock at `ms` (epoch milliseconds); tokens and the cost bucket follow it. */
  setClock(ms: number): void;
  advanceClock(ms: number): void;
  /** Back to real time (the default; benchmarks need it). */
  useRealClock(): void;
  now(): number;
  /** Shorthand for store(domain).failNext(...). */
  failNext(domain: string, failure: Parameters<ShopifyStore['failNext']>[0]): void;
  /** Every call to every store, in order. */
  calls: RecordedCall[];
  close(): Promise<void>;
}

export async function createShopifyAdminStandIn(options: ShopifyAdminStandInOptions = {}): Promise<ShopifyAdminStandIn> {
  adminSchema(); // load before listening, so the first request is not the slow one
  const stores = new Map<string, ShopifyStore>();
  const calls: RecordedCall[] = [];
  let frozen: number | undefined;
  const now = () => frozen ?? Date.now();
  let counter = options.firstId ?? 2n ** 53n + 1n;
  const ids = { next: (type: string) => `gid://shopify/${type}/${counter++}` };
  const hanging = new Set<ServerResponse>();
  const sockets = new Set<Socket>();
  let origin = '';

  const record = (store: ShopifyStore, call: Omit<RecordedCall, 'store' | 'at'>) => {
    const full = { store: store.domain, at: now(), ...call };
    store.calls.push(full);
    calls.push(full);
  };

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'x-request-id': randomUUID(), ...headers });
    res.end(typeof body === 'string' ? body : JSON.stringify(body));
  };

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const bulk = /^\/bulk-results\/(\d+)\.jsonl$/.exec(url.pathname);
    if (req.method === 'GET' && bulk) return serveBulkResult(res, bulk[1]!);

    const routed = /^\/stores\/([^/]+)(\/admin\/.*)$/.exec(url.pathname);
    const domain = routed ? decodeURIComponent(routed[1]!) : (req.headers.host ?? '').replace(/:\d+$/, '');
    const path = routed ? routed[2]! : url.pathname;
    const store = stores.get(domain);
    if (!store || req.method !== 'POST') return send(res, 404, NOT_FOUND);

    const body = await readBody(req);
    const kind = path === '/admin/oauth/access_token' ? 'oauth' : 'graphql';
    const failure = store.takeFailure();
    if (failure && 'hang' in failure) {
      record(store, { kind, status: 0 }); // 0: never answered
      hanging.add(res);
      return;
    }
    if (failure) {
      record(store, { kind, status: failure.status });
      const bodies = {
        429: { errors: 'Exceeded 2 calls per second for api client. Reduce request rates to resume uninterrupted service.' },
        500: { errors: 'Internal Server Error' },
        502: { errors: 'Bad Gateway' },
        503: { errors: 'Service Unavailable' },
      };
      return send(res, failure.status, bodies[failure.status], failure.status === 429 ? { 'retry-after': '2.0' } : {});
    }

    if (kind === 'oauth') return clientCredentials(store, req, body, res);
    const api = /^\/admin\/api\/([^/]+)\/graphql\.json$/.exec(path);
    if (!api || api[1] !== ADMIN_API_VERSION) return send(res, 404, NOT_FOUND);

    const token = store.validToken(headerValue(req, 'x-shopify-access-token'));
    if (!token) {
      record(store, { kind: 'graphql', status: 401, response: INVALID_TOKEN });
      return send(res, 401, INVALID_TOKEN);
    }
    const request = parseGraphqlBody(req, body);
    if (!request) {
      const error = { errors: { query: 'Required parameter missing or invalid' } };
      record(store, { kind: 'graphql', status: 400, response: error });
      return send(res, 400, error);
    }
    const response = graphql(store, { store, token, bulk: false, origin }, request);
    record(store, {
      kind: 'graphql',
      status: 200,
      query: request.query,
      operationName: request.operationName ?? null,
      variables: request.variables ?? {},
      rootFields: response.rootFields,
      response: response.body,
    });
    return send(res, 200, response.body);
  }

  function clientCredentials(store: ShopifyStore, req: IncomingMessage, body: string, res: ServerResponse) {
    const form: Record<string, string> = /json/.test(req.headers['content-type'] ?? '')
      ? (safeJson(body) as Record<string, string> | undefined) ?? {}
      : Object.fromEntries(new URLSearchParams(body));
    const reply = (status: number, response: unknown) => {
      // The secret is never recorded: tests assert on calls, and a secret has no business in them.
      record(store, { kind: 'oauth', status, variables: { client_id: form.client_id, grant_type: form.grant_type }, response });
      send(res, status, response);
    };
    if (form.grant_type !== 'client_credentials') {
      return reply(400, { error: 'unsupported_grant_type', error_description: 'The authorization grant type is not supported by the authorization server.' });
    }
    const app = store.apps.get(form.client_id ?? '');
    if (!app || app.clientSecret !== form.client_secret) {
      return reply(400, { error: 'invalid_client', error_description: 'Client authentication failed due to unknown client, no client authentication included, or unsupported authentication method.' });
    }
    const token = `shpat_${randomBytes(16).toString('hex')}`;
    store.tokens.set(token, { token, scopes: app.scopes, expiresAt: now() + CLIENT_CREDENTIALS_EXPIRES_IN * 1000 });
    return reply(200, { access_token: token, scope: app.scopes.join(','), expires_in: CLIENT_CREDENTIALS_EXPIRES_IN });
  }

  function serveBulkResult(res: ServerResponse, file: string) {
    for (const store of stores.values()) {
      for (const op of store.bulkOperations.values()) {
        if (op.fileName === `${file}.jsonl` && op.status === 'COMPLETED') {
          record(store, { kind: 'bulk-result', status: 200 });
          res.writeHead(200, { 'content-type': 'application/jsonl' });
          res.end(op.jsonl);
          return;
        }
      }
    }
    send(res, 404, NOT_FOUND);
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      // A bug in the stand-in, not Shopify's behaviour: say so loudly.
      send(res, 500, { errors: `Shopify stand-in crashed: ${(error as Error).stack ?? String(error)}` });
    });
  });
  server.on('connection', (socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  return {
    url: origin,
    adminUrl: (domain) => `${origin}/stores/${domain}/admin/api/${ADMIN_API_VERSION}/graphql.json`,
    store(domain, storeOptions) {
      let store = stores.get(domain);
      if (!store) {
        store = new ShopifyStore(domain, { ...options.storeDefaults, ...storeOptions }, now, ids);
        stores.set(domain, store);
      } else if (storeOptions) {
        throw new Error(`store ${domain} exists already: give its options on first use`);
      }
      return store;
    },
    setClock: (ms) => {
      frozen = ms;
    },
    advanceClock: (ms) => {
      frozen = now() + ms;
    },
    useRealClock: () => {
      frozen = undefined;
    },
    now,
    failNext: (domain, failure) => {
      const store = stores.get(domain);
      if (!store) throw new Error(`no store ${domain}`);
      store.failNext(failure);
    },
    calls,
    async close() {
      for (const res of hanging) res.destroy();
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

interface GraphqlRequest {
  query: string;
  variables?: Record<string, unknown>;
  operationName?: string | null;
}

/** One GraphQL request against a store: validation, the cost bucket, execution, extensions.cost. */
function graphql(store: ShopifyStore, ctx: RequestContext, request: GraphqlRequest): { body: unknown; rootFields?: string[] } {
  const schema = adminSchema();
  const checked = check(schema, request.query, request.variables, request.operationName);
  if (!checked.ok) return { body: { errors: checked.errors } };
  const { document, operation, variables } = checked;
  const rootFields = operation.selectionSet.selections.flatMap((s) => (s.kind === Kind.FIELD ? [s.name.value] : []));
  const fragments = new Map(
    document.definitions.flatMap((d) => (d.kind === Kind.FRAGMENT_DEFINITION ? [[d.name.value, d] as const] : [])),
  );
  const requested = operationCost(schema, operation, fragments, variables);
  const cost = (actual: number | null): { cost: CostExtension } => ({
    cost: { requestedQueryCost: requested, actualQueryCost: actual, throttleStatus: store.bucket.status() },
  });
  if (requested > SINGLE_QUERY_MAX_COST) {
    const error: GraphQLFormattedError = {
      message: `Query cost is ${requested}, which exceeds the single query max cost limit (${SINGLE_QUERY_MAX_COST}).`,
      extensions: { code: 'MAX_COST_EXCEEDED', cost: requested, maxCost: SINGLE_QUERY_MAX_COST, documentation: 'https://shopify.dev/api/usage/rate-limits' },
    };
    return { body: { errors: [error], extensions: cost(null) }, rootFields };
  }
  if (!store.bucket.take(requested)) {
    const error: GraphQLFormattedError = {
      message: 'Throttled',
      extensions: { code: 'THROTTLED', documentation: 'https://shopify.dev/api/usage/rate-limits' },
    };
    return { body: { errors: [error], extensions: cost(null) }, rootFields };
  }
  const result = runDocument(schema, document, variables, operation.name?.value, ctx);
  const actual = operation.operation === 'mutation' ? requested : operationCost(schema, operation, fragments, variables, result.data ?? null);
  store.bucket.refund(requested - actual);
  return {
    body: {
      ...(result.errors ? { errors: result.errors.map((error) => error.toJSON()) } : {}),
      data: result.data ?? null,
      extensions: cost(actual),
    },
    rootFields,
  };
}

function parseGraphqlBody(req: IncomingMessage, body: string): GraphqlRequest | undefined {
  if (/application\/graphql/.test(req.headers['content-type'] ?? '')) return body.trim() ? { query: body } : undefined;
  const json = safeJson(body) as Partial<GraphqlRequest> | undefined;
  if (!json || typeof json.query !== 'string' || !json.query.trim()) return undefined;
  return { query: json.query, variables: json.variables ?? undefined, operationName: json.operationName ?? null };
}

const headerValue = (req: IncomingMessage, name: string) => {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
};

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

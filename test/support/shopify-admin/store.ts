// One Shopify store's state in the stand-in: credentials, the cost bucket, discounts, webhook
// subscriptions, a catalogue, customers and orders, bulk operations, and every call it received.
// Objects are kept in the Admin API's own shape (field names of the 2026-07 schema) so the
// generic resolver in resolvers.ts can serve them; a field that holds a function is computed.
import { randomBytes } from 'node:crypto';
import { CostBucket } from './cost.ts';

export type Obj = Record<string, unknown> & { __typename: string; id?: string };

/** Shopify's DateTime: ISO 8601 in UTC without milliseconds. */
export const dateTime = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

export const moneyV2 = (amount: string, currencyCode: string) => ({ amount, currencyCode });
export const moneyBag = (amount: string, currencyCode = 'USD') => ({
  shopMoney: moneyV2(amount, currencyCode),
  presentmentMoney: moneyV2(amount, currencyCode),
});

/** The numeric tail of a gid: `gid://shopify/Product/12` → `12`. */
export const legacyId = (gid: string) => gid.slice(gid.lastIndexOf('/') + 1);

export interface RecordedCall {
  store: string;
  kind: 'graphql' | 'oauth' | 'bulk-result';
  at: number;
  /** The HTTP status answered; 0 for a request left hanging. */
  status: number;
  /** The GraphQL document as sent (graphql calls). */
  query?: string;
  operationName?: string | null;
  variables?: Record<string, unknown>;
  /** Root fields the document selected, e.g. ['discountCodeBasicCreate']. */
  rootFields?: string[];
  /** The response body as sent. */
  response?: unknown;
}

export interface AccessToken {
  token: string;
  scopes: string[];
  /** Clock time after which Shopify answers 401; undefined: never (custom-app tokens). */
  expiresAt?: number;
}

export interface ClientApp {
  clientId: string;
  clientSecret: string;
  scopes: string[];
}

export type Failure = { status: 429 | 500 | 502 | 503; times: number } | { hang: true; times: number };

export interface DiscountRecord {
  id: string;
  kind: 'DiscountCodeBasic' | 'DiscountCodeFreeShipping';
  /** The mutation's input exactly as the service sent it (after GraphQL coercion). */
  input: Record<string, unknown>;
  code: string;
  codeId: string;
  createdAt: number;
  updatedAt: number;
  startsAt: number;
  endsAt: number | null;
}

export interface WebhookRecord {
  id: string;
  topic: string;
  uri: string;
  format: string;
  input: Record<string, unknown>;
  createdAt: number;
  updatedAt: number;
}

export type BulkStatus = 'CREATED' | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELED';

export interface BulkRecord {
  id: string;
  query: string;
  groupObjects: boolean;
  status: BulkStatus;
  createdAt: number;
  completedAt: number | null;
  errorCode: 'ACCESS_DENIED' | 'INTERNAL_SERVER_ERROR' | 'TIMEOUT' | null;
  /** The JSONL result, computed when the operation was created (a snapshot, as Shopify's is). */
  jsonl: string;
  objectCount: number;
  rootObjectCount: number;
  fileName: string;
}

export interface StoreOptions {
  name?: string;
  currencyCode?: string;
  /** Cost bucket size; Shopify's Standard plan: 2000 points... */
  maximumAvailable?: number;
  /** ...restored at 100 points a second (Advanced 200, Plus 1000). */
  restoreRate?: number;
  /** Bulk query operations allowed at once; 5 from API 2026-01 on (1 before). */
  bulkConcurrency?: number;
  /** 'auto': each status read moves an operation on (CREATED→RUNNING→COMPLETED); 'manual': only advanceBulkOperations() does. */
  bulkProgress?: 'auto' | 'manual';
}

export interface Ids {
  next(type: string): string;
}

export class ShopifyStore {
  readonly tokens = new Map<string, AccessToken>();
  readonly apps = new Map<string, ClientApp>();
  readonly bucket: CostBucket;
  readonly nodes = new Map<string, Obj>();
  readonly discounts = new Map<string, DiscountRecord>();
  /** Lower-cased code → discount: Shopify's codes are unique per shop regardless of case. */
  private readonly codes = new Map<string, DiscountRecord>();
  readonly webhooks = new Map<string, WebhookRecord>();
  readonly bulkOperations = new Map<string, BulkRecord>();
  readonly calls: RecordedCall[] = [];
  readonly failures: Failure[] = [];
  readonly shop: Obj;
  bulkConcurrency: number;
  bulkProgress: 'auto' | 'manual';
  /** Product id → ids of the collections it is in. */
  readonly memberships = new Map<string, Set<string>>();

  constructor(
    readonly domain: string,
    options: StoreOptions,
    readonly now: () => number,
    readonly ids: Ids,
  ) {
    this.bucket = new CostBucket(options.maximumAvailable ?? 2000, options.restoreRate ?? 100, now);
    this.bulkConcurrency = options.bulkConcurrency ?? 5;
    this.bulkProgress = options.bulkProgress ?? 'auto';
    const shopId = ids.next('Shop');
    this.shop = {
      __typename: 'Shop',
      id: shopId,
      name: options.name ?? domain.replace(/\.myshopify\.com$/, ''),
      myshopifyDomain: domain,
      currencyCode: options.currencyCode ?? 'USD',
      email: `owner@${domain}`,
      contactEmail: `owner@${domain}`,
      ianaTimezone: 'UTC',
      url: `https://${domain}`,
    };
  }

  // --- credentials ---------------------------------------------------------------------------

  /** Registers an Admin API access token (a custom app's), granted `scopes`. */
  addAccessToken(scopes: string[], token = `shpat_${randomBytes(16).toString('hex')}`): string {
    this.tokens.set(token, { token, scopes });
    return token;
  }

  /** Installs a Dev Dashboard app whose client id and secret get tokens by the client-credentials grant. */
  addClientApp(app: { clientId?: string; clientSecret?: string; scopes: string[] }): ClientApp {
    const full: ClientApp = {
      clientId: app.clientId ?? randomBytes(16).toString('hex'),
      clientSecret: app.clientSecret ?? `shpss_${randomBytes(16).toString('hex')}`,
      scopes: app.scopes,
    };
    this.apps.set(full.clientId, full);
    return full;
  }

  revokeToken(token: string): void {
    this.tokens.delete(token);
  }

  /** The token if Shopify would accept it now. */
  validToken(token: string | undefined): AccessToken | undefined {
    const found = token ? this.tokens.get(token) : undefined;
    if (!found || (found.expiresAt !== undefined && this.now() >= found.expiresAt)) return undefined;
    return found;
  }

  // --- failures for tests ----------------------------------------------------------------------

  /** The next `times` requests to this store answer `status` (or hang until the stand-in closes). */
  failNext(failure: { status: 429 | 500 | 502 | 503; times?: number } | { hang: true; times?: number }): void {
    this.failures.push({ ...failure, times: failure.times ?? 1 } as Failure);
  }

  takeFailure(): Failure | undefined {
    const failure = this.failures[0];
    if (!failure) return undefined;
    if (--failure.times <= 0) this.failures.shift();
    return failure;
  }

  // --- seeding ---------------------------------------------------------------------------------

  private put(obj: Obj): Obj {
    this.nodes.set(obj.id!, obj);
    return obj;
  }

  private base(type: string, seed: { id?: string; createdAt?: string; updatedAt?: string }) {
    const id = seed.id ?? this.ids.next(type);
    const at = dateTime(this.now());
    return { __typename: type, id, legacyResourceId: legacyId(id), createdAt: seed.createdAt ?? at, updatedAt: seed.updatedAt ?? at };
  }

  seedCollection(seed: { id?: string; title: string; handle?: string } & Record<string, unknown>): Obj {
    const collection: Obj = {
      ...this.base('Collection', seed),
      handle: seed.handle ?? slug(seed.title),
      ...seed,
      products: () => [...this.nodes.values()].filter((n) => n.__typename === 'Product' && this.memberships.get(n.id!)?.has(collection.id!)),
      productsCount: () => ({ count: (collection.products as () => Obj[])().length, precision: 'EXACT' }),
    } as Obj;
    return this.put(collection);
  }

  /** A product; `collections` are ids of seeded collections. Variants get ids and point back to it. */
  seedProduct(
    seed: { id?: string; title: string; collections?: string[]; variants?: Record<string, unknown>[] } & Record<string, unknown>,
  ): Obj {
    const { collections = [], variants = [{ title: 'Default Title' }], ...fields } = seed;
    for (const id of collections) {
      if (this.nodes.get(id)?.__typename !== 'Collection') throw new Error(`seedProduct: no collection ${id} in ${this.domain}`);
    }
    const product: Obj = {
      ...this.base('Product', seed),
      handle: slug(seed.title),
      isGiftCard: false,
      productType: '',
      vendor: this.shop.name,
      status: 'ACTIVE',
      tags: [],
      ...fields,
      collections: () => [...(this.memberships.get(product.id!) ?? [])].map((id) => this.nodes.get(id)!),
      inCollection: ({ id }: { id: string }) => this.memberships.get(product.id!)?.has(id) ?? false,
    } as Obj;
    this.put(product);
    this.memberships.set(product.id!, new Set(collections));
    product.variants = variants.map((variant) =>
      this.put({ ...this.base('ProductVariant', variant as { id?: string }), title: 'Default Title', sku: null, price: '0.00', ...variant, product }),
    );
    return product;
  }

  /** Moves a product into or out of collections (as a merchant editing it would). */
  setProductCollections(productId: string, collectionIds: string[]): void {
    if (!this.memberships.has(productId)) throw new Error(`no product ${productId} in ${this.domain}`);
    this.memberships.set(productId, new Set(collectionIds));
    const product = this.nodes.get(productId)!;
    product.updatedAt = dateTime(this.now());
  }

  seedCustomer(seed: { id?: string; email?: string | null } & Record<string, unknown>): Obj {
    const customer: Obj = {
      ...this.base('Customer', seed),
      email: null,
      firstName: null,
      lastName: null,
      phone: null,
      note: null,
      tags: [],
      state: 'ENABLED',
      verifiedEmail: true,
      locale: 'en',
      taxExempt: false,
      amountSpent: moneyV2('0.0', String(this.shop.currencyCode)),
      ...seed,
      displayName: seed.displayName ?? ([seed.firstName, seed.lastName].filter(Boolean).join(' ') || seed.email || ''),
      orders: () => this.list('Order').filter((order) => order.customer === customer.id),
      numberOfOrders: () => String(this.list('Order').filter((order) => order.customer === customer.id).length),
    } as Obj;
    return this.put(customer);
  }

  /**
   * An order; `customer` is a seeded customer's id, `lineItems` their fields (ids are given).
   * Money fields are MoneyBags: use moneyBag('12.50').
   */
  seedOrder(
    seed: { id?: string; customer?: string | null; lineItems?: Record<string, unknown>[] } & Record<string, unknown>,
  ): Obj {
    const { lineItems = [], ...fields } = seed;
    if (seed.customer && this.nodes.get(seed.customer)?.__typename !== 'Customer') {
      throw new Error(`seedOrder: no customer ${seed.customer} in ${this.domain}`);
    }
    const count = this.list('Order').length;
    const currency = String(fields.currencyCode ?? this.shop.currencyCode);
    const base = this.base('Order', seed);
    const order: Obj = {
      ...base,
      name: `#${1001 + count}`,
      number: 1001 + count,
      processedAt: base.createdAt,
      currencyCode: currency,
      presentmentCurrencyCode: currency,
      email: null,
      customer: null,
      test: false,
      cancelledAt: null,
      cancelReason: null,
      closedAt: null,
      note: null,
      tags: [],
      discountCodes: [],
      displayFinancialStatus: 'PAID',
      sourceName: 'web',
      ...fields,
    } as Obj;
    order.lineItems = lineItems.map((line) =>
      this.put({
        ...this.base('LineItem', line as { id?: string }),
        quantity: 1,
        currentQuantity: (line.quantity as number | undefined) ?? 1,
        sku: null,
        variant: null,
        product: null,
        isGiftCard: false,
        vendor: null,
        variantTitle: null,
        name: line.title,
        ...line,
      }),
    );
    return this.put(order);
  }

  list(type: string): Obj[] {
    return [...this.nodes.values()].filter((node) => node.__typename === type);
  }

  // --- inspection ------------------------------------------------------------------------------

  /** A discount by its code (case-insensitive, as Shopify matches codes). */
  discountByCode(code: string): DiscountRecord | undefined {
    return this.codes.get(code.toLowerCase());
  }

  addDiscount(discount: DiscountRecord): void {
    this.discounts.set(discount.id, discount);
    this.codes.set(discount.code.toLowerCase(), discount);
  }

  deleteDiscount(id: string): boolean {
    const discount = this.discounts.get(id);
    if (!discount) return false;
    this.discounts.delete(id);
    this.codes.delete(discount.code.toLowerCase());
    return true;
  }

  discountStatus(discount: DiscountRecord): 'ACTIVE' | 'EXPIRED' | 'SCHEDULED' {
    const now = this.now();
    if (discount.endsAt !== null && discount.endsAt <= now) return 'EXPIRED';
    return discount.startsAt > now ? 'SCHEDULED' : 'ACTIVE';
  }

  /** Calls to this store whose document selected `rootField` (e.g. 'discountCodeBasicCreate'). */
  callsTo(rootField: string): RecordedCall[] {
    return this.calls.filter((call) => call.rootFields?.includes(rootField));
  }

  /** Moves manual-mode (or not yet observed) bulk operations one step on: CREATED→RUNNING→COMPLETED. */
  advanceBulkOperations(): void {
    for (const op of this.bulkOperations.values()) this.stepBulk(op);
  }

  stepBulk(op: BulkRecord): void {
    if (op.status === 'CREATED') op.status = 'RUNNING';
    else if (op.status === 'RUNNING') {
      op.status = op.errorCode ? 'FAILED' : 'COMPLETED';
      op.completedAt = this.now();
    }
  }

  runningBulkOperations(): BulkRecord[] {
    return [...this.bulkOperations.values()].filter((op) => op.status === 'CREATED' || op.status === 'RUNNING');
  }
}

const slug = (title: string) =>
  title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-|-$/g, '');

// Executes Admin API documents on the client schema. Root fields the stand-in implements are in
// `queryRoot` and `mutationRoot`; below them a generic resolver reads the stored objects (store.ts),
// turns arrays into connections and gids into objects, and refuses a field it has no value for, so
// a document asking for something the stand-in does not model fails loudly instead of getting null.
import {
  execute,
  getNamedType,
  GraphQLError,
  isCompositeType,
  type DocumentNode,
  type ExecutionResult,
  type GraphQLFieldResolver,
  type GraphQLSchema,
  type GraphQLTypeResolver,
} from 'graphql';
import { ADMIN_API_VERSION } from './schema.ts';
import {
  dateTime,
  legacyId,
  moneyV2,
  type AccessToken,
  type BulkRecord,
  type DiscountRecord,
  type Obj,
  type ShopifyStore,
  type WebhookRecord,
} from './store.ts';
import { flattenBulkResult, parseBulkQuery } from './bulk.ts';
import { adminSchema } from './schema.ts';

export interface RequestContext {
  store: ShopifyStore;
  token: AccessToken;
  /** Bulk operations read whole connections: `first`/`last` are neither required nor applied. */
  bulk: boolean;
  /** Where the stand-in serves bulk results. */
  origin: string;
}

type Args = Record<string, unknown>;
type Root = (args: Args, ctx: RequestContext) => unknown;

const standInError = (message: string) =>
  new GraphQLError(`Shopify stand-in: ${message}`, { extensions: { code: 'STAND_IN_NOT_IMPLEMENTED' } });

// --- scopes --------------------------------------------------------------------------------------

/** Shopify's ACCESS_DENIED error, raised when the token lacks a scope (write_x implies read_x). */
function requireScope(ctx: RequestContext, field: string, scope: string): void {
  const [, resource] = scope.split(/_(.+)/);
  const granted = ctx.token.scopes.includes(scope) || (scope.startsWith('read_') && ctx.token.scopes.includes(`write_${resource}`));
  if (granted) return;
  throw new GraphQLError(`Access denied for ${field} field. Required access: \`${scope}\` access scope.`, {
    extensions: {
      code: 'ACCESS_DENIED',
      documentation: 'https://shopify.dev/api/usage/access-scopes',
      requiredAccess: `\`${scope}\` access scope.`,
    },
  });
}

const scoped =
  (field: string, scope: string, root: Root): Root =>
  (args, ctx) => {
    requireScope(ctx, field, scope);
    return root(args, ctx);
  };

// --- connections and search ----------------------------------------------------------------------

const encodeCursor = (key: string) => Buffer.from(JSON.stringify({ last_id: key })).toString('base64url');
const decodeCursor = (cursor: string) => {
  try {
    return String((JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { last_id: unknown }).last_id);
  } catch {
    throw new GraphQLError('Invalid cursor for current pagination sort.', { extensions: { code: 'BAD_REQUEST' } });
  }
};

/** Shopify's pagination over a list: first/last (required, at most 250), after/before, reverse, query. */
export function connection(items: unknown[], args: Args, ctx: RequestContext): Obj {
  let list = typeof args.query === 'string' && args.query.trim() ? items.filter(searchFilter(args.query)) : [...items];
  if (args.reverse) list.reverse();
  const keyOf = (item: unknown, index: number) => (item as Obj | null)?.id ?? String(index);
  const keyed = list.map((item, index) => ({ item, key: keyOf(item, index) }));
  let window = keyed;
  if (typeof args.after === 'string') {
    const key = decodeCursor(args.after);
    window = window.slice(window.findIndex((entry) => entry.key === key) + 1);
  }
  if (typeof args.before === 'string') {
    const key = decodeCursor(args.before);
    const at = window.findIndex((entry) => entry.key === key);
    if (at >= 0) window = window.slice(0, at);
  }
  const afterWindow = window;
  if (!ctx.bulk) {
    const first = args.first as number | null | undefined;
    const last = args.last as number | null | undefined;
    if (first == null && last == null) {
      throw new GraphQLError('you must provide one of first or last', { extensions: { code: 'BAD_REQUEST' } });
    }
    for (const [name, value] of [['first', first], ['last', last]] as const) {
      if (value != null && (value < 0 || value > 250)) {
        throw new GraphQLError(`The value of the argument \`${name}\` must be between 0 and 250.`, {
          extensions: { code: 'BAD_REQUEST' },
        });
      }
    }
    if (first != null) window = window.slice(0, first);
    if (last != null) window = window.slice(Math.max(0, window.length - last));
  }
  list = window.map((entry) => entry.item);
  const startIndex = keyed.indexOf(window[0]!);
  return {
    __typename: 'Connection',
    edges: window.map((entry) => ({ __typename: 'Edge', cursor: encodeCursor(entry.key), node: entry.item })),
    nodes: list,
    pageInfo: {
      __typename: 'PageInfo',
      hasNextPage: window.length > 0 ? afterWindow.indexOf(window[window.length - 1]!) < afterWindow.length - 1 : false,
      hasPreviousPage: startIndex > 0,
      startCursor: window[0] ? encodeCursor(window[0].key) : null,
      endCursor: window.length ? encodeCursor(window[window.length - 1]!.key) : null,
    },
  };
}

/**
 * A small part of Shopify's search syntax: space-separated `field:value` terms (AND), with `>`, `>=`,
 * `<`, `<=` on dates and numbers, `id` matching the numeric id. Anything else is refused so a test
 * notices a filter the stand-in would silently ignore.
 */
export function searchFilter(query: string): (item: unknown) => boolean {
  const terms = (query.match(/(?:[^\s"']+|"[^"]*"|'[^']*')+/g) ?? []).filter((term) => term.toUpperCase() !== 'AND');
  const tests = terms.map((term) => {
    if (term.toUpperCase() === 'OR' || term.startsWith('-') || term.toUpperCase() === 'NOT') {
      throw standInError(`search syntax "${term}" in "${query}" is not supported`);
    }
    const match = /^([a-z_]+):(>=|<=|>|<)?(.+)$/.exec(term);
    if (!match) throw standInError(`search term "${term}" in "${query}" is not supported (use field:value)`);
    const [, field, op = '=', raw] = match as unknown as [string, string, string | undefined, string];
    const value = raw.replace(/^["']|["']$/g, '');
    const property = field === 'gift_card' ? 'isGiftCard' : field.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    return (item: unknown) => {
      const record = item as Obj;
      if (!(property in record)) throw standInError(`search field "${field}" is not known on ${record.__typename}`);
      let actual = record[property];
      if (field === 'id') actual = legacyId(String(actual));
      const asDate = (v: unknown) => (typeof v === 'string' && /^\d{4}-\d\d-\d\d/.test(v) ? Date.parse(v) : NaN);
      const [left, right] = Number.isFinite(asDate(actual)) && Number.isFinite(asDate(value))
        ? [asDate(actual), asDate(value)]
        : /^-?\d+(\.\d+)?$/.test(value) && !Number.isNaN(Number(actual))
          ? [Number(actual), Number(value)]
          : [String(actual).toLowerCase(), value.toLowerCase()];
      switch (op) {
        case '>': return left > right;
        case '>=': return left >= right;
        case '<': return left < right;
        case '<=': return left <= right;
        default: return left === right;
      }
    };
  });
  return (item) => tests.every((test) => test(item));
}

// --- the generic resolver ------------------------------------------------------------------------

export const fieldResolver: GraphQLFieldResolver<unknown, RequestContext> = (source, args, ctx, info) => {
  const parent = info.parentType.name;
  if (parent === 'QueryRoot' || parent === 'Mutation') {
    const root = (parent === 'QueryRoot' ? queryRoot : mutationRoot)[info.fieldName];
    if (!root) throw standInError(`${parent}.${info.fieldName} is not implemented`);
    return root(args, ctx);
  }
  let value = (source as Record<string, unknown>)[info.fieldName];
  if (typeof value === 'function') value = (value as (a: Args, c: RequestContext) => unknown)(args, ctx);
  if (value === undefined) {
    throw standInError(`${parent}.${info.fieldName} has no value here (seed it, or teach the stand-in)`);
  }
  const type = getNamedType(info.returnType);
  if (type.name.endsWith('Connection') && Array.isArray(value)) return connection(value, args, ctx);
  if (isCompositeType(type)) return resolveRefs(value, ctx);
  return value;
};

/** Stored objects refer to each other by gid; a gid where an object is due is looked up. */
function resolveRefs(value: unknown, ctx: RequestContext): unknown {
  if (Array.isArray(value)) return value.map((item) => resolveRefs(item, ctx));
  if (typeof value !== 'string') return value;
  const node = ctx.store.nodes.get(value);
  if (!node) throw standInError(`no object ${value} in ${ctx.store.domain}`);
  return node;
}

export const typeResolver: GraphQLTypeResolver<unknown, RequestContext> = (value, _ctx, info) => {
  const typename = (value as Obj).__typename;
  if (!typename) throw standInError(`an object for ${info.parentType.name} has no __typename`);
  return typename;
};

// --- views of records ----------------------------------------------------------------------------

const API_VERSION = { __typename: 'ApiVersion', handle: ADMIN_API_VERSION, displayName: ADMIN_API_VERSION, supported: true };

function webhookView(record: WebhookRecord): Obj {
  const http = /^https:\/\//.test(record.uri);
  return {
    __typename: 'WebhookSubscription',
    id: record.id,
    legacyResourceId: legacyId(record.id),
    topic: record.topic,
    uri: record.uri,
    callbackUrl: http ? record.uri : null,
    endpoint: http
      ? { __typename: 'WebhookHttpEndpoint', callbackUrl: record.uri }
      : record.uri.startsWith('pubsub://')
        ? { __typename: 'WebhookPubSubEndpoint', pubSubProject: record.uri.slice(9).split(':')[0], pubSubTopic: record.uri.split(':')[2] }
        : { __typename: 'WebhookEventBridgeEndpoint', arn: record.uri },
    format: record.format,
    includeFields: (record.input.includeFields as string[] | null) ?? [],
    metafieldNamespaces: (record.input.metafieldNamespaces as string[] | null) ?? [],
    metafields: [],
    filter: (record.input.filter as string | null) ?? null,
    name: (record.input.name as string | null) ?? null,
    createdAt: dateTime(record.createdAt),
    updatedAt: dateTime(record.updatedAt),
    apiVersion: API_VERSION,
  };
}

function discountView(record: DiscountRecord, store: ShopifyStore): Obj {
  const input = record.input;
  const currency = String(store.shop.currencyCode);
  const combines = (input.combinesWith ?? {}) as Record<string, boolean | null>;
  const minimum = input.minimumRequirement as
    | { subtotal?: { greaterThanOrEqualToSubtotal?: string }; quantity?: { greaterThanOrEqualToQuantity?: string } }
    | null
    | undefined;
  const codeDiscount: Obj = {
    __typename: record.kind,
    title: input.title,
    status: store.discountStatus(record),
    startsAt: dateTime(record.startsAt),
    endsAt: record.endsAt === null ? null : dateTime(record.endsAt),
    createdAt: dateTime(record.createdAt),
    updatedAt: dateTime(record.updatedAt),
    usageLimit: input.usageLimit ?? null,
    appliesOncePerCustomer: input.appliesOncePerCustomer ?? false,
    asyncUsageCount: 0,
    recurringCycleLimit: input.recurringCycleLimit ?? null,
    tags: input.tags ?? [],
    totalSales: null,
    hasTimelineComment: false,
    shareableUrls: [],
    summary: String(input.title),
    shortSummary: String(input.title),
    discountClasses: record.kind === 'DiscountCodeFreeShipping' ? ['SHIPPING'] : ['PRODUCT'],
    codes: [{ __typename: 'DiscountRedeemCode', id: record.codeId, code: record.code, asyncUsageCount: 0, createdBy: null }],
    codesCount: { count: 1, precision: 'EXACT' },
    combinesWith: {
      orderDiscounts: combines.orderDiscounts ?? false,
      productDiscounts: combines.productDiscounts ?? false,
      shippingDiscounts: combines.shippingDiscounts ?? false,
      productDiscountsWithTagsOnSameCartLine: null,
    },
    minimumRequirement: minimum?.subtotal
      ? { __typename: 'DiscountMinimumSubtotal', greaterThanOrEqualToSubtotal: moneyV2(String(minimum.subtotal.greaterThanOrEqualToSubtotal), currency) }
      : minimum?.quantity
        ? { __typename: 'DiscountMinimumQuantity', greaterThanOrEqualToQuantity: String(minimum.quantity.greaterThanOrEqualToQuantity) }
        : null,
    context: contextView(input, store),
  };
  if (record.kind === 'DiscountCodeBasic') codeDiscount.customerGets = customerGetsView(input, store);
  else {
    codeDiscount.appliesOnOneTimePurchase = input.appliesOnOneTimePurchase ?? true;
    codeDiscount.appliesOnSubscription = input.appliesOnSubscription ?? false;
    codeDiscount.maximumShippingPrice = input.maximumShippingPrice == null ? null : moneyV2(String(input.maximumShippingPrice), currency);
  }
  return { __typename: 'DiscountCodeNode', id: record.id, codeDiscount };
}

function contextView(input: Args, store: ShopifyStore): Obj {
  const context = (input.context ?? input.customerSelection ?? {}) as { customers?: { add?: string[] } };
  if (context.customers?.add?.length) {
    // Customers the test did not seed still show, as bare ids: the service only needs them echoed.
    return { __typename: 'DiscountCustomers', customers: context.customers.add.map((id) => store.nodes.get(id) ?? { __typename: 'Customer', id }) };
  }
  return { __typename: 'DiscountBuyerSelectionAll', all: 'ALL' };
}

function customerGetsView(input: Args, store: ShopifyStore): Obj {
  const currency = String(store.shop.currencyCode);
  const gets = (input.customerGets ?? {}) as {
    items?: { all?: boolean; products?: { productsToAdd?: string[]; productVariantsToAdd?: string[] }; collections?: { add?: string[] } };
    value?: { percentage?: number; discountAmount?: { amount?: string; appliesOnEachItem?: boolean } };
    appliesOnOneTimePurchase?: boolean;
    appliesOnSubscription?: boolean;
  };
  // A seeded object when there is one (tests asking for its title get it), else the bare id.
  const ref = (type: string) => (id: string) => store.nodes.get(id) ?? { __typename: type, id };
  const items = gets.items?.products
    ? {
        __typename: 'DiscountProducts',
        products: (gets.items.products.productsToAdd ?? []).map(ref('Product')),
        productVariants: (gets.items.products.productVariantsToAdd ?? []).map(ref('ProductVariant')),
      }
    : gets.items?.collections
      ? { __typename: 'DiscountCollections', collections: (gets.items.collections.add ?? []).map(ref('Collection')) }
      : { __typename: 'AllDiscountItems', allItems: true };
  const value = gets.value?.discountAmount
    ? {
        __typename: 'DiscountAmount',
        amount: moneyV2(String(gets.value.discountAmount.amount), currency),
        appliesOnEachItem: gets.value.discountAmount.appliesOnEachItem ?? false,
      }
    : { __typename: 'DiscountPercentage', percentage: gets.value?.percentage ?? 0 };
  return {
    __typename: 'DiscountCustomerGets',
    items,
    value,
    appliesOnOneTimePurchase: gets.appliesOnOneTimePurchase ?? true,
    appliesOnSubscription: gets.appliesOnSubscription ?? false,
  };
}

function bulkView(op: BulkRecord, ctx: RequestContext): Obj {
  const done = op.status === 'COMPLETED';
  return {
    __typename: 'BulkOperation',
    id: op.id,
    status: op.status,
    type: 'QUERY',
    query: op.query,
    createdAt: dateTime(op.createdAt),
    completedAt: op.completedAt === null ? null : dateTime(op.completedAt),
    errorCode: op.status === 'FAILED' ? op.errorCode : null,
    objectCount: done ? String(op.objectCount) : '0',
    rootObjectCount: done ? String(op.rootObjectCount) : '0',
    fileSize: done ? String(Buffer.byteLength(op.jsonl)) : null,
    // An operation that found nothing has no file, as on Shopify.
    url: done && op.objectCount > 0 ? `${ctx.origin}/bulk-results/${op.fileName}` : null,
    partialDataUrl: null,
  };
}

/** Reading a bulk operation's status is what moves it on in 'auto' mode. */
function observeBulk(op: BulkRecord, ctx: RequestContext): Obj {
  if (ctx.store.bulkProgress === 'auto') ctx.store.stepBulk(op);
  return bulkView(op, ctx);
}

// --- root fields ---------------------------------------------------------------------------------

const node = (args: Args, ctx: RequestContext): Obj | null => {
  const id = String(args.id);
  const discount = ctx.store.discounts.get(id);
  if (discount) return discountView(discount, ctx.store);
  const webhook = ctx.store.webhooks.get(id);
  if (webhook) return webhookView(webhook);
  const op = ctx.store.bulkOperations.get(id);
  if (op) return observeBulk(op, ctx);
  return ctx.store.nodes.get(id) ?? null;
};

const typed = (type: string, scope: string, field: string): Root =>
  scoped(field, scope, (args, ctx) => {
    const found = ctx.store.nodes.get(String(args.id));
    return found?.__typename === type ? found : null;
  });

const listOf = (type: string, scope: string, field: string): Root =>
  scoped(field, scope, (args, ctx) => connection(ctx.store.list(type), args, ctx));

const queryRoot: Record<string, Root> = {
  shop: (_args, ctx) => ctx.store.shop,
  currentAppInstallation: (_args, ctx) => ({
    __typename: 'AppInstallation',
    id: `gid://shopify/AppInstallation/${legacyId(String(ctx.store.shop.id))}`,
    accessScopes: ctx.token.scopes.map((handle) => ({ __typename: 'AccessScope', handle, description: handle })),
  }),
  node,
  nodes: (args, ctx) => (args.ids as string[]).map((id) => node({ id }, ctx)),

  webhookSubscriptions: (args, ctx) => {
    const topics = args.topics as string[] | null | undefined;
    const uri = (args.uri ?? args.callbackUrl) as string | null | undefined;
    const list = [...ctx.store.webhooks.values()]
      .filter((hook) => (!topics?.length || topics.includes(hook.topic)) && (!uri || hook.uri === uri) && (!args.format || hook.format === args.format))
      .map(webhookView);
    return connection(list, { ...args, query: undefined }, ctx);
  },
  webhookSubscription: (args, ctx) => {
    const hook = ctx.store.webhooks.get(String(args.id));
    return hook ? webhookView(hook) : null;
  },

  codeDiscountNode: scoped('codeDiscountNode', 'read_discounts', (args, ctx) => {
    const discount = ctx.store.discounts.get(String(args.id));
    return discount ? discountView(discount, ctx.store) : null;
  }),
  codeDiscountNodeByCode: scoped('codeDiscountNodeByCode', 'read_discounts', (args, ctx) => {
    const discount = ctx.store.discountByCode(String(args.code));
    return discount ? discountView(discount, ctx.store) : null;
  }),

  product: typed('Product', 'read_products', 'product'),
  products: listOf('Product', 'read_products', 'products'),
  collection: typed('Collection', 'read_products', 'collection'),
  collections: listOf('Collection', 'read_products', 'collections'),
  productVariant: typed('ProductVariant', 'read_products', 'productVariant'),
  customer: typed('Customer', 'read_customers', 'customer'),
  customers: listOf('Customer', 'read_customers', 'customers'),
  order: typed('Order', 'read_orders', 'order'),
  orders: listOf('Order', 'read_orders', 'orders'),

  bulkOperation: (args, ctx) => {
    const op = ctx.store.bulkOperations.get(String(args.id));
    return op ? observeBulk(op, ctx) : null;
  },
  currentBulkOperation: (args, ctx) => {
    if (args.type === 'MUTATION') return null;
    const ops = [...ctx.store.bulkOperations.values()];
    const latest = ops[ops.length - 1];
    return latest ? observeBulk(latest, ctx) : null;
  },
  bulkOperations: (args, ctx) => {
    const ops = [...ctx.store.bulkOperations.values()].reverse();
    const views = ops.map((op) => ({ op, view: bulkView(op, ctx) }));
    const wanted = typeof args.query === 'string' && args.query.trim() ? views.filter(({ view }) => searchFilter(String(args.query))(view)) : views;
    return connection(wanted.map(({ op }) => observeBulk(op, ctx)), { ...args, query: undefined }, ctx);
  },
};

// --- mutations -----------------------------------------------------------------------------------

interface UserError {
  field: string[] | null;
  message: string;
  code?: string | null;
  extraInfo?: string | null;
}

const discountError = (field: string[] | null, code: string, message: string): UserError => ({ field, code, message, extraInfo: null });

const GID = (type: string) => new RegExp(`^gid://shopify/${type}/\\d+$`);

/** Shopify's checks on a code discount's input that a loyalty service can trip over. */
function discountInputErrors(input: Args, inputName: string, ctx: RequestContext, basic: boolean): UserError[] {
  const errors: UserError[] = [];
  const at = (...path: string[]) => [inputName, ...path];
  const code = typeof input.code === 'string' ? input.code : '';
  if (!code.trim()) errors.push(discountError(at('code'), 'BLANK', "Code can't be blank"));
  else if (code.length > 255) errors.push(discountError(at('code'), 'TOO_LONG', 'Code is too long (maximum is 255 characters)'));
  else if (/[\r\n]/.test(code)) errors.push(discountError(at('code'), 'INVALID', 'Code cannot contain newline characters.'));
  else if (ctx.store.discountByCode(code)) {
    errors.push(discountError(at('code'), 'TAKEN', 'Code must be unique. Please try a different code.'));
  }
  if (typeof input.title !== 'string' || !input.title.trim()) errors.push(discountError(at('title'), 'BLANK', "Title can't be blank"));
  if (input.startsAt == null) errors.push(discountError(at('startsAt'), 'BLANK', "Starts at can't be blank"));
  else if (Number.isNaN(Date.parse(String(input.startsAt)))) errors.push(discountError(at('startsAt'), 'INVALID', 'Starts at is invalid'));
  if (input.endsAt != null) {
    if (Number.isNaN(Date.parse(String(input.endsAt)))) errors.push(discountError(at('endsAt'), 'INVALID', 'Ends at is invalid'));
    else if (input.startsAt != null && Date.parse(String(input.endsAt)) <= Date.parse(String(input.startsAt))) {
      errors.push(discountError(at('endsAt'), 'END_DATE_BEFORE_START_DATE', 'Ends at needs to be after starts_at'));
    }
  }
  if (input.context == null && input.customerSelection == null) {
    errors.push(discountError(at('context'), 'BLANK', "Context can't be blank"));
  }
  if (input.context != null && input.customerSelection != null) {
    errors.push(discountError(at('context'), 'CONFLICT', 'Only one of context or customerSelection can be provided.'));
  }
  const customers = ((input.context ?? input.customerSelection) as { customers?: { add?: string[] } } | null)?.customers?.add ?? [];
  customers.forEach((id, i) => {
    if (!GID('Customer').test(id)) errors.push(discountError(at('context', 'customers', 'add', String(i)), 'INVALID', `Customer with id: ${id} is invalid`));
  });
  if (typeof input.usageLimit === 'number' && input.usageLimit < 1) {
    errors.push(discountError(at('usageLimit'), 'GREATER_THAN', 'Usage limit must be greater than 0'));
  }
  const minimum = input.minimumRequirement as { subtotal?: unknown; quantity?: unknown } | null | undefined;
  if (minimum?.subtotal && minimum.quantity) {
    errors.push(discountError(at('minimumRequirement'), 'MINIMUM_SUBTOTAL_AND_QUANTITY_RANGE_BOTH_PRESENT', 'Minimum subtotal cannot be defined when minimum quantity is.'));
  }
  if (basic) errors.push(...customerGetsErrors(input.customerGets as Args | null | undefined, at));
  return errors;
}

function customerGetsErrors(gets: Args | null | undefined, at: (...path: string[]) => string[]): UserError[] {
  if (!gets) return [discountError(at('customerGets'), 'BLANK', "Customer gets can't be blank")];
  const errors: UserError[] = [];
  const value = (gets.value ?? {}) as { percentage?: number | null; discountAmount?: { amount?: string | null } | null; discountOnQuantity?: unknown };
  const given = ['percentage', 'discountAmount', 'discountOnQuantity'].filter((key) => (value as Args)[key] != null);
  if (given.length !== 1) {
    errors.push(discountError(at('customerGets', 'value'), given.length ? 'TOO_MANY_ARGUMENTS' : 'BLANK', 'Only one of percentage, discountAmount or discountOnQuantity must be given.'));
  }
  if (value.percentage != null && (value.percentage < 0 || value.percentage > 1)) {
    errors.push(discountError(at('customerGets', 'value', 'percentage'), 'VALUE_OUTSIDE_RANGE', 'Value must be between 0.0 and 1.0'));
  }
  if (value.discountAmount) {
    const amount = Number(value.discountAmount.amount);
    if (!Number.isFinite(amount) || amount <= 0) {
      errors.push(discountError(at('customerGets', 'value', 'discountAmount', 'amount'), 'GREATER_THAN', 'Value must be greater than 0'));
    }
  }
  const items = (gets.items ?? {}) as { all?: boolean | null; products?: { productsToAdd?: string[]; productVariantsToAdd?: string[] } | null; collections?: { add?: string[] } | null };
  const kinds = [items.all ? 'all' : null, items.products ? 'products' : null, items.collections ? 'collections' : null].filter(Boolean);
  if (kinds.length !== 1) {
    errors.push(discountError(at('customerGets', 'items'), kinds.length ? 'TOO_MANY_ARGUMENTS' : 'BLANK', 'Only one of all, products or collections must be given.'));
  }
  const ids: [string, string[] | undefined, string][] = [
    ['Product', items.products?.productsToAdd, 'productsToAdd'],
    ['ProductVariant', items.products?.productVariantsToAdd, 'productVariantsToAdd'],
    ['Collection', items.collections?.add, 'add'],
  ];
  for (const [type, list, key] of ids) {
    (list ?? []).forEach((id, i) => {
      if (!GID(type).test(id)) {
        const path = type === 'Collection' ? ['collections', key] : ['products', key];
        errors.push(discountError(at('customerGets', 'items', ...path, String(i)), 'INVALID', `${type} with id: ${id} is invalid`));
      }
    });
  }
  if (items.products && !items.products.productsToAdd?.length && !items.products.productVariantsToAdd?.length) {
    errors.push(discountError(at('customerGets', 'items', 'products'), 'APPLIES_ON_NOTHING', 'Discount must apply to at least one product or variant.'));
  }
  return errors;
}

const createDiscount =
  (kind: DiscountRecord['kind'], inputName: string): Root =>
  (args, ctx) => {
    requireScope(ctx, kind === 'DiscountCodeBasic' ? 'discountCodeBasicCreate' : 'discountCodeFreeShippingCreate', 'write_discounts');
    const input = args[inputName] as Args;
    const userErrors = discountInputErrors(input, inputName, ctx, kind === 'DiscountCodeBasic');
    if (userErrors.length) return { codeDiscountNode: null, userErrors };
    const now = ctx.store.now();
    const record: DiscountRecord = {
      id: ctx.store.ids.next('DiscountCodeNode'),
      codeId: ctx.store.ids.next('DiscountRedeemCode'),
      kind,
      input,
      code: String(input.code),
      createdAt: now,
      updatedAt: now,
      startsAt: Date.parse(String(input.startsAt)),
      endsAt: input.endsAt == null ? null : Date.parse(String(input.endsAt)),
    };
    ctx.store.addDiscount(record);
    return { codeDiscountNode: discountView(record, ctx.store), userErrors: [] };
  };

const discountNotFound = (id: string) => [discountError(['id'], 'INVALID', `Discount does not exist: ${id}`)];

const mutationRoot: Record<string, Root> = {
  discountCodeBasicCreate: createDiscount('DiscountCodeBasic', 'basicCodeDiscount'),
  discountCodeFreeShippingCreate: createDiscount('DiscountCodeFreeShipping', 'freeShippingCodeDiscount'),
  discountCodeDeactivate: scoped('discountCodeDeactivate', 'write_discounts', (args, ctx) => {
    const discount = ctx.store.discounts.get(String(args.id));
    if (!discount) return { codeDiscountNode: null, userErrors: discountNotFound(String(args.id)) };
    // Shopify deactivates by ending the discount now; an already ended one keeps its end.
    if (ctx.store.discountStatus(discount) !== 'EXPIRED') {
      discount.endsAt = ctx.store.now();
      discount.updatedAt = ctx.store.now();
    }
    return { codeDiscountNode: discountView(discount, ctx.store), userErrors: [] };
  }),
  discountCodeDelete: scoped('discountCodeDelete', 'write_discounts', (args, ctx) => {
    const id = String(args.id);
    if (!ctx.store.deleteDiscount(id)) return { deletedCodeDiscountId: null, userErrors: discountNotFound(id) };
    return { deletedCodeDiscountId: id, userErrors: [] };
  }),

  webhookSubscriptionCreate: (args, ctx) => {
    const input = args.webhookSubscription as Args;
    const viaCallbackUrl = input.uri == null && input.callbackUrl != null;
    const uri = String(input.uri ?? input.callbackUrl ?? '');
    const field = ['webhookSubscription', viaCallbackUrl ? 'callbackUrl' : 'uri'];
    const fail = (message: string) => ({ webhookSubscription: null, userErrors: [{ field, message }] });
    if (!uri) return fail("Address can't be blank");
    if (/^http:\/\//i.test(uri)) return fail('Address protocol http:// is not supported');
    if (!/^(https:\/\/[^/\s]+|pubsub:\/\/[^:\s]+:[^\s]+|arn:aws:events:[^\s]+)/i.test(uri)) return fail('Address is invalid');
    const topic = String(args.topic);
    if ([...ctx.store.webhooks.values()].some((hook) => hook.topic === topic && hook.uri === uri)) {
      return fail('Address for this topic has already been taken');
    }
    const now = ctx.store.now();
    const record: WebhookRecord = {
      id: ctx.store.ids.next('WebhookSubscription'),
      topic,
      uri,
      format: String(input.format ?? 'JSON'),
      input,
      createdAt: now,
      updatedAt: now,
    };
    ctx.store.webhooks.set(record.id, record);
    return { webhookSubscription: webhookView(record), userErrors: [] };
  },
  webhookSubscriptionDelete: (args, ctx) => {
    const id = String(args.id);
    if (!ctx.store.webhooks.delete(id)) {
      return { deletedWebhookSubscriptionId: null, userErrors: [{ field: ['id'], message: 'Webhook subscription does not exist' }] };
    }
    return { deletedWebhookSubscriptionId: id, userErrors: [] };
  },

  bulkOperationRunQuery: (args, ctx) => {
    const bulkError = (code: string, message: string) => ({ bulkOperation: null, userErrors: [{ field: ['query'], code, message }] });
    const running = ctx.store.runningBulkOperations();
    if (running.length >= ctx.store.bulkConcurrency) {
      return ctx.store.bulkConcurrency === 1
        ? bulkError('OPERATION_IN_PROGRESS', `A bulk query operation for this app and shop is already in progress: ${running[0]!.id}.`)
        : bulkError('LIMIT_REACHED', `A maximum of ${ctx.store.bulkConcurrency} bulk query operations can run at the same time per shop.`);
    }
    const parsed = parseBulkQuery(String(args.query));
    if ('error' in parsed) return bulkError('INVALID', parsed.error);
    // Run now, on what the store holds now: a snapshot, served when the operation completes.
    const result = runDocument(adminSchema(), parsed.document, {}, undefined, { ...ctx, bulk: true });
    const accessDenied = result.errors?.some((error) => error.extensions?.code === 'ACCESS_DENIED') ?? false;
    const otherError = result.errors?.find((error) => error.extensions?.code !== 'ACCESS_DENIED');
    if (otherError) return bulkError('INVALID', `Invalid bulk query: ${otherError.message}`);
    const outcome = accessDenied ? { jsonl: '', objectCount: 0, rootObjectCount: 0 } : flattenBulkResult(result.data);
    if ('error' in outcome) return bulkError('INVALID', outcome.error);
    const id = ctx.store.ids.next('BulkOperation');
    const op: BulkRecord = {
      id,
      query: String(args.query),
      groupObjects: Boolean(args.groupObjects),
      status: 'CREATED',
      createdAt: ctx.store.now(),
      completedAt: null,
      errorCode: accessDenied ? 'ACCESS_DENIED' : null,
      jsonl: outcome.jsonl,
      objectCount: outcome.objectCount,
      rootObjectCount: outcome.rootObjectCount,
      fileName: `${legacyId(id)}.jsonl`,
    };
    ctx.store.bulkOperations.set(id, op);
    return { bulkOperation: bulkView(op, ctx), userErrors: [] };
  },
  bulkOperationCancel: (args, ctx) => {
    const op = ctx.store.bulkOperations.get(String(args.id));
    if (!op) return { bulkOperation: null, userErrors: [{ field: ['id'], message: 'Bulk operation does not exist' }] };
    if (op.status !== 'CREATED' && op.status !== 'RUNNING') {
      return { bulkOperation: bulkView(op, ctx), userErrors: [{ field: null, message: `A bulk operation cannot be canceled when it is ${op.status.toLowerCase()}` }] };
    }
    op.status = 'CANCELED';
    op.completedAt = ctx.store.now();
    return { bulkOperation: bulkView(op, ctx), userErrors: [] };
  },
};

/** Runs a validated document with coerced variables against the store. */
export function runDocument(
  schema: GraphQLSchema,
  document: DocumentNode,
  variableValues: Record<string, unknown>,
  operationName: string | null | undefined,
  ctx: RequestContext,
): ExecutionResult {
  return execute({ schema, document, variableValues, operationName, contextValue: ctx, rootValue: {}, fieldResolver, typeResolver }) as ExecutionResult;
}

/**
 * Every document the service sends to Shopify's Admin API, in one place, so that one test
 * (test/shopify-admin-documents.test.ts) validates them all against the vendored schema of
 * SHOPIFY_API_VERSION: a field Shopify renamed fails there, not in a shop. Each names what it
 * costs in the shop's bucket (Shopify's rules: a mutation 10, an object 1, a connection 2 plus
 * `first` times a node; the same test checks the figure), which the throttle reserves before it sends.
 */

export type Operation = { name: string; query: string; cost: number };

const op = (name: string, cost: number, query: string): Operation => ({ name, cost, query: query.trim() });

export const APP_SCOPES = op(
  'AppScopes',
  3,
  `query AppScopes { currentAppInstallation { accessScopes { handle } } shop { myshopifyDomain } }`,
);

const DISCOUNT_RESULT = `codeDiscountNode { id } userErrors { field message code }`;

export const DISCOUNT_CODE_BASIC_CREATE = op(
  'DiscountCodeBasicCreate',
  10,
  `mutation DiscountCodeBasicCreate($discount: DiscountCodeBasicInput!) { discountCodeBasicCreate(basicCodeDiscount: $discount) { ${DISCOUNT_RESULT} } }`,
);

export const DISCOUNT_CODE_FREE_SHIPPING_CREATE = op(
  'DiscountCodeFreeShippingCreate',
  10,
  `mutation DiscountCodeFreeShippingCreate($discount: DiscountCodeFreeShippingInput!) { discountCodeFreeShippingCreate(freeShippingCodeDiscount: $discount) { ${DISCOUNT_RESULT} } }`,
);

/** A code created before a crash left its answer unread: found by its text, so it is never created twice. */
export const DISCOUNT_CODE_BY_CODE = op('DiscountCodeByCode', 1, `query DiscountCodeByCode($code: String!) { codeDiscountNodeByCode(code: $code) { id } }`);

export const DISCOUNT_CODE_DEACTIVATE = op(
  'DiscountCodeDeactivate',
  10,
  `mutation DiscountCodeDeactivate($id: ID!) { discountCodeDeactivate(id: $id) { codeDiscountNode { id } userErrors { field message code } } }`,
);

export const WEBHOOK_SUBSCRIPTIONS = op(
  'WebhookSubscriptions',
  102,
  `query WebhookSubscriptions { webhookSubscriptions(first: 100) { nodes { id topic uri } } }`,
);

export const WEBHOOK_SUBSCRIPTION_CREATE = op(
  'WebhookSubscriptionCreate',
  10,
  `mutation WebhookSubscriptionCreate($topic: WebhookSubscriptionTopic!, $subscription: WebhookSubscriptionInput!) {
    webhookSubscriptionCreate(topic: $topic, webhookSubscription: $subscription) { webhookSubscription { id topic uri } userErrors { field message } }
  }`,
);

export const WEBHOOK_SUBSCRIPTION_DELETE = op(
  'WebhookSubscriptionDelete',
  10,
  `mutation WebhookSubscriptionDelete($id: ID!) { webhookSubscriptionDelete(id: $id) { deletedWebhookSubscriptionId userErrors { field message } } }`,
);

/**
 * The history import (history-import.ts): a bulk query runs at Shopify, costing the bucket only the
 * mutation that starts it; its status is then read by id (`currentBulkOperation` is deprecated in
 * 2026-07). `groupObjects: true` because the import depends on it: an order's line items follow the
 * order in the result, so it is applied whole, in file order, a batch at a time (the flat output,
 * the default since 2026-01, may put them anywhere in the file).
 */
export const BULK_OPERATION_RUN_QUERY = op(
  'BulkOperationRunQuery',
  10,
  `mutation BulkOperationRunQuery($query: String!) {
    bulkOperationRunQuery(query: $query, groupObjects: true) { bulkOperation { id status } userErrors { field message code } }
  }`,
);

export const BULK_OPERATION = op(
  'BulkOperation',
  1,
  `query BulkOperation($id: ID!) { bulkOperation(id: $id) { id status errorCode objectCount url } }`,
);

const MONEY = '{ shopMoney { amount } }';
const BULK_CUSTOMER = `legacyResourceId defaultEmailAddress { emailAddress } createdAt updatedAt`;

/**
 * The bulk queries of the history import, for what was created since `since`: the fields
 * src/domain/shopify/bulk-payloads.ts maps onto the webhooks' shapes. Each order's customer comes
 * with it (an order may name one created before `since`).
 */
export function historyQuery(phase: 'customers' | 'orders', since: Date): string {
  const filter = JSON.stringify(`created_at:>='${since.toISOString()}'`);
  if (phase === 'customers') return `{ customers(query: ${filter}, sortKey: CREATED_AT) { edges { node { id ${BULK_CUSTOMER} } } } }`;
  return `{ orders(query: ${filter}, sortKey: CREATED_AT) { edges { node {
    id legacyResourceId email test currencyCode displayFinancialStatus cancelledAt processedAt updatedAt
    totalPriceSet ${MONEY} totalTaxSet ${MONEY} totalShippingPriceSet ${MONEY} discountCodes
    customer { ${BULK_CUSTOMER} }
    refunds { legacyResourceId createdAt totalRefundedSet ${MONEY} }
    lineItems { edges { node {
      id quantity currentQuantity isGiftCard originalUnitPriceSet ${MONEY}
      product { legacyResourceId } variant { legacyResourceId }
      discountAllocations { allocatedAmountSet ${MONEY} discountApplication { ... on DiscountCodeApplication { code } } }
    } } }
  } } } }`;
}

/**
 * A page of the catalogue with each product's collections, for the reconcile. Sizes fixed here so
 * the cost is known: 2 + 50 × (1 + (2 + 10)), under the 1,000 a query may cost; 50 products a
 * page with 10 collections each suits catalogues whose products sit in a few collections. A
 * product in more than 10 gets a read of its own (PRODUCT_COLLECTIONS).
 */
export const PRODUCTS_COLLECTIONS = op(
  'ProductsCollections',
  652,
  `query ProductsCollections($after: String) {
    products(first: 50, after: $after) { nodes { id collections(first: 10) { nodes { id } pageInfo { hasNextPage } } } pageInfo { hasNextPage endCursor } }
  }`,
);

/** One product's collections, a page at a time (null: the product is gone). Cost: 1 + (2 + 50). */
export const PRODUCT_COLLECTIONS = op(
  'ProductCollections',
  53,
  `query ProductCollections($id: ID!, $after: String) {
    product(id: $id) { id collections(first: 50, after: $after) { nodes { id } pageInfo { hasNextPage endCursor } } }
  }`,
);

export const OPERATIONS: readonly Operation[] = [
  APP_SCOPES,
  DISCOUNT_CODE_BASIC_CREATE,
  DISCOUNT_CODE_FREE_SHIPPING_CREATE,
  DISCOUNT_CODE_BY_CODE,
  DISCOUNT_CODE_DEACTIVATE,
  WEBHOOK_SUBSCRIPTIONS,
  WEBHOOK_SUBSCRIPTION_CREATE,
  WEBHOOK_SUBSCRIPTION_DELETE,
  BULK_OPERATION_RUN_QUERY,
  BULK_OPERATION,
  PRODUCTS_COLLECTIONS,
  PRODUCT_COLLECTIONS,
];

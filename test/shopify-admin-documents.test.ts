import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { buildClientSchema, getVariableValues, type GraphQLSchema, type IntrospectionQuery, Kind, type OperationDefinitionNode, parse, validate } from 'graphql';
import { describe, expect, it } from 'vitest';
import { type CodeTermsRow, percentFraction, shopifyDiscountOf } from '../src/domain/shopify/index.js';
import { SHOPIFY_API_VERSION } from '../src/shopify-admin/client.js';
import { DISCOUNT_CODE_BASIC_CREATE, DISCOUNT_CODE_FREE_SHIPPING_CREATE, historyQuery, OPERATIONS, type Operation } from '../src/shopify-admin/operations.js';
import { operationCost } from './support/shopify-admin/cost.ts';

// Every document the service sends, and every input it builds, checked against Shopify's published
// Admin schema of the pinned version (test/fixtures/shopify/README.md): a field Shopify renamed or
// an input it no longer takes fails here, not in a shop.
const schema: GraphQLSchema = buildClientSchema(
  (JSON.parse(gunzipSync(readFileSync(new URL(`./fixtures/shopify/admin_${SHOPIFY_API_VERSION}.json.gz`, import.meta.url))).toString()) as { data: IntrospectionQuery }).data,
);

function variableErrors(operation: Operation, variables: Record<string, unknown>): string[] {
  const definition = parse(operation.query).definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION)!;
  const result = getVariableValues(schema, definition.variableDefinitions ?? [], variables);
  return 'errors' in result && result.errors ? result.errors.map((e) => e.message) : [];
}

describe(`the documents sent to Shopify's Admin API ${SHOPIFY_API_VERSION}`, () => {
  it.each(OPERATIONS.map((o) => [o.name, o] as const))('%s is valid against the schema', (_name, operation) => {
    expect(validate(schema, parse(operation.query)).map((e) => e.message)).toEqual([]);
  });

  it.each(['customers', 'orders'] as const)('the history import\'s bulk query of %s is valid against the schema', (phase) => {
    expect(validate(schema, parse(historyQuery(phase, new Date('2026-01-01T00:00:00Z')))).map((e) => e.message)).toEqual([]);
  });

  // The throttle reserves the declared cost before sending: one below Shopify's requested cost would be throttled by Shopify instead.
  it.each(OPERATIONS.map((o) => [o.name, o] as const))('%s declares what Shopify charges for it before it runs', (_name, operation) => {
    const definition = parse(operation.query).definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION)!;
    expect(operation.cost).toBe(operationCost(schema, definition, new Map(), {}));
  });

  it('a misspelt field is caught (the check itself works)', () => {
    expect(validate(schema, parse('query { currentAppInstallation { accessScope { handle } } }')).length).toBeGreaterThan(0);
  });
});

const base: CodeTermsRow = {
  code: 'LOYAL-ABC',
  type: 'amount',
  value: '5.00',
  variant_id: null,
  expires_at: new Date('2027-01-31T23:00:00Z'),
  created_at: new Date('2026-11-27T10:00:00Z'),
  shopify_customer_id: '8203451982051234567',
  name: '$5 off',
  apply_product_option: 'all',
  apply_products: [],
  apply_collections: [],
  apply_variants: [],
  minimum_requirement_type: 'none',
  minimum_requirement_value: null,
  combinations: [],
};

describe('a code as Shopify discount input', () => {
  const cases: Array<[string, Partial<CodeTermsRow>, 'basic' | 'free_shipping', (input: Record<string, any>) => void]> = [
    ['an amount on the whole order, for its customer only, once', {}, 'basic', (i) => {
      expect(i.customerGets).toEqual({ value: { discountAmount: { amount: '5.00', appliesOnEachItem: false } }, items: { all: true } });
      expect(i.context).toEqual({ customers: { add: ['gid://shopify/Customer/8203451982051234567'] } });
      expect([i.usageLimit, i.appliesOncePerCustomer, i.endsAt, i.code]).toEqual([1, true, '2027-01-31T23:00:00.000Z', 'LOYAL-ABC']);
    }],
    ['a percentage on products and variants', { type: 'percentage', value: '12.5', apply_product_option: 'products', apply_products: ['111'], apply_variants: ['gid://shopify/ProductVariant/222'] }, 'basic', (i) => {
      expect(i.customerGets).toEqual({ value: { percentage: 0.125 }, items: { products: { productsToAdd: ['gid://shopify/Product/111'], productVariantsToAdd: ['gid://shopify/ProductVariant/222'] } } });
    }],
    ['a percentage on collections, with a minimum subtotal', { type: 'percentage', value: '10', apply_product_option: 'collections', apply_collections: ['333'], minimum_requirement_type: 'purchase_amount', minimum_requirement_value: '50.00' }, 'basic', (i) => {
      expect(i.customerGets.items).toEqual({ collections: { add: ['gid://shopify/Collection/333'] } });
      expect(i.minimumRequirement).toEqual({ subtotal: { greaterThanOrEqualToSubtotal: '50.00' } });
    }],
    ['a minimum quantity, combinations', { minimum_requirement_type: 'quantity', minimum_requirement_value: 3, combinations: ['order_discounts', 'shipping_discounts'] }, 'basic', (i) => {
      expect(i.minimumRequirement).toEqual({ quantity: { greaterThanOrEqualToQuantity: '3' } });
      expect(i.combinesWith).toEqual({ orderDiscounts: true, productDiscounts: false, shippingDiscounts: true });
    }],
    ['free shipping up to its value', { type: 'shipping', value: '8.00' }, 'free_shipping', (i) => {
      expect([i.maximumShippingPrice, i.destination]).toEqual(['8.00', { all: true }]);
    }],
    ['free shipping, all of it', { type: 'shipping', value: '0' }, 'free_shipping', (i) => {
      expect(i).not.toHaveProperty('maximumShippingPrice');
    }],
    ['a free product: 100 % off its variant', { type: 'free_product', value: '0', variant_id: '444' }, 'basic', (i) => {
      expect(i.customerGets).toEqual({ value: { percentage: 1 }, items: { products: { productVariantsToAdd: ['gid://shopify/ProductVariant/444'] } } });
    }],
    ['a customer Shopify does not know, a code that never expires', { shopify_customer_id: null, expires_at: null }, 'basic', (i) => {
      expect([i.context, i.endsAt]).toEqual([{ all: 'ALL' }, null]);
    }],
    ['a customer known by an id that is not Shopify\'s', { shopify_customer_id: 'ada@example.com' }, 'basic', (i) => {
      expect(i.context).toEqual({ all: 'ALL' });
    }],
    ['a customer known by a global id', { shopify_customer_id: 'gid://shopify/Customer/42' }, 'basic', (i) => {
      expect(i.context).toEqual({ customers: { add: ['gid://shopify/Customer/42'] } });
    }],
  ];
  it.each(cases)('%s', (_name, overrides, mutation, check) => {
    const discount = shopifyDiscountOf({ ...base, ...overrides });
    expect(discount.mutation).toBe(mutation);
    check(discount.input);
    // Shopify would take it: the variables coerce against the mutation's input type.
    expect(variableErrors(mutation === 'basic' ? DISCOUNT_CODE_BASIC_CREATE : DISCOUNT_CODE_FREE_SHIPPING_CREATE, { discount: discount.input })).toEqual([]);
  });

  it('a field Shopify does not take is caught (the check itself works)', () => {
    expect(variableErrors(DISCOUNT_CODE_BASIC_CREATE, { discount: { ...shopifyDiscountOf(base).input, customerSelection: { all: true }, usageLimits: 1 } })).not.toEqual([]);
  });

  it.each([
    ['10', 0.1], ['12.5', 0.125], ['5', 0.05], ['100', 1], ['0.5', 0.005], ['33.33', 0.3333], ['10.00', 0.1],
  ] as const)('%s percent is the fraction %d', (percent, fraction) => {
    expect(percentFraction(percent)).toBe(fraction);
  });
});

import { describe, expect, it } from 'vitest';
import { DomainError } from '../src/domain/kernel/index.js';
import { customerFromBulk, orderFromBulk, orderPut, parseShopifyJson } from '../src/domain/shopify/index.js';

// The history import's mapping of bulk operation objects (Admin GraphQL shapes, as the JSONL carries
// them) onto the webhooks' shapes, and from there onto PUT /orders, as the connector maps a webhook.

const money = (amount: string) => ({ shopMoney: { amount } });

const ORDER = {
  id: 'gid://shopify/Order/9007199254740993',
  legacyResourceId: '9007199254740993',
  email: 'ada@example.com',
  test: false,
  currencyCode: 'EUR',
  displayFinancialStatus: 'PARTIALLY_REFUNDED',
  cancelledAt: null,
  processedAt: '2026-07-03T08:00:00Z',
  updatedAt: '2026-07-05T09:30:00Z',
  totalPriceSet: money('83.00'),
  totalTaxSet: money('13.25'),
  totalShippingPriceSet: money('4.90'),
  discountCodes: ['SAVE5'],
  customer: { legacyResourceId: '9007199254740999', defaultEmailAddress: { emailAddress: 'ada@example.com' }, createdAt: '2026-01-02T10:00:00Z', updatedAt: '2026-07-01T10:00:00Z' },
  refunds: [
    { legacyResourceId: '9007199254741002', createdAt: '2026-07-05T09:30:00Z', totalRefundedSet: money('10.00') },
    { legacyResourceId: '9007199254741001', createdAt: '2026-07-04T09:30:00Z', totalRefundedSet: money('4.50') },
  ],
};

const LINES = [
  {
    id: 'gid://shopify/LineItem/9007199254741010',
    quantity: 3,
    currentQuantity: 2,
    isGiftCard: false,
    originalUnitPriceSet: money('20.00'),
    product: { legacyResourceId: '9007199254741020' },
    variant: { legacyResourceId: '9007199254741021' },
    discountAllocations: [
      { allocatedAmountSet: money('5.00'), discountApplication: { code: 'SAVE5' } },
      { allocatedAmountSet: money('1.50'), discountApplication: {} },
    ],
    __parentId: ORDER.id,
  },
  { id: 'gid://shopify/LineItem/9007199254741011', quantity: 1, currentQuantity: 1, isGiftCard: true, originalUnitPriceSet: money('25.00'), product: null, variant: null, discountAllocations: [], __parentId: ORDER.id },
];

describe('bulk objects as the webhooks carry them', () => {
  it('an order with its lines: ids as Shopify numbers them, money exact, refunds with their money, the units on the latest', () => {
    const { order, text } = orderFromBulk(ORDER, LINES);
    expect(parseShopifyJson(text)).toMatchObject({ id: '9007199254740993', customer: { id: '9007199254740999' } });
    const { orderId, body } = orderPut(order, []);
    expect(orderId).toBe('9007199254740993');
    expect(body).toMatchObject({
      customerIdentifier: '9007199254740999',
      currency: 'EUR',
      subtotal: '78.50',
      shipping: '4.90',
      tax: '13.25',
      total: '83.00',
      refunded: '14.50',
      status: 'partially_refunded',
      processedAt: '2026-07-03T08:00:00.000Z',
      sourceUpdatedAt: '2026-07-05T09:30:00.000Z',
      discountCodes: [{ code: 'SAVE5', amount: '5.00' }],
      lineItems: [
        { productId: '9007199254741020', variantId: '9007199254741021', quantity: 3, price: '20.00', discount: '6.50', refundedQuantity: 1, giftCard: false },
        { productId: 'line-9007199254741011', variantId: null, quantity: 1, price: '25.00', discount: '0.00', refundedQuantity: 0, giftCard: true },
      ],
    });
    expect(order.refunds.map((r) => [r.id, r.refund_line_items.length])).toEqual([['9007199254741001', 0], ['9007199254741002', 1]]);
  });

  it('a refund delivered later by its webhook replaces the imported one of the same id: counted once', () => {
    const { order } = orderFromBulk(ORDER, LINES);
    const webhookRefund = { ...order.refunds[1]!, transactions: [{ kind: 'refund', status: 'success', amount: '10.00' }] };
    expect(orderPut(order, [webhookRefund]).body.refunded).toBe('14.50');
  });

  it('a guest checkout and a customer', () => {
    const { order } = orderFromBulk({ ...ORDER, customer: null }, LINES);
    expect(() => orderPut(order, [])).toThrow(/guest checkout/);
    expect(customerFromBulk({ id: 'gid://shopify/Customer/9007199254740999', ...ORDER.customer })).toEqual({
      id: '9007199254740999',
      email: 'ada@example.com',
      created_at: '2026-01-02T10:00:00Z',
      updated_at: '2026-07-01T10:00:00Z',
    });
  });

  it('objects that are not what the query asked for are refused with a reason, as a webhook body is', () => {
    for (const [object, lines] of [
      [{ ...ORDER, legacyResourceId: undefined }, LINES],
      [ORDER, [{ ...LINES[0], originalUnitPriceSet: money('twenty') }]],
      [ORDER, [{ ...LINES[0], id: 'LineItem/12' }]],
      [{ ...ORDER, totalPriceSet: money('1.001') }, []],
    ] as const) {
      expect(() => orderPut(orderFromBulk(object, lines as never).order, [])).toThrow(DomainError);
    }
  });
});

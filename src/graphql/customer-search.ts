import { CUSTOMER_MATCHES, type CustomerHit, CUSTOMER_SEARCH_MAX, searchCustomers } from '../domain/search/index.js';
import { builder } from './builder.js';
import { Customer } from './customer.js';

const CustomerMatch = builder.enumType('CustomerMatch', {
  description: 'How customerSearch found a customer.',
  values: CUSTOMER_MATCHES,
});

const CustomerSearchHit = builder.objectRef<CustomerHit>('CustomerSearchHit').implement({
  fields: (t) => ({
    customer: t.field({ type: Customer, resolve: (hit) => hit.customer }),
    matchedBy: t.field({ type: CustomerMatch, resolve: (hit) => hit.matchedBy }),
  }),
});

builder.queryFields((t) => ({
  customerSearch: t.field({
    type: [CustomerSearchHit],
    description:
      'The staff console\'s search: customers whose shop customer id or one of whose discount codes is exactly `query` (a code also upper-cased), ' +
      'then those whose e-mail starts with it (case-insensitive), in e-mail order. A customer found two ways shows once, by the more exact.',
    args: {
      query: t.arg.string({ required: true, description: '1 to 320 characters, trimmed.' }),
      first: t.arg.int({ required: false, description: `At most this many, 1 to ${CUSTOMER_SEARCH_MAX}; 20 when omitted.` }),
    },
    resolve: (_root, args, ctx) => searchCustomers(ctx.db, ctx.shop.id, args),
  }),
}));

import { createCustomerAccessToken, type CustomerAccessToken as TokenShape, revokeCustomerAccessTokens } from '../domain/customers/index.js';
import { actorOf, builder } from './builder.js';
import { Customer } from './customer.js';
import { markResponseSecret } from './no-store.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const CustomerAccessTokenCreateInput = builder.inputType('CustomerAccessTokenCreateInput', {
  fields: (t) => ({
    customerIdentifier: t.string({ description: 'Shop customer id or e-mail.' }),
    expiresInSeconds: t.int({ required: false, description: '60 to 86,400 (24 h); default 3,600.' }),
  }),
});

const CustomerAccessTokenCreatePayload = builder
  .objectRef<Partial<TokenShape> & { userErrors: UserErrorShape[] }>('CustomerAccessTokenCreatePayload')
  .implement({
    fields: (t) => ({
      accessToken: t.string({
        nullable: true,
        description: 'The token (`ct_…`) for the customer\'s storefront, shown only here: only its hash is stored.',
        resolve: (p) => p.accessToken ?? null,
      }),
      expiresAt: t.field({ type: 'DateTime', nullable: true, resolve: (p) => p.expiresAt ?? null }),
      customer: t.field({ type: Customer, nullable: true, resolve: (p) => p.customer ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

const CustomerAccessTokensRevokeInput = builder.inputType('CustomerAccessTokensRevokeInput', {
  fields: (t) => ({ customerIdentifier: t.string({ description: 'Shop customer id or e-mail.' }) }),
});

const CustomerAccessTokensRevokePayload = builder
  .objectRef<{ revokedCount?: number; userErrors: UserErrorShape[] }>('CustomerAccessTokensRevokePayload')
  .implement({
    fields: (t) => ({
      revokedCount: t.int({ nullable: true, description: 'Live tokens revoked.', resolve: (p) => p.revokedCount ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

builder.mutationFields((t) => ({
  customerAccessTokenCreate: t.field({
    type: CustomerAccessTokenCreatePayload,
    description: 'A token for one customer\'s storefront (docs/storefront.md): the browser holds it instead of the shop\'s API key.',
    args: { input: t.arg({ type: CustomerAccessTokenCreateInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      withUserErrors(async () => {
        const created = await createCustomerAccessToken(ctx.db, ctx.shop.id, input);
        markResponseSecret(ctx);
        return created;
      }),
  }),
  customerAccessTokensRevoke: t.field({
    type: CustomerAccessTokensRevokePayload,
    description: 'Revokes every live token of the customer, at once.',
    args: { input: t.arg({ type: CustomerAccessTokensRevokeInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => revokeCustomerAccessTokens(ctx.db, ctx.shop.id, input, new Date(), actorOf(ctx))),
  }),
}));

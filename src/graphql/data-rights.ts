import { type CustomerErased, eraseCustomer, exportCustomerData } from '../domain/data-rights/index.js';
import { NotFoundError } from '../domain/kernel/index.js';
import { actorOf, builder } from './builder.js';
import { Customer } from './customer.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const CustomerEraseInput = builder.inputType('CustomerEraseInput', {
  fields: (t) => ({ customerIdentifier: t.string({ description: 'Shop customer id or e-mail.' }) }),
});

const CustomerErasePayload = builder.objectRef<Partial<CustomerErased> & { userErrors: UserErrorShape[] }>('CustomerErasePayload').implement({
  fields: (t) => ({
    customer: t.field({ type: Customer, nullable: true, description: 'The tombstone: the same `_id`, balance and ledger; no e-mail, shop customer id or birthday of theirs.', resolve: (p) => p.customer ?? null }),
    cancelledCodes: t.int({ nullable: true, description: 'Issued codes of theirs cancelled (their points were not given back).', resolve: (p) => p.cancelledCodes ?? null }),
    revokedTokens: t.int({ nullable: true, description: 'Storefront tokens of theirs revoked.', resolve: (p) => p.revokedTokens ?? null }),
    purgedDeliveries: t.int({ nullable: true, description: 'Webhook deliveries whose payload carried them: emptied, and cancelled where still to send.', resolve: (p) => p.purgedDeliveries ?? null }),
    purgedShopifyWebhooks: t.int({ nullable: true, description: 'Stored Shopify webhooks that carried them: emptied.', resolve: (p) => p.purgedShopifyWebhooks ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

builder.queryFields((t) => ({
  customerDataExport: t.field({
    type: 'JSON',
    nullable: true,
    description:
      'Everything held on one customer, as one JSON document (a data-protection access request): profile, tier, ledger, pending points, orders, codes, referrals, tokens\' metadata, e-mails and the webhook deliveries that carried their data (docs/data-rights.md). Null when the shop has no such customer.',
    args: { customerIdentifier: t.arg.string({ required: true, description: 'Shop customer id or e-mail.' }) },
    resolve: async (_root, { customerIdentifier }, ctx) => {
      try {
        return await exportCustomerData(ctx.db, ctx.shop.id, { customerIdentifier });
      } catch (err) {
        if (err instanceof NotFoundError) return null;
        throw err;
      }
    },
  }),
}));

builder.mutationFields((t) => ({
  customerErase: t.field({
    type: CustomerErasePayload,
    description:
      'Erases a customer on request (docs/data-rights.md): their e-mail, shop customer id and birthday are replaced by a tombstone\'s, their codes cancelled, tokens revoked, and the stored payloads that carried them purged; their ledger and orders stay, under the tombstone. Cannot be undone.',
    args: { input: t.arg({ type: CustomerEraseInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => eraseCustomer(ctx.db, ctx.shop.id, input, actorOf(ctx))),
  }),
}));

import { adminConnectionView, type AdminConnectionView as AdminConnectionShape, type WebhookRegistration as WebhookRegistrationShape } from '../domain/shopify/index.js';
import { actorOf, builder } from './builder.js';
import { Shop } from './shop.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const ShopifyWebhookRegistration = builder.objectRef<WebhookRegistrationShape>('ShopifyWebhookRegistration').implement({
  description: 'A topic the connector subscribed the store to, as Shopify last answered.',
  fields: (t) => ({
    topic: t.exposeString('topic'),
    state: t.field({
      type: builder.enumType('ShopifyWebhookRegistrationState', { values: ['pending', 'registered', 'failed'] as const }),
      resolve: (w) => w.state,
    }),
    error: t.exposeString('error', { nullable: true, description: 'Why Shopify refused it (or why it was not sent: PUBLIC_URL unset).' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const ShopifyAdminType = builder.objectRef<AdminConnectionShape>('ShopifyAdmin').implement({
  description: 'The connector\'s access to the store\'s Admin API: codes created there, webhooks registered. Secrets are never shown.',
  fields: (t) => ({
    auth: t.field({
      type: builder.enumType('ShopifyAdminAuth', {
        values: { access_token: { description: 'An Admin API access token of a custom app.' }, client_credentials: { description: 'A Dev Dashboard app\'s client id and secret; tokens renewed before they lapse.' } } as const,
      }),
      resolve: (c) => c.auth,
    }),
    clientId: t.exposeString('clientId', { nullable: true }),
    scopes: t.exposeStringList('scopes', { description: 'The access scopes Shopify granted.' }),
    missingScopes: t.exposeStringList('missingScopes', { description: 'Scopes the connector needs and the app lacks (none when connected; one revoked since shows here).' }),
    connectedAt: t.expose('connectedAt', { type: 'DateTime' }),
    tokenExpiresAt: t.expose('tokenExpiresAt', { type: 'DateTime', nullable: true, description: 'When the current client-credentials token lapses (it is renewed an hour before).' }),
    webhooks: t.field({ type: [ShopifyWebhookRegistration], resolve: (c) => c.webhooks }),
    codesPending: t.int({ resolve: (c) => c.codes.pending, description: 'Codes waiting to be created in Shopify.' }),
    codesSynced: t.int({ resolve: (c) => c.codes.synced }),
    codesFailed: t.int({ resolve: (c) => c.codes.failed, description: 'Codes Shopify refused (each cancelled, its points back; see DiscountCode.shopifyError).' }),
    productsRead: t.int({ resolve: (c) => c.catalogue.products, description: 'Products whose collections were read from the store, for earning rules\' collection lists.' }),
    collectionsReconciledAt: t.field({
      type: 'DateTime',
      nullable: true,
      resolve: (c) => c.catalogue.reconciledAt,
      description: 'When the last full read of the products\' collections ended (one runs on connecting and daily); null before the first.',
    }),
  }),
});

builder.objectFields(Shop, (t) => ({
  shopifyAdmin: t.field({
    type: ShopifyAdminType,
    nullable: true,
    description: 'The Shopify Admin API connection; null when there is none.',
    resolve: (shop, _args, ctx) => adminConnectionView(ctx.db, shop.id),
  }),
}));

const ShopifyAdminConnectInput = builder.inputType('ShopifyAdminConnectInput', {
  description: 'Either an Admin API access token, or a Dev Dashboard app\'s client id and secret.',
  fields: (t) => ({
    accessToken: t.string({ required: false, description: 'A custom app\'s Admin API access token (shpat_…).' }),
    clientId: t.string({ required: false }),
    clientSecret: t.string({ required: false }),
  }),
});

const ShopifyAdminConnectPayload = builder.objectRef<{ shopifyAdmin?: AdminConnectionShape; userErrors: UserErrorShape[] }>('ShopifyAdminConnectPayload').implement({
  fields: (t) => ({
    shopifyAdmin: t.field({ type: ShopifyAdminType, nullable: true, resolve: (p) => p.shopifyAdmin ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

const ShopifyAdminDisconnectPayload = builder.objectRef<{ disconnected?: boolean; userErrors: UserErrorShape[] }>('ShopifyAdminDisconnectPayload').implement({
  fields: (t) => ({
    disconnected: t.boolean({ nullable: true, resolve: (p) => p.disconnected ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

builder.mutationFields((t) => ({
  shopifyAdminConnect: t.field({
    type: ShopifyAdminConnectPayload,
    description:
      'Connects the store (set its domain first with shopifySettingsUpdate) to the Admin API: checks the credentials and the scopes Shopify granted (write_discounts, read_orders, read_customers, read_products), then registers the connector\'s webhooks and creates each code issued from now on in Shopify. Errors: shopify_credentials_refused, shopify_scopes_missing (the message names them), shopify_unreachable, shopify_not_connected.',
    args: { input: t.arg({ type: ShopifyAdminConnectInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      withUserErrors(async () => ({
        shopifyAdmin: await ctx.shopifyAdmin.connect(ctx.shop.id, {
          accessToken: input.accessToken ?? undefined,
          clientId: input.clientId ?? undefined,
          clientSecret: input.clientSecret ?? undefined,
        }, actorOf(ctx)),
      })),
  }),
  shopifyAdminDisconnect: t.field({
    type: ShopifyAdminDisconnectPayload,
    description: 'Undoes shopifyAdminConnect: removes the webhooks it registered from Shopify, forgets the credentials and the queued work. Codes already in Shopify stay there.',
    resolve: (_root, _args, ctx) =>
      withUserErrors(async () => {
        await ctx.shopifyAdmin.disconnect(ctx.shop.id, actorOf(ctx));
        return { disconnected: true };
      }),
  }),
}));

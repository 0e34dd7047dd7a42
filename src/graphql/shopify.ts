import { getShopifyConnection, listShopifyWebhooks, retryShopifyWebhook, setShopifyConnection, type ShopifyConnection as ShopifyConnectionShape, type ShopifyWebhook as ShopifyWebhookShape } from '../domain/shopify/index.js';
import { actorOf, builder } from './builder.js';
import { forwardPageArgs, PAGE_ARGS, toConnection } from './connections.js';
import { Shop } from './shop.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const ShopifySettings = builder.objectRef<ShopifyConnectionShape>('ShopifySettings').implement({
  description: 'Where the Shopify connector takes its webhooks from. Shopify sends them to POST /integrations/shopify/webhooks.',
  fields: (t) => ({
    shopDomain: t.exposeString('shopDomain', { nullable: true, description: 'The store\'s myshopify.com domain (X-Shopify-Shop-Domain); null: not connected.' }),
    webhookSecretSet: t.exposeBoolean('webhookSecretSet', { description: 'Whether a webhook secret is stored (it is never shown).' }),
  }),
});

const ShopifyWebhookStatus = builder.enumType('ShopifyWebhookStatus', {
  values: {
    waiting: { description: 'Stored, not applied yet (or to be tried again: see error).' },
    waiting_for_order: { description: 'A refund that came before its order: kept, and applied with the order\'s first webhook (then: applied).' },
    applied: {},
    rejected: { description: 'Not applied: see error.' },
    failed: { description: 'Set aside after its last try failed: see error; shopifyWebhookRetry tries it again.' },
  } as const,
});

const ShopifyWebhook = builder.objectRef<ShopifyWebhookShape>('ShopifyWebhook').implement({
  description: 'A webhook the shop\'s Shopify store sent, and what became of it.',
  fields: (t) => ({
    id: t.exposeID('_id'),
    webhookId: t.exposeString('webhookId', { description: 'X-Shopify-Webhook-Id: a second delivery of it is dropped.' }),
    topic: t.exposeString('topic'),
    shopifyOrderId: t.exposeString('shopifyOrderId', { nullable: true }),
    status: t.field({ type: ShopifyWebhookStatus, resolve: (w) => w.status }),
    attempts: t.exposeInt('attempts'),
    error: t.exposeString('error', { nullable: true, description: 'Why it was rejected, or why the last try failed.' }),
    receivedAt: t.expose('receivedAt', { type: 'DateTime' }),
    processedAt: t.expose('processedAt', { type: 'DateTime', nullable: true }),
  }),
});

builder.objectFields(Shop, (t) => ({
  shopify: t.field({ type: ShopifySettings, description: 'The Shopify connector\'s settings.', resolve: (shop, _args, ctx) => getShopifyConnection(ctx.db, shop.id) }),
  shopifyWebhooks: t.field({
    type: builder.connectionObject({ type: ShopifyWebhook, name: 'ShopifyWebhookConnection' }, { name: 'ShopifyWebhookEdge' }),
    description: 'The webhooks the Shopify store sent, newest first: rejections are here with their reason.',
    args: PAGE_ARGS,
    resolve: async (shop, args, ctx) => toConnection(await listShopifyWebhooks(ctx.db, shop.id, forwardPageArgs(args))),
  }),
}));

const ShopifySettingsInput = builder.inputType('ShopifySettingsInput', {
  fields: (t) => ({
    shopDomain: t.string({ required: true, description: 'The store\'s myshopify.com domain, such as my-shop.myshopify.com.' }),
    webhookSecret: t.string({ required: false, description: 'The secret Shopify signs webhooks with (the app\'s client secret); omitted keeps the stored one.' }),
  }),
});

const ShopifySettingsUpdatePayload = builder
  .objectRef<{ shopify?: ShopifyConnectionShape; userErrors: UserErrorShape[] }>('ShopifySettingsUpdatePayload')
  .implement({
    fields: (t) => ({
      shopify: t.field({ type: ShopifySettings, nullable: true, resolve: (p) => p.shopify ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

builder.mutationFields((t) => ({
  shopifySettingsUpdate: t.field({
    type: ShopifySettingsUpdatePayload,
    description: 'Connects the shop to its Shopify store: webhooks signed with the secret and naming the domain are taken in.',
    args: { input: t.arg({ type: ShopifySettingsInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      withUserErrors(async () => ({
        shopify: await setShopifyConnection(ctx.db, ctx.webhooks.secrets, ctx.shop.id, { shopDomain: input.shopDomain, webhookSecret: input.webhookSecret ?? undefined }, actorOf(ctx)),
      })),
  }),
}));

const ShopifyWebhookRetryInput = builder.inputType('ShopifyWebhookRetryInput', {
  fields: (t) => ({ id: t.id({ required: true, description: 'The webhook\'s `id` (not its webhookId).' }) }),
});

const ShopifyWebhookRetryPayload = builder
  .objectRef<{ shopifyWebhook?: ShopifyWebhookShape; userErrors: UserErrorShape[] }>('ShopifyWebhookRetryPayload')
  .implement({
    fields: (t) => ({
      shopifyWebhook: t.field({ type: ShopifyWebhook, nullable: true, resolve: (p) => p.shopifyWebhook ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

builder.mutationFields((t) => ({
  shopifyWebhookRetry: t.field({
    type: ShopifyWebhookRetryPayload,
    description: 'Tries a webhook set aside as `failed` again, once its cause is fixed: it is `waiting` until the next pass applies it (or fails it again). Another status: `shopify_webhook_not_failed`.',
    args: { input: t.arg({ type: ShopifyWebhookRetryInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(async () => ({ shopifyWebhook: await retryShopifyWebhook(ctx.db, ctx.shop.id, String(input.id), actorOf(ctx)) })),
  }),
}));

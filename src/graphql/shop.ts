import { getShopSettings, type ShopSettings as ShopSettingsShape, updateShopSettings } from '../domain/settings/index.js';
import { type ApiKeyInfo, createApiKey, listApiKeys, revokeApiKeyOnRequest, type Shop as ShopShape } from '../domain/shops/index.js';
import { actorOf, builder } from './builder.js';
import { ExpirySettings, ExpirySettingsInput } from './expiry.js';
import { markResponseSecret } from './no-store.js';
import { TierSettings, TierSettingsInput } from './tier.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

const ShopSettings = builder.objectRef<ShopSettingsShape>('ShopSettings').implement({
  description: 'The shop\'s own settings. A null override means the server\'s default.',
  fields: (t) => ({
    referrerPoints: t.exposeInt('referrerPoints', { description: 'Points for the referrer per referee; 0 grants nothing.' }),
    refereePoints: t.exposeInt('refereePoints', { description: 'Points for the referee on sign-up; 0 grants nothing.' }),
    rateLimitPerMinute: t.exposeInt('rateLimitPerMinute', {
      nullable: true,
      description:
        'Requests per minute and operation for points, redemptions, referrals and GraphQL; null: the server\'s RATE_LIMIT_PER_MINUTE.',
    }),
    webhookRetentionDays: t.exposeInt('webhookRetentionDays', {
      nullable: true,
      description: 'Days finished webhook delivery records are kept; null: the server\'s WEBHOOK_RETENTION_DAYS.',
    }),
    currency: t.exposeString('currency', { description: 'ISO 4217 (default USD). Orders in another currency earn nothing; place_order rules count in it.' }),
    timezone: t.exposeString('timezone', { description: 'IANA time zone (default UTC): the shop\'s days start at its midnight (birthdays, per-day limits).' }),
    pendingDays: t.exposeInt('pendingDays', { description: 'Days an order\'s points wait as pending before they can be spent; 0 (default): at once.' }),
    expiry: t.field({ type: ExpirySettings, resolve: (s) => s.expiry }),
    tiers: t.field({ type: TierSettings, resolve: (s) => s.tiers }),
    storefrontOrigins: t.exposeStringList('storefrontOrigins', {
      description: 'Origins whose pages may call /storefront/graphql with this shop\'s customer access tokens (docs/storefront.md).',
    }),
    earnOnTestOrders: t.exposeBoolean('earnOnTestOrders', { description: 'Whether test orders (Shopify\'s test, Order.test) earn points; false by default.' }),
    signUpBonusSince: t.expose('signUpBonusSince', {
      type: 'DateTime',
      description:
        'A customer the Shopify connector (or a Shopify orders import) first sees gets the sign-up bonus only if Shopify says they signed up at or after this. ' +
        'Default: when the shop first connected its Shopify store (or, never connected, when the shop was created).',
    }),
    returnPointsOnCodeExpiry: t.exposeBoolean('returnPointsOnCodeExpiry', { description: 'Whether an expired discount code gives its points back; false by default.' }),
    returnCodePointsOnRefund: t.exposeBoolean('returnCodePointsOnRefund', {
      description: 'Whether a fully refunded or cancelled order gives back the points of the codes it used (once each); false by default. The codes stay used.',
    }),
    codeWarningDays: t.exposeInt('codeWarningDays', { description: 'Days before a code\'s expiry its redemptions/expiring event goes out; 0 (default): none.' }),
    auditRetentionDays: t.exposeInt('auditRetentionDays', { description: 'Days an audit log row is kept (auditLog); 365 by default.' }),
  }),
});

export const Shop = builder.objectRef<ShopShape>('Shop').implement({
  description: 'The shop the API key belongs to.',
  fields: (t) => ({
    id: t.exposeID('id'),
    name: t.exposeString('name'),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    settings: t.field({ type: ShopSettings, resolve: (shop, _args, ctx) => getShopSettings(ctx.db, shop.id) }),
  }),
});

/** A key as listings show it: never its secret nor its hash. */
const ApiKey = builder.objectRef<ApiKeyInfo>('ApiKey').implement({
  description: 'One of the shop\'s API keys, named by its public prefix. The secret is shown only by apiKeyCreate.',
  fields: (t) => ({
    prefix: t.string({ description: '`lk_` and ten characters: the start of the key, as the CLI lists it.', resolve: (k) => `lk_${k.prefix}` }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    revokedAt: t.expose('revokedAt', { type: 'DateTime', nullable: true }),
    active: t.boolean({ description: 'False once revoked.', resolve: (k) => k.revokedAt === null }),
    current: t.boolean({
      description: 'Whether this request (or this graphql-ws connection) was made with this key; false for a person signed in.',
      resolve: (k, _args, ctx) => ctx.apiKey?.prefix === k.prefix,
    }),
  }),
});

builder.queryFields((t) => ({
  shop: t.field({ type: Shop, description: 'The shop of the API key.', resolve: (_root, _args, ctx) => ctx.shop }),
  apiKeys: t.field({
    type: [ApiKey],
    description: 'The shop\'s API keys, newest first, revoked ones included.',
    resolve: (_root, _args, ctx) => listApiKeys(ctx.db, ctx.shop.id),
  }),
}));

const ShopSettingsInput = builder.inputType('ShopSettingsInput', {
  description: 'Omitted fields keep their value; null resets an override to the server default.',
  fields: (t) => ({
    referrerPoints: t.int({ required: false, description: '0 to 1,000,000,000.' }),
    refereePoints: t.int({ required: false, description: '0 to 1,000,000,000.' }),
    rateLimitPerMinute: t.int({ required: false, description: '1 to 10,000; null: the server default.' }),
    webhookRetentionDays: t.int({ required: false, description: '1 to 90; null: the server default.' }),
    currency: t.string({ required: false, description: 'ISO 4217 code; fixed once the shop has orders or place_order rules.' }),
    timezone: t.string({ required: false, description: 'IANA time zone, such as Europe/Paris.' }),
    pendingDays: t.int({ required: false, description: '0 to 365; applies to points earned from then on.' }),
    expiry: t.field({ type: ExpirySettingsInput, required: false }),
    tiers: t.field({ type: TierSettingsInput, required: false }),
    storefrontOrigins: t.stringList({
      required: false,
      description: 'Replaces the list: up to 20 origins such as https://shop.example.com (no path); [] allows none.',
    }),
    earnOnTestOrders: t.boolean({ required: false, description: 'Let test orders earn; applies to orders first paid from then on.' }),
    signUpBonusSince: t.field({ type: 'DateTime', required: false, description: 'null: back to the default (when the shop connected Shopify).' }),
    returnPointsOnCodeExpiry: t.boolean({ required: false, description: 'Let an expired code give its points back.' }),
    returnCodePointsOnRefund: t.boolean({ required: false, description: 'Let a fully refunded or cancelled order give back its codes\' points.' }),
    codeWarningDays: t.int({ required: false, description: '0 to 365; 0: no warning.' }),
    auditRetentionDays: t.int({ required: false, description: '7 to 3650: days an audit log row is kept.' }),
  }),
});

const ShopSettingsUpdatePayload = builder
  .objectRef<{ settings?: ShopSettingsShape; userErrors: UserErrorShape[] }>('ShopSettingsUpdatePayload')
  .implement({
    fields: (t) => ({
      settings: t.field({ type: ShopSettings, nullable: true, resolve: (p) => p.settings ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

const ApiKeyCreatePayload = builder
  .objectRef<{ apiKey?: ApiKeyInfo; key?: string; userErrors: UserErrorShape[] }>('ApiKeyCreatePayload')
  .implement({
    fields: (t) => ({
      apiKey: t.field({ type: ApiKey, nullable: true, resolve: (p) => p.apiKey ?? null }),
      key: t.string({
        nullable: true,
        description: 'The whole key (`lk_…`), shown only here: only its hash is stored.',
        resolve: (p) => p.key ?? null,
      }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

const ApiKeyRevokeInput = builder.inputType('ApiKeyRevokeInput', {
  fields: (t) => ({ prefix: t.string({ description: 'The key\'s prefix as apiKeys lists it (`lk_` and ten characters).' }) }),
});

const ApiKeyRevokePayload = builder
  .objectRef<{ apiKey?: ApiKeyInfo; userErrors: UserErrorShape[] }>('ApiKeyRevokePayload')
  .implement({
    fields: (t) => ({
      apiKey: t.field({ type: ApiKey, nullable: true, resolve: (p) => p.apiKey ?? null }),
      userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
    }),
  });

builder.mutationFields((t) => ({
  shopSettingsUpdate: t.field({
    type: ShopSettingsUpdatePayload,
    description:
      'Changes the given settings. A new rate limit applies at once on the instance that served this, within 30 s on others; ' +
      'a new retention applies at the next purge (hourly).',
    args: { input: t.arg({ type: ShopSettingsInput, required: true }) },
    resolve: (_root, { input }, ctx) => withUserErrors(() => updateShopSettings(ctx.db, ctx.shop.id, input, new Date(), { actor: actorOf(ctx), kind: 'shopSettings.update' })),
  }),
  apiKeyCreate: t.field({
    type: ApiKeyCreatePayload,
    description: 'Creates another API key for the shop; the payload carries the whole key, once.',
    resolve: (_root, _args, ctx) =>
      withUserErrors(async () => {
        const { apiKey, key } = await createApiKey(ctx.db, ctx.shop.id, actorOf(ctx));
        markResponseSecret(ctx);
        return { apiKey: key, key: apiKey };
      }),
  }),
  apiKeyRevoke: t.field({
    type: ApiKeyRevokePayload,
    description:
      'Revokes one of the shop\'s keys: refused on every instance from the next request; the live subscriptions and ' +
      'graphql-ws connections opened with it end within 2 s. A key cannot revoke itself (api_key_in_use): revoke it with another key.',
    args: { input: t.arg({ type: ApiKeyRevokeInput, required: true }) },
    resolve: (_root, { input }, ctx) =>
      withUserErrors(async () => {
        const apiKey = await revokeApiKeyOnRequest(ctx.db, ctx.shop.id, input, ctx.apiKey, actorOf(ctx));
        await ctx.bus.announceRevocation({ apiKey });
        return { apiKey };
      }),
  }),
}));

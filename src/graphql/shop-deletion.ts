import { cancelShopDeletion, requestShopDeletion, type ShopDeletion as ShopDeletionShape, shopDeletionOf } from '../domain/shop-exit/index.js';
import { actorOf, builder } from './builder.js';
import { Shop } from './shop.js';
import { UserError, type UserErrorShape, withUserErrors } from './user-errors.js';

// A shop leaves (docs/operations.md "A shop leaves"): its deletion, requested, then cancellable for the grace period.

const ShopDeletion = builder.objectRef<ShopDeletionShape>('ShopDeletion').implement({
  description: 'The shop\'s deletion: every row of it, by the scheduler, from `dueAt` on.',
  fields: (t) => ({
    requestedAt: t.expose('requestedAt', { type: 'DateTime' }),
    dueAt: t.expose('dueAt', { type: 'DateTime', description: 'When the grace ends and the deletion starts; until then shopDeletionCancel stops it.' }),
    reason: t.exposeString('reason', { description: '`requested` (staff, a key or the CLI) or `shopify shop/redact`.' }),
    cancelledAt: t.expose('cancelledAt', { type: 'DateTime', nullable: true }),
  }),
});

builder.objectFields(Shop, (t) => ({
  deletion: t.field({
    type: ShopDeletion,
    nullable: true,
    description: 'The shop\'s deletion, requested or cancelled; null when none was ever requested.',
    resolve: (shop, _args, ctx) => shopDeletionOf(ctx.db, shop.id),
  }),
}));

const ShopDeletionPayload = builder.objectRef<{ deletion?: ShopDeletionShape; userErrors: UserErrorShape[] }>('ShopDeletionPayload').implement({
  fields: (t) => ({
    deletion: t.field({ type: ShopDeletion, nullable: true, resolve: (p) => p.deletion ?? null }),
    userErrors: t.field({ type: [UserError], resolve: (p) => p.userErrors }),
  }),
});

builder.mutationFields((t) => ({
  shopDeletionRequest: t.field({
    type: ShopDeletionPayload,
    description:
      'Schedules the deletion of the shop and everything of it after the grace period (SHOP_DELETION_GRACE_DAYS, 7 days by default), during which the shop works as before and shopDeletionCancel keeps it. Take its archive first (`shop export`, docs/operations.md).',
    resolve: (_root, _args, ctx) =>
      withUserErrors(async () => ({
        deletion: await requestShopDeletion(ctx.db, ctx.shop.id, { reason: 'requested', graceDays: ctx.shopDeletionGraceDays }, actorOf(ctx), ctx.now()),
      })),
  }),
  shopDeletionCancel: t.field({
    type: ShopDeletionPayload,
    description: 'Cancels the shop\'s deletion while its grace lasts; nothing of the shop was deleted then. Refused (`shop_deletion_started`) once it began.',
    resolve: (_root, _args, ctx) => withUserErrors(async () => ({ deletion: await cancelShopDeletion(ctx.db, ctx.shop.id, actorOf(ctx), ctx.now()) })),
  }),
}));

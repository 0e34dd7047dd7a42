import { type Activity as ActivityShape, ACTIVITY_TYPES } from '../domain/ledger/index.js';
import { builder, STOREFRONT } from './builder.js';

export const ActivityType = builder.enumType('ActivityType', { subGraphs: STOREFRONT, values: ACTIVITY_TYPES });

/** The contract's activity record, field for field. */
export const Activity = builder.objectRef<ActivityShape>('Activity').implement({
  subGraphs: STOREFRONT,
  description: 'One entry of the append-only points ledger.',
  fields: (t) => ({
    _id: t.exposeID('_id'),
    type: t.field({ type: ActivityType, resolve: (a) => a.type }),
    settingType: t.exposeString('settingType', { description: 'Where the change came from: api, import, redemption, referral, order (points an order earned or a refund took back), rule (sign-up, birthday, custom action).' }),
    description: t.exposeString('description', { nullable: true }),
    note: t.exposeString('note', { nullable: true, subGraphs: ['admin'], description: 'The shop\'s own note: not on the storefront.' }),
    oldPoints: t.exposeInt('oldPoints'),
    newPoints: t.exposeInt('newPoints'),
    customer: t.exposeID('customer', { description: 'The customer `_id`.' }),
    shop: t.exposeID('shop', { description: 'The shop id.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

import { EXPIRY_MODES, type ExpirySettings as ExpirySettingsShape, nextExpiries, type NextExpiry as NextExpiryShape } from '../domain/program/index.js';
import { BATCH_ONLY, builder, STOREFRONT } from './builder.js';
import { Customer } from './customer.js';

const ExpiryMode = builder.enumType('ExpiryMode', {
  values: {
    none: { description: 'Points never expire (the default).' },
    inactivity: { description: 'The whole balance expires `days` after the customer\'s last points activity.' },
    per_earn: { description: 'Each credit expires `days` after it became available; spending takes the points that expire soonest.' },
  } as const satisfies Record<(typeof EXPIRY_MODES)[number], unknown>,
});

export const ExpirySettings = builder.objectRef<ExpirySettingsShape>('ExpirySettings').implement({
  description: 'What expires and when. Points expire at the end of the shop-local day: earned on 1 March with 30 days, they can be spent through 31 March.',
  fields: (t) => ({
    mode: t.field({ type: ExpiryMode, resolve: (e) => e.mode }),
    days: t.exposeInt('days', { description: '1 to 3650 (default 365).' }),
    warningDays: t.exposeInt('warningDays', { description: 'A points/expiring event goes out this many days before an expiry; 0 (default): none.' }),
  }),
});

export const ExpirySettingsInput = builder.inputType('ExpirySettingsInput', {
  description: 'Omitted fields keep their value. Changes apply from then on: see docs/expiry.md.',
  fields: (t) => ({
    mode: t.field({ type: ExpiryMode, required: false }),
    days: t.int({ required: false, description: '1 to 3650.' }),
    warningDays: t.int({ required: false, description: '0 to days - 1.' }),
  }),
});

const NextExpiry = builder.objectRef<NextExpiryShape>('NextExpiry').implement({
  subGraphs: STOREFRONT,
  description: 'The customer\'s points that expire soonest.',
  fields: (t) => ({
    points: t.exposeInt('points'),
    at: t.expose('at', { type: 'DateTime', description: 'The instant they leave the balance (the start of the shop-local day after their last one).' }),
  }),
});

builder.objectFields(Customer, (t) => ({
  nextExpiry: t.loadable({
    type: NextExpiry,
    nullable: true,
    description: 'The points that expire next and when; null when none will (no expiry, or nothing to expire).',
    loaderOptions: BATCH_ONLY,
    load: (customerIds: string[], ctx) => nextExpiries(ctx.db, ctx.shop.id, customerIds),
    resolve: (customer) => customer._id,
  }),
}));

import { lexicographicSortSchema, printSchema } from 'graphql';
import { builder } from './builder.js';
import './activity.js';
import './customer.js';
import './points.js';
import './redemption.js';
import './discount-code.js';
import './referral.js';
import './webhook.js';
import './webhook-delivery.js';
import './events.js';
import './shop.js';
import './order.js';
import './earning-rule.js';
import './shopify.js';
import './expiry.js';
import './tier.js';
import './customer-access-token.js';

export const schema = builder.toSchema();

/** The SDL checked in as schema.graphql, sorted so it groups by resource. */
export function printSchemaSDL(): string {
  return `${printSchema(lexicographicSortSchema(schema))}\n`;
}

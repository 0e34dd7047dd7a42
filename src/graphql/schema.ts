import { lexicographicSortSchema, printSchema } from 'graphql';
import { builder } from './builder.js';
import './activity.js';
import './customer.js';
import './customer-search.js';
import './points.js';
import './redemption.js';
import './discount-code.js';
import './discount-code-check.js';
import './referral.js';
import './webhook.js';
import './webhook-delivery.js';
import './events.js';
import './shop.js';
import './order.js';
import './earning-rule.js';
import './shopify.js';
import './shopify-admin.js';
import './expiry.js';
import './tier.js';
import './customer-access-token.js';
import './storefront.js';
import './insights.js';
import './staff.js';
import './audit.js';
import './mail.js';
import './mail-templates.js';
import './mail-preferences.js';
import './data-rights.js';
import './shop-deletion.js';

/** /graphql: the shop's key, the whole API. */
export const schema = builder.toSchema({ subGraph: 'admin' });
/** /storefront/graphql: a customer's token, that customer's own data (builder.ts). */
export const storefrontSchema = builder.toSchema({ subGraph: 'storefront' });

/** The SDL checked in as schema.graphql (or, for the storefront, schema.storefront.graphql), sorted so it groups by resource. */
export function printSchemaSDL(face: 'admin' | 'storefront' = 'admin'): string {
  return `${printSchema(lexicographicSortSchema(face === 'admin' ? schema : storefrontSchema))}\n`;
}

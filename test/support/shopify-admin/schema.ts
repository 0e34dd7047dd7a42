// Shopify's published Admin GraphQL schema for the pinned version, loaded once per process:
// parsing the 900 kB introspection result takes a few hundred milliseconds.
import { readFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { buildClientSchema, type GraphQLSchema, type IntrospectionQuery } from 'graphql';

export const ADMIN_API_VERSION = '2026-07';

const fixture = new URL(`../../fixtures/shopify/admin_${ADMIN_API_VERSION}.json.gz`, import.meta.url);

let cached: GraphQLSchema | undefined;

export function adminSchema(): GraphQLSchema {
  if (!cached) {
    const introspection = JSON.parse(gunzipSync(readFileSync(fixture)).toString('utf8')) as {
      data: IntrospectionQuery;
    };
    cached = buildClientSchema(introspection.data);
  }
  return cached;
}

// `npm run schema:print`: rewrites schema.graphql and schema.storefront.graphql from the code; a test fails when either is stale.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { printSchemaSDL } from './schema.js';

for (const [face, file] of [['admin', 'schema.graphql'], ['storefront', 'schema.storefront.graphql']] as const) {
  const target = fileURLToPath(new URL(`../../${file}`, import.meta.url));
  writeFileSync(target, printSchemaSDL(face));
  console.log(`wrote ${target}`);
}

// `npm run schema:print`: rewrites schema.graphql from the code; a test fails when it is stale.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { printSchemaSDL } from './schema.js';

const target = fileURLToPath(new URL('../../schema.graphql', import.meta.url));
writeFileSync(target, printSchemaSDL());
console.log(`wrote ${target}`);

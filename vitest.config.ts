import { createRequire } from 'node:module';
import { defineConfig } from 'vitest/config';

const require = createRequire(import.meta.url);

export default defineConfig({
  resolve: {
    // graphql ships CJS (main) and ESM (module) builds. Node gives Yoga and Pothos the CJS one;
    // our own code must get the same instance or `instanceof GraphQLError` fails across them.
    alias: [{ find: /^graphql$/, replacement: require.resolve('graphql') }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Two cores: two test files at a time keeps PGlite start-up and the load tests from starving each other.
    maxWorkers: 2,
    pool: 'forks',
    // A self-signed certificate for HTTPS webhook receivers, trusted through NODE_EXTRA_CA_CERTS.
    globalSetup: ['test/global-setup.ts'],
  },
});

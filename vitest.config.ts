import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    // Two cores: two test files at a time keeps PGlite start-up and the load tests from starving each other.
    maxWorkers: 2,
    pool: 'forks',
  },
});

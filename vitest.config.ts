import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Each test file starts its own redis-server; files run in parallel workers.
    testTimeout: 30_000,
    hookTimeout: 30_000,
    pool: 'forks',
  },
});

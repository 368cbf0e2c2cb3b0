import { defineConfig } from 'vitest/config';

// Integration tests: a real Parley server (built once, or PARLEY_BIN) per test file.
export default defineConfig({
  test: {
    include: ['test/integration/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 2,
  },
});

import { defineConfig } from 'vitest/config';

// Browser tests: real Chromium (Debian's /usr/bin/chromium) driven by playwright-core.
export default defineConfig({
  test: {
    include: ['test/browser/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 90_000,
    hookTimeout: 60_000,
    pool: 'forks',
    maxWorkers: 1,
    fileParallelism: false,
  },
});

import { defineConfig } from 'vitest/config';

// Unit tests: no server, no browser.
export default defineConfig({
  test: {
    include: ['test/unit/**/*.test.ts'],
    testTimeout: 15_000,
  },
});

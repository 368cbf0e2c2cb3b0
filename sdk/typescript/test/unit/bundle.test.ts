import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script without types
import { bundle, bundleE2EE, bundlePath, e2eeBundlePath } from '../../scripts/bundle.mjs';

it('the browser bundle committed in internal/web/static is built from the current SDK source', async () => {
  const fresh = (await bundle()) as string;
  const committed = readFileSync(bundlePath as string, 'utf8');
  expect(committed === fresh, 'internal/web/static/parley-sdk.js is stale: run `npm run bundle` in sdk/typescript').toBe(true);
});

it('the end-to-end encryption module committed beside it is built from the current source', async () => {
  const fresh = (await bundleE2EE()) as string;
  const committed = readFileSync(e2eeBundlePath as string, 'utf8');
  expect(committed === fresh, 'internal/web/static/parley-e2ee.js is stale: run `npm run bundle` in sdk/typescript').toBe(true);
});

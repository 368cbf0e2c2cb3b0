// Bundles the SDK into one browser ES module for the web client, which the
// server embeds (internal/web/static/parley-sdk.js). The bundle is committed so that
// users need no build step; test/unit/bundle.test.ts fails when it is stale.
// End-to-end encryption (src/e2ee.ts, with ts-mls) is a second module,
// parley-e2ee.js, minified: it is twice the SDK's size, and the web client
// loads it with import() after sign-in so that the first page does not wait.
//   node scripts/bundle.mjs          write the bundle
//   node scripts/bundle.mjs --check  exit 1 when the committed bundle is stale
import { build } from 'esbuild';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const bundlePath = resolve(here, '../../../internal/web/static/parley-sdk.js');
export const e2eeBundlePath = resolve(here, '../../../internal/web/static/parley-e2ee.js');

export async function bundleE2EE() {
  const r = await build({
    entryPoints: [resolve(here, '../src/e2ee.ts')],
    bundle: true,
    format: 'esm',
    target: 'es2020',
    platform: 'browser',
    write: false,
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  return (
    '// Parley TypeScript SDK: end-to-end encryption (src/e2ee.ts with ts-mls, MIT), bundled\n' +
    '// and minified for browsers by `npm run bundle` in sdk/typescript; do not edit.\n' +
    r.outputFiles[0].text
  );
}

export async function bundle() {
  const r = await build({
    entryPoints: [resolve(here, '../src/index.ts')],
    bundle: true,
    format: 'esm',
    target: 'es2020',
    platform: 'browser',
    write: false,
    legalComments: 'none',
    // tus-js-client's modern ES source (lib/) rather than its Babel output
    // (lib.esm/), which repeats helpers in every module: a third of the size.
    alias: { 'tus-js-client': resolve(here, '../node_modules/tus-js-client/lib/browser/index.js') },
    logLevel: 'silent',
  });
  return (
    '// Parley TypeScript SDK, bundled for browsers. Generated from sdk/typescript/src\n' +
    '// by `npm run bundle` in sdk/typescript; do not edit.\n' +
    r.outputFiles[0].text
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  for (const [path, make] of [
    [bundlePath, bundle],
    [e2eeBundlePath, bundleE2EE],
  ]) {
    const text = await make();
    if (process.argv.includes('--check')) {
      let old = '';
      try {
        old = readFileSync(path, 'utf8');
      } catch {}
      if (old !== text) {
        console.error(`${path} is stale: run \`npm run bundle\` in sdk/typescript and commit it`);
        process.exit(1);
      }
      console.log(`${path} is up to date`);
    } else {
      writeFileSync(path, text);
      console.log(`wrote ${path} (${text.length} bytes)`);
    }
  }
}

// Bundles the SDK into one browser ES module for the web client, which the
// server embeds (internal/web/static/parley-sdk.js). The bundle is committed so that
// users need no build step; test/unit/bundle.test.ts fails when it is stale.
//   node scripts/bundle.mjs          write the bundle
//   node scripts/bundle.mjs --check  exit 1 when the committed bundle is stale
import { build } from 'esbuild';
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
export const bundlePath = resolve(here, '../../../internal/web/static/parley-sdk.js');

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
  const text = await bundle();
  if (process.argv.includes('--check')) {
    let old = '';
    try {
      old = readFileSync(bundlePath, 'utf8');
    } catch {}
    if (old !== text) {
      console.error(`${bundlePath} is stale: run \`npm run bundle\` in sdk/typescript and commit it`);
      process.exit(1);
    }
    console.log('bundle is up to date');
  } else {
    writeFileSync(bundlePath, text);
    console.log(`wrote ${bundlePath} (${text.length} bytes)`);
  }
}

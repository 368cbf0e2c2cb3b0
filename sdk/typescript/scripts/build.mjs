// Builds the npm package into dist/:
//   dist/*.js, *.d.ts        ES modules and their types (tsc), for `import`
//   dist/cjs/index.cjs       one CommonJS file (esbuild), for `require`
//   dist/cjs/*.d.cts         the same types, declared as CommonJS
// Source maps carry their sources (the package ships no src/). It also copies
// the repository's LICENSE next to package.json, where npm packs it from.
//   node scripts/build.mjs
import { build } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const dist = join(root, 'dist');

rmSync(dist, { recursive: true, force: true });
execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(root, 'tsconfig.json')], { stdio: 'inherit' });

// The SDK, and end-to-end encryption as its own entry (@parley/sdk/e2ee):
// apps that do not encrypt do not load ts-mls.
for (const entry of ['index', 'e2ee']) await build({
  entryPoints: [join(root, `src/${entry}.ts`)],
  outfile: join(dist, `cjs/${entry}.cjs`),
  bundle: true,
  format: 'cjs',
  platform: 'neutral',
  target: 'es2022',
  // Dependencies stay require()s, resolved by the app's installation.
  packages: 'external',
  sourcemap: true,
  sourcesContent: true,
  legalComments: 'none',
  logLevel: 'warning',
});

// TypeScript takes a .d.ts in a "type": "module" package for an ES module,
// which a CommonJS consumer may not require: the CommonJS entry gets .d.cts
// copies whose relative imports name .cjs files.
for (const f of readdirSync(dist)) {
  if (!f.endsWith('.d.ts')) continue;
  const text = readFileSync(join(dist, f), 'utf8').replace(/((?:from|import)\s*\(?\s*['"]\.\.?\/[^'"]+)\.js(['"])/g, '$1.cjs$2');
  mkdirSync(join(dist, 'cjs'), { recursive: true });
  writeFileSync(join(dist, 'cjs', f.replace(/\.d\.ts$/, '.d.cts')), text);
}

copyFileSync(join(root, '../../LICENSE'), join(root, 'LICENSE'));
// On stderr: npm pack --json prints this script's stdout before its JSON.
console.error('built dist/ (ESM, CommonJS, types)');

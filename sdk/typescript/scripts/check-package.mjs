// Checks the npm package as a user gets it: packs it (npm pack, which builds
// it), installs the tarball into an empty project, and there
//   - loads it with require() and with import in Node, and drives a client
//     over a stub WebSocket in both (the auth frame it sends);
//   - loads it with no TextDecoder (React Native lacks one);
//   - compiles a consumer with `ws` under tsc --strict, as an ES module and as
//     CommonJS, without the DOM library (as a Node app is);
//   - checks the tarball's files: LICENSE, both builds, source maps with sources.
//   node scripts/check-package.mjs
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
// Inside the SDK's directory: the project finds the package's dependencies
// (and ws, @types/node) in the SDK's node_modules, as npm would have
// installed them, so the check needs no network.
const tmp = mkdtempSync(join(root, '.package-check-'));
const run = (cmd, args, cwd) => execFileSync(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
const fail = (msg) => {
  console.error('check-package: ' + msg);
  process.exitCode = 1;
};

try {
  const [packed] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', tmp, '--loglevel=error'], root));
  const files = packed.files.map((f) => f.path);
  for (const f of ['LICENSE', 'README.md', 'package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/cjs/index.cjs', 'dist/cjs/index.d.cts', 'dist/client.js.map']) {
    if (!files.includes(f)) fail(`the package lacks ${f}`);
  }
  for (const f of files.filter((f) => f.endsWith('.map'))) {
    const map = JSON.parse(readFileSync(join(root, f), 'utf8'));
    if (!map.sourcesContent || map.sourcesContent.length !== map.sources.length || map.sourcesContent.some((s) => !s)) fail(`${f} does not carry its sources`);
  }

  // Installing the tarball is unpacking it into node_modules; what it
  // requires must be among its dependencies.
  const app = join(tmp, 'app');
  const pkgDir = join(app, 'node_modules/@parley/sdk');
  mkdirSync(pkgDir, { recursive: true });
  run('tar', ['-xzf', join(tmp, packed.filename), '-C', pkgDir, '--strip-components=1'], tmp);
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'consumer', private: true, version: '1.0.0' }));
  const manifest = JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8'));
  const declared = new Set([...Object.keys(manifest.dependencies ?? {}), ...Object.keys(manifest.peerDependencies ?? {})]);
  for (const f of ['dist/cjs/index.cjs', ...files.filter((f) => /^dist\/[^/]+\.js$/.test(f))]) {
    const src = readFileSync(join(pkgDir, f), 'utf8');
    for (const m of src.matchAll(/(?:require\(|from\s*|import\()\s*["']([^"'./][^"']*)["']/g)) {
      const name = m[1].startsWith('@') ? m[1].split('/').slice(0, 2).join('/') : m[1].split('/')[0];
      if (!name.startsWith('node:') && !declared.has(name)) fail(`${f} imports ${m[1]}, which package.json does not declare`);
    }
  }

  // Runs in both module systems: a client over a stub WebSocket sends auth.
  const drive = `
    const sent = [];
    class StubSocket {
      constructor(url) { this.url = url; this.readyState = 0; this.onopen = this.onmessage = this.onclose = this.onerror = null;
        setTimeout(() => { this.readyState = 1; this.onopen({}); }, 0); }
      send(d) { sent.push(JSON.parse(d)); }
      close() { this.readyState = 3; }
    }
    const c = new sdk.ParleyClient({ url: 'ws://stub/ws', token: 'tok', deviceId: 'dev-1', WebSocket: StubSocket });
    setTimeout(() => {
      c.close();
      const auth = sent[0] && sent[0].auth;
      if (!auth || auth.token !== 'tok' || auth.deviceId !== 'dev-1') { console.error('no auth frame:', JSON.stringify(sent)); process.exit(1); }
      if (!sdk.isCode(new sdk.ParleyError('ERROR_CODE_CONFLICT'), 'ERROR_CODE_CONFLICT')) process.exit(1);
      if (typeof sdk.uploadResumable !== 'function') process.exit(1);
      console.log(FORMAT + ' ok');
    }, 50);`;
  // (Node 20.19+ can require() an ES module too: make sure the CommonJS build is the one taken.)
  const cjsEntry = `if (!require.resolve('@parley/sdk').endsWith('/dist/cjs/index.cjs')) { console.error('require took', require.resolve('@parley/sdk')); process.exit(1); }`;
  writeFileSync(join(app, 'cjs.cjs'), `${cjsEntry}\nconst sdk = require('@parley/sdk'); const FORMAT = 'require';\n${drive}`);
  writeFileSync(join(app, 'esm.mjs'), `import * as sdk from '@parley/sdk'; const FORMAT = 'import';\n${drive}`);
  for (const f of ['cjs.cjs', 'esm.mjs']) process.stdout.write(run(process.execPath, [f], app));
  // React Native has no TextDecoder: importing must still work.
  const bare = `delete globalThis.TextDecoder;`;
  run(process.execPath, ['-e', `${bare} const sdk = require('@parley/sdk'); if (!sdk.ParleyClient) process.exit(1);`], app);
  run(process.execPath, ['--input-type=module', '-e', `${bare} const sdk = await import('@parley/sdk'); if (!sdk.ParleyClient) process.exit(1);`], app);
  // End-to-end encryption is its own entry point (ts-mls, a dependency): both module systems.
  run(process.execPath, ['--input-type=module', '-e', `const e = await import('@parley/sdk/e2ee'); if (typeof e.enableE2EE !== 'function' || typeof e.MemoryKeyStore !== 'function') process.exit(1);`], app);
  run(process.execPath, ['-e', `const e = require('@parley/sdk/e2ee'); if (typeof e.enableE2EE !== 'function') process.exit(1);`], app);
  console.log('@parley/sdk/e2ee: import and require ok');
  if (manifest.license !== 'MIT' || !manifest.peerDependenciesMeta?.ws?.optional) fail('package.json: license MIT and an optional ws peer expected');
  // What npm shows beside the README: where the code is, where to read more, what it is about.
  if (!/github\.com\/parleyim\/parley/.test(manifest.repository?.url ?? '') || manifest.repository?.directory !== 'sdk/typescript') fail('package.json: repository (url and directory) expected');
  if (!/^https:\/\//.test(manifest.homepage ?? '')) fail('package.json: an https homepage expected');
  if (!Array.isArray(manifest.keywords) || manifest.keywords.length === 0) fail('package.json: keywords expected');

  // tsc --strict on a Node consumer (no DOM library), as ESM (.mts) and CommonJS (.cts).
  const consumer = `
    import WebSocket from 'ws';
    import { ParleyClient, isCode, login, type ParleyError } from '@parley/sdk';
    export async function main(): Promise<void> {
      const { token } = await login({ baseUrl: 'http://127.0.0.1:8080' }, 'alice', 'alice-secret');
      const client = new ParleyClient({ url: 'ws://127.0.0.1:8080/ws', token, WebSocket });
      try {
        await client.sendText('bob', 'hello');
      } catch (err) {
        if (isCode(err, 'ERROR_CODE_TOO_LARGE')) console.log((err as ParleyError).apiCode);
      }
    }
  `;
  writeFileSync(join(app, 'consumer.mts'), consumer);
  writeFileSync(join(app, 'consumer.cts'), consumer);
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { strict: true, noEmit: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', lib: ['es2022'], types: ['node'] },
      files: ['consumer.mts', 'consumer.cts'],
    }),
  );
  try {
    const explained = run(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', app, '--explainFiles'], app);
    for (const d of ['@parley/sdk/dist/index.d.ts', '@parley/sdk/dist/cjs/index.d.cts']) if (!explained.includes(d)) fail(`tsc did not take ${d}`);
    console.log('tsc --strict ok (ESM and CommonJS consumers)');
  } catch (err) {
    fail('the consumer does not compile:\n' + err.stdout);
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
if (process.exitCode) process.exit(process.exitCode);
console.log('the package works from its tarball');

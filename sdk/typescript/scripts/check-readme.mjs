// Type-checks the TypeScript examples of README.md: each ```ts block becomes
// a module of its own, compiled with tsc --strict against the SDK's source
// (`@parley/sdk` mapped to src/index.ts), in a browser setting (DOM) with
// Node's types and `ws` at hand. The app's own functions and variables the
// examples use without defining them are declared below.
//   node scripts/check-readme.mjs
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const readme = readFileSync(join(root, 'README.md'), 'utf8');
// npm shows the README without the repository around it: a relative link
// (to ../../docs, to a source file) leads nowhere there.
for (const [, target] of readme.matchAll(/\]\(([^)\s]+)\)/g)) {
  if (!/^(https?:|mailto:|#)/.test(target)) {
    console.error(`README.md links to ${target}: links must be absolute (npm shows the README alone)`);
    process.exitCode = 1;
  }
}
const blocks = [...readme.matchAll(/^```ts\n([\s\S]*?)^```$/gm)].map((m) => ({ code: m[1], line: readme.slice(0, m.index).split('\n').length + 1 }));
if (blocks.length === 0) throw new Error('README.md has no ```ts blocks');

// What the examples take from the app around them. SDK names they use
// without importing them come from the package, as the surrounding text says.
const globals = `
type SDK = typeof import('@parley/sdk');
declare const client: import('@parley/sdk').ParleyClient;
declare const isCode: SDK['isCode'];
declare type ParleyError = import('@parley/sdk').ParleyError;
declare const m: import('@parley/sdk').Message;
declare const root: import('@parley/sdk').Message;
declare const question: import('@parley/sdk').Message;
declare const convId: string, groupId: string, conversationId: string, bob: string, draft: string, lastSeenSeq: number;
declare const hexToken: string, fcmToken: string, endpoint: string, p256dh: string, auth: string;
declare const input: HTMLInputElement, bar: HTMLProgressElement, img: HTMLImageElement;
declare const reg: ServiceWorkerRegistration;
declare const model: { generate(): AsyncIterable<string> };
declare function loadCursors(): Record<string, number>;
declare function saveCursors(c: Record<string, number>): void;
declare function showNotSent(text: string): void;
declare function markRemovedByModerator(conversationId: string, seq: number | undefined): void;
declare function showQuote(q: unknown): void;
declare function highlight(m: import('@parley/sdk').Message): void;
declare function addToThread(root: number, m: import('@parley/sdk').Message): void;
declare function showReplies(count: number | undefined, at: number | undefined): void;
declare function updatePins(seq: number): void;
declare function findMessage(conversationId: string, seq: number): import('@parley/sdk').Message | undefined;
declare function redraw(m: import('@parley/sdk').Message): void;
declare function showLive(streamId: string, offset: number | undefined, text: string | undefined): void;
declare function replaceLive(streamId: string, m: import('@parley/sdk').Message): void;
`;

const tmp = mkdtempSync(join(root, '.readme-check-'));
try {
  const files = blocks.map((b, i) => {
    const name = `block${String(i + 1).padStart(2, '0')}-line${b.line}.ts`;
    // `export {}` makes each block a module (top-level await, own scope).
    writeFileSync(join(tmp, name), b.code + '\nexport {};\n');
    return name;
  });
  writeFileSync(join(tmp, 'globals.d.ts'), globals);
  writeFileSync(
    join(tmp, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        strict: true,
        noEmit: true,
        target: 'es2022',
        module: 'es2022',
        moduleResolution: 'bundler',
        lib: ['es2022', 'dom'],
        types: ['node'],
        skipLibCheck: true,
        paths: { '@parley/sdk': [join(root, 'src/index.ts')], '@parley/sdk/e2ee': [join(root, 'src/e2ee.ts')] },
      },
      files: ['globals.d.ts', ...files],
    }),
  );
  try {
    execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', tmp], { cwd: tmp, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  } catch (err) {
    console.error(`README.md's TypeScript examples do not compile (files are named by the block's first line):\n${err.stdout}`);
    process.exitCode = 1;
  }
  if (!process.exitCode) console.log(`README.md: ${blocks.length} TypeScript examples compile`);
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

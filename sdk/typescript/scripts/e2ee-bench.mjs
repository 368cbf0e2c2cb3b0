// Encrypted against plain 1:1 sends through the Node SDK, in the same run:
// one sender and one receiver (each an SDK client over the `ws` package) on
// a real Parley server (embedded store), N messages with W in flight.
//   node scripts/e2ee-bench.mjs [N] [W]        (default 3000 messages, 16 in flight)
// PARLEY_BIN: a built server (default: go build ./cmd/parley into a temp dir).
// Prints, per mode: sends/s (until the receiver has every message, decrypted
// for the encrypted one) and the send latency (call to ack) p50/p99.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import WebSocket from 'ws';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..');
const N = Number(process.argv[2] ?? 3000);
const W = Number(process.argv[3] ?? 16);

// The SDK from source, as an app gets it (ts-mls and ws stay packages).
const out = mkdtempSync(join(root, '.bench-'));
await build({
  entryPoints: { index: join(root, 'src/index.ts'), e2ee: join(root, 'src/e2ee.ts') },
  outdir: out,
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'es2022',
  packages: 'external',
  logLevel: 'warning',
});
const sdk = await import(pathToFileURL(join(out, 'index.js')).href);
const { enableE2EE, MemoryKeyStore } = await import(pathToFileURL(join(out, 'e2ee.js')).href);

let bin = process.env.PARLEY_BIN;
const tmp = mkdtempSync(join(tmpdir(), 'parley-e2ee-bench-'));
if (!bin) {
  bin = join(tmp, 'parley');
  execFileSync('go', ['build', '-o', bin, './cmd/parley'], { cwd: resolve(root, '../..'), stdio: 'inherit' });
}
const srv = spawn(bin, ['serve', '--data', join(tmp, 'data'), '--http', '127.0.0.1:0', '--tcp', 'off', '--log-level', 'warn'], { stdio: ['ignore', 'pipe', 'inherit'] });
const http = await new Promise((ok, fail) => {
  let buf = '';
  srv.stdout.on('data', (d) => {
    buf += d;
    const m = /HTTP API\s+(http:\/\/[0-9.:]+)/.exec(buf);
    if (m) ok(m[1]);
  });
  srv.on('exit', () => fail(new Error('server exited:\n' + buf)));
});
const ws = http.replace('http:', 'ws:') + '/ws';

async function user(name, device) {
  const r = await sdk.register({ baseUrl: http }, `${name}${Date.now() % 100000}`, `pw-${name}-bench-secret`);
  const c = new sdk.ParleyClient({ url: ws, token: r.token, deviceId: device, deviceType: device, WebSocket });
  await c.waitReady(10000);
  return { id: r.user_id, c };
}

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))];
}

/** N sends with W in flight; resolves when the receiver has counted all of them. */
async function run(label, send, received) {
  const lat = [];
  let next = 0;
  const t0 = performance.now();
  const worker = async () => {
    while (next < N) {
      const i = next++;
      const s = performance.now();
      await send(`message ${i} of the benchmark, about as long as a chat line`);
      lat.push(performance.now() - s);
    }
  };
  await Promise.all(Array.from({ length: W }, worker));
  await received(N);
  const secs = (performance.now() - t0) / 1000;
  const r = { label, n: N, sendsPerSec: Math.round(N / secs), p50: pct(lat, 50).toFixed(1), p99: pct(lat, 99).toFixed(1) };
  console.log(`${label.padEnd(10)} ${String(r.sendsPerSec).padStart(6)} sends/s   send→ack p50 ${r.p50} ms  p99 ${r.p99} ms   (${N} messages, ${W} in flight)`);
  return r;
}

const waitCount = (get) => (n) =>
  new Promise((ok, fail) => {
    const t = setTimeout(() => fail(new Error(`received ${get()} of ${n}`)), 120_000);
    const tick = () => (get() >= n ? (clearTimeout(t), ok()) : setTimeout(tick, 5));
    tick();
  });

try {
  console.log(`node ${process.version}, ${cpus().length} × ${cpus()[0]?.model ?? 'cpu'}`);
  // Plain 1:1.
  const a = await user('alice', 'a-1');
  const b = await user('bob', 'b-1');
  let plainGot = 0;
  b.c.on('message', (m) => m.kind === 'MESSAGE_KIND_NORMAL' && plainGot++);
  await run('plain', (t) => a.c.sendText(b.id, t), waitCount(() => plainGot));

  // Encrypted 1:1 (an encrypted group of the two), same users and server.
  const ea = await enableE2EE(a.c, { store: new MemoryKeyStore(), keyPackageTarget: 5 });
  const eb = await enableE2EE(b.c, { store: new MemoryKeyStore(), keyPackageTarget: 5 });
  const g = await ea.createDirect(b.id);
  const conv = g.conversationId;
  while (!(await eb.isMember(conv))) await new Promise((r) => setTimeout(r, 10));
  let encGot = 0;
  let undecryptable = 0;
  eb.on('message', (m) => {
    if (m.conversationId !== conv || m.kind !== 'MESSAGE_KIND_NORMAL') return;
    if (m.plaintext) encGot++;
    else undecryptable++;
  });
  await run('encrypted', (t) => ea.send(conv, t), waitCount(() => encGot));
  if (undecryptable) console.log(`undecryptable: ${undecryptable}`);
} finally {
  srv.kill('SIGTERM');
  rmSync(out, { recursive: true, force: true });
  setTimeout(() => rmSync(tmp, { recursive: true, force: true }), 500);
  setTimeout(() => process.exit(0), 1000);
}

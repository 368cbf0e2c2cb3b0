// Measures the two wire codecs the server offers on /ws, inside Chromium:
// JSON text frames (this SDK's codec) against binary protobuf frames
// (protobufjs, the common JavaScript protobuf runtime, with the real schema).
//   node scripts/codec-bench.mjs       (needs /usr/bin/chromium or CHROMIUM_PATH)
// Prints bytes per frame, encode/decode cost per frame, and what each costs to ship.
import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '../../..');
const sdkBundle = readFileSync(resolve(root, 'internal/web/static/parley-sdk.js'), 'utf8');
const pbRuntime = readFileSync(resolve(here, '../node_modules/protobufjs/dist/protobuf.min.js'), 'utf8');
const proto = readFileSync(resolve(root, 'proto/parley/v1/parley.proto'), 'utf8');

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH || '/usr/bin/chromium', args: ['--no-sandbox'] });
const page = await browser.newPage();
await page.route('http://bench.test/**', (route) => {
  const path = new URL(route.request().url()).pathname;
  const body = { '/': '<!doctype html><title>bench</title>', '/sdk.js': sdkBundle, '/pb.js': pbRuntime }[path];
  route.fulfill({ status: body === undefined ? 404 : 200, contentType: path === '/' ? 'text/html' : 'text/javascript', body: body ?? '' });
});
await page.goto('http://bench.test/');
await page.addScriptTag({ url: '/pb.js' });

const result = await page.evaluate(async (protoText) => {
  const sdk = await import('/sdk.js');
  const pb = globalThis.protobuf;
  const root = pb.parse(protoText, { keepCase: false }).root;
  const ServerFrame = root.lookupType('parley.v1.ServerFrame');
  const ClientFrame = root.lookupType('parley.v1.ClientFrame');
  const text = 'Are we still on for dinner at 7? I can bring dessert 🍰';
  const payload = new TextEncoder().encode(text);
  // A typical pushed message, as the server sends it in each form.
  const msg = { conversationId: 'p:alice:bob', seq: 1234, messageId: '250151488918126592', from: 'alice', to: 'bob', clientMsgId: '9f86d081884c7d659a2feaa0', contentType: 'text', payload, serverTime: 1763800000456, kind: 1 };
  const jsonText = JSON.stringify({ message: { ...msg, seq: '1234', serverTime: '1763800000456', kind: 'MESSAGE_KIND_NORMAL', payload: sdk.toBase64(payload) } });
  const pbBytes = ServerFrame.encode(ServerFrame.fromObject({ message: { ...msg, kind: 1 } })).finish();
  const send = { clientMsgId: '9f86d081884c7d659a2feaa0', to: 'bob', contentType: 'text', payload };
  const N = 100_000;
  const time = (fn) => {
    for (let i = 0; i < 2000; i++) fn(); // warm up
    const t0 = performance.now();
    for (let i = 0; i < N; i++) fn();
    return ((performance.now() - t0) * 1000) / N; // µs per op
  };
  let sink = 0;
  const r = {
    bytesPerPushedMessage: { json: new TextEncoder().encode(jsonText).length, protobuf: pbBytes.length },
    decodeMicros: {
      json: time(() => (sink += sdk.decodeFrame(jsonText).message.seq)),
      protobuf: time(() => {
        const f = ServerFrame.decode(pbBytes);
        sink += Number(f.message.seq);
        new TextDecoder().decode(f.message.payload);
      }),
    },
    encodeSendMicros: {
      json: time(() => (sink += sdk.encodeFrame({ id: 7, send }).length)),
      protobuf: time(() => (sink += ClientFrame.encode({ id: 7, send }).finish().length)),
    },
  };
  // 64-bit ids: JSON carries them as strings; protobufjs without long.js gives a lossy number.
  const id = ServerFrame.decode(pbBytes).message.messageId;
  r.protobufMessageIdExact = String(id) === msg.messageId;
  r.protobufMessageIdDecoded = String(id);
  r.jsonMessageIdDecoded = sdk.decodeFrame(jsonText).message.messageId;
  r.sink = sink > 0;
  return r;
}, proto);
result.shippedBytes = {
  jsonCodec: { note: 'part of the SDK bundle (codec.ts)', raw: 0, gzip: 0 },
  protobufRuntime: { raw: pbRuntime.length, gzip: gzipSync(pbRuntime).length, plusSchema: { raw: proto.length, gzip: gzipSync(proto).length } },
  sdkBundle: { raw: sdkBundle.length, gzip: gzipSync(sdkBundle).length },
};
result.chromium = browser.version();
await browser.close();
console.log(JSON.stringify(result, null, 2));

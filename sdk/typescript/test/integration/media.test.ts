import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { directConversationId, isCode, ParleyError, text, type Message } from '../../src/index.js';
import { makePng } from '../helpers/png.js';
import { startServer, waitFor, type RunningServer } from '../helpers/server.js';
import { closeClients, connect, inbox, newUser } from '../helpers/users.js';

let srv: RunningServer;
beforeAll(async () => {
  srv = await startServer(inject('parleyBin'));
});
afterAll(async () => {
  await srv?.dispose();
});
afterEach(() => closeClients());

async function bytesOf(url: string, headers: Record<string, string> = {}): Promise<{ status: number; type: string; body: Buffer }> {
  const res = await fetch(url, { headers });
  return { status: res.status, type: res.headers.get('content-type') ?? '', body: Buffer.from(await res.arrayBuffer()) };
}

async function refusal(p: Promise<unknown>): Promise<ParleyError> {
  const err = await p.then(
    () => new Error('expected a refusal'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ParleyError);
  return err as ParleyError;
}

describe('files against a real server', () => {
  it('an image uploaded in one request and sent: the recipient gets the server’s description, the file and its thumbnail; a stranger gets nothing', async () => {
    const [alice, bob, carol] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob'), newUser(srv, 'carol')]);
    const a = connect(srv, alice);
    const b = connect(srv, bob);
    const c = connect(srv, carol);
    const bobGot = inbox(b);
    await Promise.all([a.waitReady(5000), b.waitReady(5000), c.waitReady(5000)]);

    const png = makePng(640, 480);
    const progress: number[] = [];
    // The name's path is dropped and the type comes from the bytes, not from the Blob.
    const att = await a.uploadFile(new Blob([png], { type: 'image/jpeg' }), '../holiday.png', { onProgress: (s) => progress.push(s) });
    expect(att).toMatchObject({ name: 'holiday.png', size: png.length, contentType: 'image/png', width: 640, height: 480, thumbnail: true });
    expect(att.id).toMatch(/^[0-9a-f]{32}$/);
    expect(att.blurhash).toBeTruthy();
    expect(progress.at(-1)).toBe(png.length);

    const ack = await a.send({ to: bob.id, payload: 'the beach', attachments: [att] });
    const conv = directConversationId(alice.id, bob.id);
    expect(ack.conversationId).toBe(conv);
    const got = await waitFor(() => bobGot.find((m) => m.seq === ack.seq), 5000, 'bob gets the message');
    expect(text(got.payload)).toBe('the beach');
    expect(got.attachments).toEqual([att]);
    const page = await b.history(conv, 0, 10);
    expect(page.messages!.find((m: Message) => m.seq === ack.seq)!.attachments).toEqual([att]);

    const u = await b.fileUrl(att.id, conv, ack.seq);
    expect(u.url.startsWith(srv.http + '/v1/files/')).toBe(true);
    expect(u.expiresAt!).toBeGreaterThan(Date.now());
    const whole = await bytesOf(u.url);
    expect(whole.status).toBe(200);
    expect(whole.type).toBe('image/png');
    expect(whole.body.equals(png)).toBe(true);
    const part = await bytesOf(u.url, { Range: 'bytes=100-199' });
    expect(part.status).toBe(206);
    expect(part.body.equals(png.subarray(100, 200))).toBe(true);
    const thumb = await bytesOf((await b.fileUrl(att.id, conv, ack.seq, true)).url);
    expect(thumb.type).toBe('image/jpeg');
    expect([...thumb.body.subarray(0, 2)]).toEqual([0xff, 0xd8]);
    // The uploader asks without naming a message.
    expect((await bytesOf((await a.fileUrl(att.id)).url)).body.equals(png)).toBe(true);

    // A stranger gets one answer, whatever the question; and cannot send the file.
    for (const ask of [() => c.fileUrl(att.id, conv, ack.seq), () => c.fileUrl(att.id), () => b.fileUrl(att.id), () => c.fileUrl('0123456789abcdef0123456789abcdef')]) {
      expect(isCode(await refusal(ask()), 'ERROR_CODE_PERMISSION_DENIED')).toBe(true);
    }
    expect(isCode(await refusal(c.send({ to: bob.id, attachments: [att.id] })), 'ERROR_CODE_PERMISSION_DENIED')).toBe(true);

    // A recalled message takes its files with it.
    await a.recall(conv, ack.seq);
    expect(isCode(await refusal(b.fileUrl(att.id, conv, ack.seq)), 'ERROR_CODE_PERMISSION_DENIED')).toBe(true);
  });

  it('a resumable upload cut on the way continues from what the server holds', async () => {
    const [alice, bob] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob')]);
    const a = connect(srv, alice);
    const b = connect(srv, bob);
    await Promise.all([a.waitReady(5000), b.waitReady(5000)]);
    const data = randomBytes((3 << 20) + 12345);
    const blob = new Blob([data]);

    const ac = new AbortController();
    let url = '';
    const cut = a.uploadResumable(blob, 'video.bin', {
      chunkSize: 256 << 10,
      keepOnAbort: true,
      signal: ac.signal,
      onCreated: (u) => (url = u),
      onProgress: (sent) => sent >= 1 << 20 && ac.abort(),
    });
    await expect(cut).rejects.toMatchObject({ name: 'AbortError' });
    expect(url.startsWith(srv.http + '/v1/uploads/')).toBe(true);

    // The server holds part of it; another user cannot see it.
    const head = (token: string) => fetch(url, { method: 'HEAD', headers: { Authorization: 'Bearer ' + token, 'Tus-Resumable': '1.0.0' } });
    const h = await waitFor(async () => {
      const r = await head(alice.token);
      return r.status === 200 ? r : null; // a cut PATCH may still hold the upload's lock for a moment
    }, 5000, 'HEAD of the cut upload');
    const held = Number(h.headers.get('upload-offset'));
    expect(held).toBeGreaterThan(0);
    expect(held).toBeLessThan(data.length);
    expect((await head(bob.token)).status).toBe(404);

    const progress: number[] = [];
    const att = await a.uploadResumable(blob, 'video.bin', { uploadUrl: url, chunkSize: 1 << 20, onProgress: (s) => progress.push(s) });
    expect(att.id).toMatch(/^[0-9a-f]{32}$/);
    expect(att.size).toBe(data.length);
    expect(Math.min(...progress)).toBeGreaterThanOrEqual(held); // only the rest was sent
    expect(progress.at(-1)).toBe(data.length);

    const ack = await a.send({ to: bob.id, attachments: [att.id] });
    const u = await b.fileUrl(att.id, ack.conversationId, ack.seq);
    const got = await bytesOf(u.url);
    expect(got.type).toBe('application/octet-stream');
    expect(got.body.equals(data)).toBe(true);

    // upload() sends a large file resumably, a small one in one request.
    const big = await a.upload(new Blob([data]), 'again.bin', { resumableAbove: 1 << 20 });
    expect(big.contentType).toBeUndefined(); // a resumable upload's answer names the file only
    const small = await a.upload(new Blob([makePng(8, 8)]), 'dot.png');
    expect(small.contentType).toBe('image/png');
  });

  it('a cancelled upload leaves nothing to resume', async () => {
    const alice = await newUser(srv, 'alice');
    const a = connect(srv, alice);
    await a.waitReady(5000);
    const ac = new AbortController();
    let url = '';
    const p = a.uploadResumable(new Blob([randomBytes(2 << 20)]), 'x.bin', {
      chunkSize: 256 << 10,
      signal: ac.signal,
      onCreated: (u) => (url = u),
      onProgress: (sent) => sent > 0 && ac.abort(),
    });
    await expect(p).rejects.toMatchObject({ name: 'AbortError' });
    await waitFor(async () => {
      const r = await fetch(url, { method: 'HEAD', headers: { Authorization: 'Bearer ' + alice.token, 'Tus-Resumable': '1.0.0' } });
      return r.status === 404;
    }, 5000, 'the upload deleted');
  });
});

describe('a server that takes images only', () => {
  let strict: RunningServer;
  beforeAll(async () => {
    strict = await startServer(inject('parleyBin'), undefined, { config: 'media_allowed_types: ["image/*"]\n' });
  });
  afterAll(async () => {
    await strict?.dispose();
  });

  it('refuses other types with UNSUPPORTED_MEDIA_TYPE, in one request and resumably', async () => {
    const u = await newUser(strict, 'ivy');
    const a = connect(strict, u);
    await a.waitReady(5000);
    const txt = new Blob(['plain text, not a picture\n'.repeat(40)]);
    const one = await refusal(a.uploadFile(txt, 'notes.txt'));
    expect([one.code, one.apiCode]).toEqual(['ERROR_CODE_UNSUPPORTED_MEDIA_TYPE', 'unsupported_media_type']);
    expect(one.status).toBe(415);
    expect(isCode(one, 'ERROR_CODE_UNSUPPORTED_MEDIA_TYPE')).toBe(true);
    const res = await refusal(a.uploadResumable(txt, 'notes.txt', { retryDelays: [0, 100] }));
    expect([res.code, res.apiCode]).toEqual(['ERROR_CODE_UNSUPPORTED_MEDIA_TYPE', 'unsupported_media_type']);
    expect(res.temporary).toBe(false);
    expect((await a.uploadFile(new Blob([makePng(16, 16)]), 'ok.png')).contentType).toBe('image/png');
  });
});

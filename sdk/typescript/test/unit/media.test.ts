import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { ParleyClient } from '../../src/client.js';
import { decodeFrame } from '../../src/codec.js';
import { ParleyError, isCode, isTemporary } from '../../src/errors.js';
import { httpError, resolveFileUrl, uploadFile, uploadResumable } from '../../src/media.js';
import { FakeServer } from '../helpers/fake-server.js';
import { waitFor } from '../helpers/server.js';

const clients: ParleyClient[] = [];
const servers: Server[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const s of servers.splice(0)) await new Promise((r) => s.close(r));
});

function client(server: FakeServer, opts: Partial<ConstructorParameters<typeof ParleyClient>[0]> = {}): ParleyClient {
  const c = new ParleyClient({ url: 'ws://chat.test:8080/ws', token: 'alice', WebSocket: server.WebSocket, minBackoffMs: 5, maxBackoffMs: 40, ...opts });
  clients.push(c);
  return c;
}

const fileJson = '{"id":"f1","name":"cat.png","size":"184093","contentType":"image/png","width":640,"height":480,"thumbnail":true,"blurhash":"LKO2"}';

describe('attachments in frames', () => {
  it('decodes an attachment: sizes, durations and expiries as numbers', () => {
    const f = decodeFrame(
      '{"message":{"conversationId":"p:a:b","seq":"7","attachments":[' + fileJson + ',{"id":"f2","size":"10","contentType":"video/mp4","durationMs":"61000"}]}}',
    );
    const [a, v] = f.message!.attachments!;
    expect(a).toEqual({ id: 'f1', name: 'cat.png', size: 184093, contentType: 'image/png', width: 640, height: 480, thumbnail: true, blurhash: 'LKO2' });
    expect(v!.durationMs).toBe(61000);
    // The frame's id is a number; an attachment's stays a string, even all digits.
    const g = decodeFrame('{"id":"5","messages":{"conversationId":"c","messages":[{"conversationId":"c","seq":"1","attachments":[{"id":"0123"}]}]}}');
    expect(g.id).toBe(5);
    expect(g.messages!.messages![0]!.attachments![0]!.id).toBe('0123');
    expect(decodeFrame('{"id":"3","fileUrl":{"url":"/v1/files/f1?v=f","expiresAt":"1763800600000"}}').fileUrl).toEqual({
      url: '/v1/files/f1?v=f',
      expiresAt: 1763800600000,
    });
  });

  it('send carries only the ids of its attachments', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    await c.waitReady(2000);
    await c.send({ to: 'bob', payload: 'look', attachments: ['f1', { id: 'f2', name: 'ignored', size: 3 }] });
    const sent = srv.frames.find((f) => f.send)!.send!;
    expect(sent.attachments).toEqual([{ id: 'f1' }, { id: 'f2' }]);
    await c.sendText('bob', 'plain');
    expect(srv.frames.filter((f) => f.send)[1]!.send!.attachments).toBeUndefined();
  });

  it('fileUrl asks for the file of a message and resolves a relative URL against the server', async () => {
    const srv = new FakeServer();
    const asked: unknown[] = [];
    srv.hook = (s, f) => {
      if (!f.fileUrl) return false;
      asked.push(f.fileUrl);
      const url = f.fileUrl.fileId === 's3' ? 'https://bucket.example/o?X-Amz=1' : `/v1/files/${f.fileUrl.fileId}?v=${f.fileUrl.thumbnail ? 't' : 'f'}&e=1&s=x`;
      s.push({ id: f.id, fileUrl: { url, expiresAt: 1763800600000 } });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    expect(await c.fileUrl('f1', 'p:alice:bob', 7, true)).toEqual({ url: 'http://chat.test:8080/v1/files/f1?v=t&e=1&s=x', expiresAt: 1763800600000 });
    expect(await c.fileUrl('s3')).toEqual({ url: 'https://bucket.example/o?X-Amz=1', expiresAt: 1763800600000 });
    expect(asked).toEqual([{ fileId: 'f1', conversationId: 'p:alice:bob', seq: 7, thumbnail: true }, { fileId: 's3' }]);

    const c2 = client(srv, { url: 'wss://edge.test/ws', baseUrl: 'https://chat.test/' });
    await c2.waitReady(2000);
    expect((await c2.fileUrl('f1')).url).toBe('https://chat.test/v1/files/f1?v=f&e=1&s=x');
    expect(resolveFileUrl('https://chat.test', '/v1/files/x')).toBe('https://chat.test/v1/files/x');
    expect(resolveFileUrl('', '/v1/files/x')).toBe('/v1/files/x');
  });
});

describe('uploads in one request', () => {
  it('posts the bytes with the token and returns the server’s description', async () => {
    const calls: { url: string; init: RequestInit }[] = [];
    const fetch = vi.fn(async (url: string | URL | Request, init?: RequestInit) => {
      calls.push({ url: String(url), init: init! });
      return new Response('{"file":' + fileJson + '}', { status: 201 });
    });
    const progress: number[][] = [];
    const a = await uploadFile({ baseUrl: 'http://chat.test/', fetch }, () => 'tok', new Blob(['abc']), 'cat & dog.png', {
      onProgress: (s, t) => progress.push([s, t]),
    });
    expect(a.size).toBe(184093);
    expect(a.id).toBe('f1');
    expect(calls[0]!.url).toBe('http://chat.test/v1/files?name=cat%20%26%20dog.png');
    expect(calls[0]!.init.method).toBe('POST');
    expect((calls[0]!.init.headers as Record<string, string>).Authorization).toBe('Bearer tok');
    expect(progress).toEqual([[3, 3]]);
  });

  it('refusals carry the server’s code, and an abort is an AbortError', async () => {
    const fetch = async () =>
      new Response('{"error":{"code":"unsupported_media_type","message":"unsupported media type","temporary":false}}', { status: 415 });
    const err = await uploadFile({ baseUrl: 'http://x', fetch }, 't', new Blob(['a'])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ParleyError);
    expect((err as ParleyError).code).toBe('ERROR_CODE_UNSUPPORTED_MEDIA_TYPE');
    expect((err as ParleyError).apiCode).toBe('unsupported_media_type');
    expect((err as ParleyError).status).toBe(415);
    expect(isCode(err, 'ERROR_CODE_UNSUPPORTED_MEDIA_TYPE')).toBe(true);
    expect(isTemporary(err)).toBe(false);

    const ac = new AbortController();
    const slow = (_u: unknown, init?: RequestInit) =>
      new Promise<Response>((_, reject) => init!.signal!.addEventListener('abort', () => reject(new DOMException('x', 'AbortError'))));
    const p = uploadFile({ baseUrl: 'http://x', fetch: slow as typeof globalThis.fetch }, 't', new Blob(['a']), 'a', { signal: ac.signal });
    await new Promise((r) => setTimeout(r, 10)); // the request is on its way
    ac.abort();
    await expect(p).rejects.toMatchObject({ name: 'AbortError' });
  });

  it('reads the resumable endpoint’s plain "code: message" answers', () => {
    const e = httpError(507, 'quota_exceeded: storage quota exceeded\n');
    expect([e.code, e.apiCode, e.message, e.temporary, e.status]).toEqual([
      'ERROR_CODE_QUOTA_EXCEEDED',
      'quota_exceeded',
      'parley: ERROR_CODE_QUOTA_EXCEEDED: storage quota exceeded',
      false,
      507,
    ]);
    expect(isCode(e, 'ERROR_CODE_QUOTA_EXCEEDED')).toBe(true);
    expect(httpError(503, 'unavailable: try again').temporary).toBe(true);
    // Without a code, the status decides.
    expect([httpError(404, 'not found').code, httpError(404, 'not found').apiCode]).toEqual(['ERROR_CODE_PERMISSION_DENIED', '']);
    expect(httpError(500, '').code).toBe('ERROR_CODE_INTERNAL');
  });

  it('upload() goes resumable above the threshold', async () => {
    const c = client(new FakeServer());
    const small = vi.spyOn(c, 'uploadFile').mockResolvedValue({ id: 'small' });
    const big = vi.spyOn(c, 'uploadResumable').mockResolvedValue({ id: 'big' });
    expect((await c.upload(new Blob([new Uint8Array(4 << 20)]), 'a')).id).toBe('small');
    expect((await c.upload(new Blob([new Uint8Array((4 << 20) + 1)]), 'b')).id).toBe('big');
    expect((await c.upload(new Blob(['xyz']), 'c', { resumableAbove: 2 })).id).toBe('big');
    expect(small).toHaveBeenCalledTimes(1);
    expect(big).toHaveBeenCalledTimes(2);
  });
});

/** A small tus server: creation, HEAD, PATCH; `onPatch` may refuse a PATCH. */
async function tusServer(onPatch: (n: number, req: IncomingMessage, res: ServerResponse) => boolean = () => false) {
  const uploads = new Map<string, { size: number; data: Buffer[]; offset: number }>();
  const log: string[] = [];
  let patches = 0;
  const srv = createServer((req, res) => {
    log.push(`${req.method} ${req.url} ${req.headers.authorization ?? '-'}`);
    res.setHeader('Tus-Resumable', '1.0.0');
    if (req.method === 'POST') {
      const id = 'u' + (uploads.size + 1);
      uploads.set(id, { size: Number(req.headers['upload-length']), data: [], offset: 0 });
      res.writeHead(201, { Location: '/v1/uploads/' + id }).end();
      return;
    }
    const id = req.url!.split('/').pop()!;
    const up = uploads.get(id);
    if (!up) return res.writeHead(404).end('not found');
    if (req.method === 'HEAD') {
      const h: Record<string, string> = { 'Upload-Offset': String(up.offset), 'Upload-Length': String(up.size) };
      if (up.offset === up.size) h['Parley-File-Id'] = 'file-' + id;
      return res.writeHead(200, h).end();
    }
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => {
      if (onPatch(++patches, req, res)) return;
      up.data.push(...chunks);
      up.offset += Buffer.concat(chunks).length;
      const h: Record<string, string> = { 'Upload-Offset': String(up.offset) };
      if (up.offset === up.size) h['Parley-File-Id'] = 'file-' + id;
      res.writeHead(204, h).end();
    });
  });
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  servers.push(srv);
  return { base: `http://127.0.0.1:${(srv.address() as AddressInfo).port}`, uploads, log };
}

describe('resumable uploads (tus)', () => {
  it('sends chunks with the token on every request and reads the file id from the last answer', async () => {
    const t = await tusServer();
    const data = new Uint8Array(2500).map((_, i) => i & 0xff);
    let n = 0;
    const created: string[] = [];
    const progress: number[] = [];
    const a = await uploadResumable({ baseUrl: t.base }, () => 'tok' + ++n, new Blob([data]), 'v.bin', {
      chunkSize: 1000,
      onCreated: (u) => created.push(u),
      onProgress: (s) => progress.push(s),
    });
    expect(a).toEqual({ id: 'file-u1', name: 'v.bin', size: 2500 });
    expect(created).toEqual([t.base + '/v1/uploads/u1']);
    expect(Buffer.concat(t.uploads.get('u1')!.data).equals(Buffer.from(data))).toBe(true);
    expect(t.log.map((l) => l.split(' ')[0])).toEqual(['POST', 'PATCH', 'PATCH', 'PATCH']);
    expect(t.log.map((l) => l.split(' ').slice(2).join(' '))).toEqual(['Bearer tok1', 'Bearer tok2', 'Bearer tok3', 'Bearer tok4']);
    expect(progress.at(-1)).toBe(2500);
  });

  it('retries a temporary failure from the server’s offset, and stops at a final refusal with its code', async () => {
    const flaky = await tusServer((n, _req, res) => {
      if (n !== 2) return false;
      res.writeHead(503).end('unavailable: try again');
      return true;
    });
    const a = await uploadResumable({ baseUrl: flaky.base }, 't', new Blob([new Uint8Array(3000)]), 'x', { chunkSize: 1000, retryDelays: [10, 10] });
    expect(a.id).toBe('file-u1');
    expect(flaky.log.map((l) => l.split(' ')[0])).toEqual(['POST', 'PATCH', 'PATCH', 'HEAD', 'PATCH', 'PATCH']);

    const strict = await tusServer((n, _req, res) => {
      res.writeHead(415).end('unsupported_media_type: unsupported media type');
      return true;
    });
    const err = await uploadResumable({ baseUrl: strict.base }, 't', new Blob(['<html>']), 'x', { retryDelays: [10, 10] }).catch((e: unknown) => e);
    expect(isCode(err, 'ERROR_CODE_UNSUPPORTED_MEDIA_TYPE')).toBe(true);
    expect((err as ParleyError).status).toBe(415);
    expect(strict.log.filter((l) => l.startsWith('PATCH'))).toHaveLength(1); // not retried
  });

  it('an abort stops it; with keepOnAbort the upload continues from its URL', async () => {
    let hold: (() => void) | null = null;
    const t = await tusServer((n, _req, res) => {
      if (n !== 2) return false;
      hold = () => res.destroy();
      return true;
    });
    const ac = new AbortController();
    let url = '';
    const data = new Uint8Array(3000).map((_, i) => (i * 7) & 0xff);
    const p = uploadResumable({ baseUrl: t.base }, 't', new Blob([data]), 'x', { chunkSize: 1000, signal: ac.signal, keepOnAbort: true, onCreated: (u) => (url = u) });
    await waitFor(() => hold !== null, 5000, 'the second PATCH');
    ac.abort();
    await expect(p).rejects.toMatchObject({ name: 'AbortError' });
    (hold as unknown as () => void)();
    expect(t.uploads.get('u1')!.offset).toBe(1000);
    const a = await uploadResumable({ baseUrl: t.base }, 't', new Blob([data]), 'x', { chunkSize: 1000, uploadUrl: url });
    expect(a.id).toBe('file-u1');
    expect(Buffer.concat(t.uploads.get('u1')!.data).equals(Buffer.from(data))).toBe(true);
    expect(t.log.filter((l) => l.startsWith('POST'))).toHaveLength(1);
  });
});

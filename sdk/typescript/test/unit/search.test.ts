import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import protobuf from 'protobufjs';
import { afterEach, describe, expect, it } from 'vitest';
import { ParleyClient } from '../../src/client.js';
import { decodeFrame, encodeFrame, text, utf8 } from '../../src/codec.js';
import { ParleyError } from '../../src/errors.js';
import { snippetParts, utf16Ranges } from '../../src/search.js';
import type { SearchHit, TextRange } from '../../src/types.js';
import { FakeServer } from '../helpers/fake-server.js';

/** The byte range of the first occurrence of needle in s, as the server gives it. */
function byteRange(s: string, needle: string): TextRange {
  const i = s.indexOf(needle);
  if (i < 0) throw new Error(`${needle} not in ${s}`);
  const start = utf8(s.slice(0, i)).length;
  return { start, end: start + utf8(needle).length };
}

describe('utf16Ranges: highlights from UTF-8 bytes to string indexes', () => {
  it('maps ranges after multi-byte characters, emoji and CJK to the matched text', () => {
    const cases: Array<[string, string]> = [
      ['plain ascii match', 'match'],
      ['Wir treffen uns an der Straße heute', 'Straße'],
      ['Straße und Straßenbahn', 'Straßenbahn'], // after a 2-byte ß
      ['🎉🎉 party at the lantern 🏮 tonight', 'lantern'], // after 4-byte emoji (2 code units each)
      ['我们明天在图书馆门口见面', '图书'], // 3-byte characters, inside a run
      ['พบกันที่สถานีรถไฟพรุ่งนี้', 'สถานี'],
      ['👨‍👩‍👧 family 👨‍👩‍👧', '👨‍👩‍👧'], // a joined emoji highlighted itself
      ['end of the text', 'text'],
    ];
    for (const [s, needle] of cases) {
      const [r] = utf16Ranges(s, [byteRange(s, needle)]);
      expect(s.slice(r!.start, r!.end), s).toBe(needle);
    }
  });

  it('widens a bound inside a character, clamps, drops empty ranges, sorts and merges', () => {
    const s = 'aß🎉b'; // bytes: a=0, ß=1-2, 🎉=3-6, b=7; length 8
    expect(utf16Ranges(s, [{ start: 2, end: 4 }])).toEqual([{ start: 1, end: 4 }]); // ß and 🎉 whole
    expect(utf16Ranges(s, [{ start: 7, end: 99 }])).toEqual([{ start: 4, end: 5 }]);
    expect(utf16Ranges(s, [{ start: 3, end: 3 }, { start: 9, end: 12 }, {}])).toEqual([]);
    expect(utf16Ranges(s, [{ start: 7, end: 8 }, { start: 0, end: 1 }])).toEqual([
      { start: 0, end: 1 },
      { start: 4, end: 5 },
    ]);
    expect(utf16Ranges(s, [{ start: 0, end: 3 }, { start: 1, end: 7 }])).toEqual([{ start: 0, end: 4 }]);
    expect(utf16Ranges('', [{ start: 0, end: 1 }])).toEqual([]);
  });

  it('snippetParts splits a snippet into matched and plain pieces that join back to it', () => {
    const s = '🏮 Lantern festival, lanterns everywhere';
    const hl = utf16Ranges(s, [byteRange(s, 'Lantern'), byteRange(s, 'lanterns')]);
    const parts = snippetParts(s, hl);
    expect(parts).toEqual([
      { text: '🏮 ', highlight: false },
      { text: 'Lantern', highlight: true },
      { text: ' festival, ', highlight: false },
      { text: 'lanterns', highlight: true },
      { text: ' everywhere', highlight: false },
    ]);
    expect(parts.map((p) => p.text).join('')).toBe(s);
    expect(snippetParts('whole', [{ start: 0, end: 5 }])).toEqual([{ text: 'whole', highlight: true }]);
    expect(snippetParts('none', [])).toEqual([{ text: 'none', highlight: false }]);
  });
});

// The JSON frames checked against the real schema: the server decodes the
// SDK's JSON with protojson, and writes its answers the same way.
describe('search frames against parley.proto', () => {
  const root = protobuf.parse(readFileSync(resolve(import.meta.dirname, '../../../../proto/parley/v1/parley.proto'), 'utf8'), {
    keepCase: false,
  }).root;
  const ClientFrame = root.lookupType('parley.v1.ClientFrame');
  const ServerFrame = root.lookupType('parley.v1.ServerFrame');

  it('search is ClientFrame field 130 with the filters and cursor the schema names', () => {
    const json = encodeFrame({
      id: 4,
      search: {
        query: 'Straße',
        phrase: true,
        conversationId: 'g:1',
        from: 'alice',
        contentType: 'text',
        hasAttachment: true,
        since: 1763800000000,
        until: 1763900000000,
        before: { serverTime: 1763850000000, conversationId: 'g:1', seq: 42 },
        limit: 50,
      },
    });
    const obj = JSON.parse(json) as Record<string, unknown>;
    expect(ClientFrame.verify(obj)).toBeNull();
    const back = ClientFrame.toObject(ClientFrame.decode(ClientFrame.encode(ClientFrame.fromObject(obj)).finish()), { longs: Number });
    expect(back).toEqual(obj); // every field survived: none was misnamed
    expect((ClientFrame.fields['search'] as protobuf.Field).id).toBe(130);
  });

  it('searchResults (ServerFrame field 50) decodes with numbers, a text snippet and byte highlights', () => {
    expect((ServerFrame.fields['searchResults'] as protobuf.Field).id).toBe(50);
    const snippet = 'An der Straße 🎉';
    const bin = ServerFrame.encode(
      ServerFrame.fromObject({
        id: 6,
        searchResults: {
          hits: [{ conversationId: 'p:alice:bob', seq: 12, from: 'alice', serverTime: 1763800000456, snippet, highlights: [byteRange(snippet, 'Straße')] }],
          next: { serverTime: 1763800000456, conversationId: 'p:alice:bob', seq: 12 },
        },
      }),
    ).finish();
    // As protojson writes it: 64-bit integers as strings.
    const f = decodeFrame(JSON.stringify(ServerFrame.toObject(ServerFrame.decode(bin), { longs: String })));
    const hit = f.searchResults!.hits![0]!;
    expect(hit).toEqual({
      conversationId: 'p:alice:bob',
      seq: 12,
      from: 'alice',
      serverTime: 1763800000456,
      snippet,
      highlights: [{ start: 7, end: 14 }],
    });
    expect(f.searchResults!.next).toEqual({ serverTime: 1763800000456, conversationId: 'p:alice:bob', seq: 12 });
  });

  it("a reply preview's snippet stays bytes", () => {
    const f = decodeFrame('{"message":{"conversationId":"c","seq":"2","replyTo":"1","replyPreview":{"seq":"1","snippet":"aGk="}}}');
    expect(text(f.message!.replyPreview!.snippet)).toBe('hi');
  });
});

describe('ParleyClient.search against a scripted server', () => {
  const clients: ParleyClient[] = [];
  afterEach(() => {
    for (const c of clients.splice(0)) c.close();
  });
  function client(srv: FakeServer): ParleyClient {
    const c = new ParleyClient({ url: 'ws://fake/ws', token: 'bob', WebSocket: srv.WebSocket, minBackoffMs: 5, maxBackoffMs: 40, requestTimeoutMs: 2000 });
    clients.push(c);
    return c;
  }
  const texts = ['🎉 lantern one', 'Straße lantern two', '图书馆 lantern three', 'lantern four', 'lantern five'];
  /** Hits for texts, newest (last) first, paged by seq. */
  function answer(srv: FakeServer): void {
    srv.hook = (s, f) => {
      if (!f.search) return false;
      const limit = f.search.limit || 20;
      const before = f.search.before?.seq ?? Infinity;
      const all: SearchHit[] = texts
        .map((t, i) => ({ conversationId: 'p:alice:bob', seq: i + 1, from: 'alice', serverTime: 1000 + i, snippet: t, highlights: [byteRange(t, 'lantern')] }))
        .reverse()
        .filter((h) => h.seq < before);
      const hits = all.slice(0, limit);
      const last = hits[hits.length - 1];
      const next = all.length > limit && last ? { serverTime: last.serverTime, conversationId: last.conversationId, seq: last.seq } : undefined;
      s.push({ id: f.id, searchResults: { hits, next } });
      return true;
    };
  }

  it('sends the query and options, converts highlights, and pages with next until it is absent', async () => {
    const srv = new FakeServer();
    answer(srv);
    const c = client(srv);
    await c.waitReady(2000);
    const p1 = await c.search('lantern', { limit: 2, conversationId: 'p:alice:bob', since: 5 });
    expect(srv.frames.filter((f) => f.search).at(-1)!.search).toEqual({ query: 'lantern', limit: 2, conversationId: 'p:alice:bob', since: 5 });
    expect(p1.hits.map((h) => h.seq)).toEqual([5, 4]);
    expect(p1.next).toEqual({ serverTime: 1003, conversationId: 'p:alice:bob', seq: 4 });

    const p2 = await c.search('lantern', { limit: 2, before: p1.next });
    expect(srv.frames.filter((f) => f.search).at(-1)!.search!.before).toEqual({ serverTime: 1003, conversationId: 'p:alice:bob', seq: 4 });
    expect(p2.hits.map((h) => h.seq)).toEqual([3, 2]);
    for (const h of p2.hits) expect(h.highlights.map((r) => h.snippet.slice(r.start, r.end))).toEqual(['lantern']);
    expect(p2.hits[1]).toEqual({ conversationId: 'p:alice:bob', seq: 2, from: 'alice', serverTime: 1001, snippet: 'Straße lantern two', highlights: [{ start: 7, end: 14 }] });

    const p3 = await c.search('lantern', { limit: 2, before: p2.next });
    expect(p3.hits.map((h) => h.seq)).toEqual([1]);
    expect(p3.hits[0]!.snippet.slice(p3.hits[0]!.highlights[0]!.start, p3.hits[0]!.highlights[0]!.end)).toBe('lantern');
    expect(p3.next).toBeUndefined();

    const seqs: number[] = [];
    for await (const page of c.searchPages('lantern', { limit: 2 })) seqs.push(...page.hits.map((h) => h.seq));
    expect(seqs).toEqual([5, 4, 3, 2, 1]);
  });

  it('retries a busy node, throws UNAVAILABLE (search off) and BAD_REQUEST at once', async () => {
    const srv = new FakeServer();
    let busy = 2;
    let code: 'ERROR_CODE_UNAVAILABLE' | 'ERROR_CODE_BAD_REQUEST' | '' = '';
    srv.hook = (s, f) => {
      if (!f.search) return false;
      if (code) s.push({ id: f.id, error: { code, temporary: code === 'ERROR_CODE_UNAVAILABLE' } });
      else if (busy-- > 0) s.push({ id: f.id, error: { code: 'ERROR_CODE_TOO_MANY_REQUESTS', temporary: true } });
      else s.push({ id: f.id, searchResults: {} });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    const searches = () => srv.frames.filter((f) => f.search).length;
    expect(await c.search('x')).toEqual({ hits: [] });
    expect(searches()).toBe(3);

    for (const want of ['ERROR_CODE_UNAVAILABLE', 'ERROR_CODE_BAD_REQUEST'] as const) {
      code = want;
      const before = searches();
      const err = await c.search('x').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ParleyError);
      expect((err as ParleyError).code).toBe(want);
      expect(searches()).toBe(before + 1); // not retried
    }
  });

  it('gives up on a node that stays busy', async () => {
    const srv = new FakeServer();
    srv.hook = (s, f) => {
      if (!f.search) return false;
      s.push({ id: f.id, error: { code: 'ERROR_CODE_TOO_MANY_REQUESTS', temporary: true } });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    const err = await c.search('x').catch((e: unknown) => e);
    expect((err as ParleyError).code).toBe('ERROR_CODE_TOO_MANY_REQUESTS');
    expect(srv.frames.filter((f) => f.search).length).toBe(5);
  });

  it('resends a search cut by a dropped connection on the next one', async () => {
    const srv = new FakeServer();
    let drop = true;
    srv.hook = (s, f) => {
      if (!f.search) return false;
      if (drop) {
        drop = false;
        s.close(1006);
      } else s.push({ id: f.id, searchResults: { hits: [{ conversationId: 'g:1', seq: 3, snippet: 'found' }] } });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    const page = await c.search('found');
    expect(page.hits).toEqual([{ conversationId: 'g:1', seq: 3, from: '', serverTime: 0, snippet: 'found', highlights: [] }]);
    expect(srv.attempts.length).toBe(2);
  });
});

import { describe, expect, it } from 'vitest';
import { decodeFrame, encodeFrame, fromBase64, text, toBase64, utf8 } from '../../src/codec.js';

describe('codec', () => {
  it('base64 round-trips every length and matches the platform encoder', () => {
    for (let n = 0; n < 40; n++) {
      const b = new Uint8Array(n).map((_, i) => (i * 37 + n) & 0xff);
      const s = toBase64(b);
      expect(s).toBe(Buffer.from(b).toString('base64'));
      expect([...fromBase64(s)]).toEqual([...b]);
    }
    expect(text(fromBase64('aGVsbG8gYm9i'))).toBe('hello bob');
    expect(text(fromBase64('aGk'))).toBe('hi'); // unpadded
    expect(() => fromBase64('a$b=')).toThrow();
  });

  it('decodes 64-bit counters to numbers, keeps server-wide ids as strings, payloads as bytes', () => {
    const f = decodeFrame(
      '{"message":{"conversationId":"p:alice:bob","seq":"12","messageId":"250151488918126592","from":"alice","payload":"aGVsbG8=","serverTime":"1763800000456","kind":"MESSAGE_KIND_NORMAL","event":{"targetSeq":"3"}}}',
    );
    expect(f.message!.seq).toBe(12);
    expect(f.message!.messageId).toBe('250151488918126592');
    expect(f.message!.serverTime).toBe(1763800000456);
    expect(f.message!.event!.targetSeq).toBe(3);
    expect(text(f.message!.payload)).toBe('hello');
    const h = decodeFrame('{"id":"9","hidden":{"conversationId":"c","seqs":["1","2"]}}');
    expect(h.id).toBe(9);
    expect(h.hidden!.seqs).toEqual([1, 2]);
  });

  it('encodes bytes as base64 and keeps unicode text intact', () => {
    const s = encodeFrame({ id: 2, send: { clientMsgId: 'c1', to: 'bob', payload: utf8('héllo 👋') } });
    const j = JSON.parse(s);
    expect(j.id).toBe(2);
    expect(text(fromBase64(j.send.payload))).toBe('héllo 👋');
  });
});

import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import protobuf from 'protobufjs';
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

// The moderation additions, checked against the real schema: the SDK speaks
// JSON, the server also accepts binary protobuf; both forms of a frame must
// name the same fields (proto/parley/v1/parley.proto, parsed by protobufjs).
describe('codec: moderation fields against parley.proto', () => {
  const root = protobuf.parse(readFileSync(resolve(import.meta.dirname, '../../../../proto/parley/v1/parley.proto'), 'utf8'), {
    keepCase: false,
  }).root;
  const ClientFrame = root.lookupType('parley.v1.ClientFrame');
  const ServerFrame = root.lookupType('parley.v1.ServerFrame');
  const ErrorCode = root.lookupEnum('parley.v1.ErrorCode');

  /** The top-level fields of protobuf bytes: [field number, wire type, value] (length-delimited values as bytes). */
  function fields(b: Uint8Array): Array<[number, number, number | Uint8Array]> {
    const out: Array<[number, number, number | Uint8Array]> = [];
    let i = 0;
    const varint = () => {
      let v = 0;
      let shift = 0;
      for (;;) {
        const x = b[i++]!;
        v += (x & 0x7f) * 2 ** shift;
        if (x < 0x80) return v;
        shift += 7;
      }
    };
    while (i < b.length) {
      const tag = varint();
      const wt = tag & 7;
      if (wt === 0) out.push([tag >>> 3, wt, varint()]);
      else if (wt === 2) {
        const n = varint();
        out.push([tag >>> 3, wt, b.subarray(i, i + n)]);
        i += n;
      } else throw new Error('unexpected wire type ' + wt);
    }
    return out;
  }

  it('reportMessage: the JSON frame is ClientFrame field 110, ReportMessage fields 1-4', () => {
    const json = encodeFrame({ id: 3, reportMessage: { conversationId: 'p:alice:bob', seq: 12, reason: 'abuse', note: 'threatening me 😠' } });
    expect(JSON.parse(json)).toEqual({ id: 3, reportMessage: { conversationId: 'p:alice:bob', seq: 12, reason: 'abuse', note: 'threatening me 😠' } });
    // The same frame in binary: what the server decodes it as.
    const obj = JSON.parse(json) as Record<string, unknown>;
    expect(ClientFrame.verify(obj)).toBeNull();
    const bin = ClientFrame.encode(ClientFrame.fromObject(obj)).finish();
    const top = fields(bin);
    expect(top.map(([n, wt]) => [n, wt])).toEqual([
      [1, 0],
      [110, 2],
    ]);
    expect([...bin.subarray(2, 4)]).toEqual([0xf2, 0x06]); // tag (110 << 3 | 2) as a varint
    const body = fields(top[1]![2] as Uint8Array);
    expect(body.map(([n, wt]) => [n, wt])).toEqual([
      [1, 2],
      [2, 0],
      [3, 2],
      [4, 2],
    ]);
    expect(text(body[0]![2] as Uint8Array)).toBe('p:alice:bob');
    expect(body[1]![2]).toBe(12);
    expect(text(body[2]![2] as Uint8Array)).toBe('abuse');
    expect(text(body[3]![2] as Uint8Array)).toBe('threatening me 😠');
    // Without a note the field is left out.
    expect(JSON.parse(encodeFrame({ reportMessage: { conversationId: 'g:1', seq: 1, reason: 'spam' } })).reportMessage).toEqual({
      conversationId: 'g:1',
      seq: 1,
      reason: 'spam',
    });
  });

  it('error: REJECTED (17) with reason (field 4) and rejectCode (field 5), from either form of the frame', () => {
    expect(ErrorCode.values['ERROR_CODE_REJECTED']).toBe(17);
    // As the Go server writes it in JSON (protojson: 64-bit id as a string).
    const fromJson = decodeFrame(
      '{"id":"7","error":{"code":"ERROR_CODE_REJECTED","message":"rejected by moderation","temporary":false,"reason":"No spam here, please","rejectCode":"spam"}}',
    );
    expect(fromJson).toEqual({
      id: 7,
      error: { code: 'ERROR_CODE_REJECTED', message: 'rejected by moderation', temporary: false, reason: 'No spam here, please', rejectCode: 'spam' },
    });
    // The binary frame with the same content: the fields sit where the SDK's JSON names them.
    const msg = ServerFrame.fromObject({
      id: 7,
      error: { code: 'ERROR_CODE_REJECTED', message: 'rejected by moderation', temporary: false, reason: 'Ни слова 🙊', rejectCode: 'word_filter' },
    });
    const bin = ServerFrame.encode(msg).finish();
    const top = fields(bin);
    expect(top.map(([n, wt]) => [n, wt])).toEqual([
      [1, 0],
      [9, 2],
    ]);
    const err = fields(top[1]![2] as Uint8Array);
    expect(err.map(([n, wt]) => [n, wt])).toEqual([
      [1, 0],
      [2, 2],
      [3, 0],
      [4, 2],
      [5, 2],
    ]);
    expect(err[0]![2]).toBe(17);
    expect(text(err[3]![2] as Uint8Array)).toBe('Ни слова 🙊');
    expect(text(err[4]![2] as Uint8Array)).toBe('word_filter');
    // Its canonical JSON form, decoded by the SDK.
    const asJson = JSON.stringify(ServerFrame.toObject(ServerFrame.decode(bin), { enums: String, longs: String }));
    const f = decodeFrame(asJson);
    expect(f.id).toBe(7);
    expect(f.error).toMatchObject({ code: 'ERROR_CODE_REJECTED', reason: 'Ни слова 🙊', rejectCode: 'word_filter' });
  });

  it('message: a moderated RECALL (MessageEvent field 6) decodes to event.moderated', () => {
    const json =
      '{"message":{"conversationId":"p:alice:bob","seq":"9","messageId":"250151488918126599","from":"alice","to":"bob","serverTime":"1763800000456","kind":"MESSAGE_KIND_RECALL","event":{"targetSeq":"4","moderated":true}}}';
    const f = decodeFrame(json);
    expect(f.message!.kind).toBe('MESSAGE_KIND_RECALL');
    expect(f.message!.event).toEqual({ targetSeq: 4, moderated: true });
    // The binary form of the same event: moderated is field 6, a varint.
    const bin = ServerFrame.encode(ServerFrame.fromObject(JSON.parse(json) as Record<string, unknown>)).finish();
    const message = fields(fields(bin).find(([n]) => n === 5)![2] as Uint8Array);
    const event = fields(message.find(([n]) => n === 11)![2] as Uint8Array); // Message.event
    expect(event).toEqual([
      [1, 0, 4],
      [6, 0, 1],
    ]);
    // A user's own recall does not say moderated.
    expect(decodeFrame('{"message":{"conversationId":"c","seq":"2","kind":"MESSAGE_KIND_RECALL","event":{"targetSeq":"1"}}}').message!.event!.moderated).toBeUndefined();
  });
});

// The JSON codec: frames travel as WebSocket text messages holding the
// canonical protobuf JSON mapping (see README.md, "Codec", for why JSON).
import type { ClientFrame, ServerFrame } from './types.js';

// 64-bit integer fields that the SDK hands out as numbers (they stay below
// 2^53: sequence numbers, counts and unix-millisecond times). Server-wide ids
// (messageId, sessionId) are not in this list and stay strings. File sizes
// and durations are 64-bit too, far below 2^53.
// The frame's own `id` is converted in decodeFrame: other fields named id
// (an attachment's) are strings.
const NUMERIC = new Set([
  'seq',
  'lastSeq',
  'deliveredSeq',
  'readSeq',
  'unreadCount',
  'peerDeliveredSeq',
  'peerReadSeq',
  'clearedSeq',
  'leftSeq',
  'targetSeq',
  'serverTime',
  'editedAt',
  'mutedUntil',
  'createdAt',
  'joinedAt',
  'lastSeen',
  'updatedAt',
  'size',
  'durationMs',
  'expiresAt',
  'replyTo',
  'threadRoot',
  'lastReplySeq',
  'lastReplyAt',
  'reactionVersion',
  'version',
  'pinnedAt',
  'firstSeq',
  'epoch',
]);
const BYTES = new Set(['payload', 'body', 'snippet', 'mlsWelcome', 'keyPackage']);

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const B64_INDEX = (() => {
  const t = new Int16Array(128).fill(-1);
  for (let i = 0; i < B64.length; i++) t[B64.charCodeAt(i)] = i;
  t['-'.charCodeAt(0)] = 62; // URL-safe alphabet, accepted too
  t['_'.charCodeAt(0)] = 63;
  return t;
})();

/** Standard base64 (with padding) of bytes. */
export function toBase64(b: Uint8Array): string {
  let out = '';
  let i = 0;
  for (; i + 2 < b.length; i += 3) {
    const n = (b[i]! << 16) | (b[i + 1]! << 8) | b[i + 2]!;
    out += B64[n >> 18]! + B64[(n >> 12) & 63]! + B64[(n >> 6) & 63]! + B64[n & 63]!;
  }
  if (i < b.length) {
    const n = (b[i]! << 16) | ((i + 1 < b.length ? b[i + 1]! : 0) << 8);
    out += B64[n >> 18]! + B64[(n >> 12) & 63]! + (i + 1 < b.length ? B64[(n >> 6) & 63]! : '=') + '=';
  }
  return out;
}

/** URL-safe base64 without padding (RFC 4648 §5), as Web Push keys are written. */
export function toBase64Url(b: Uint8Array): string {
  return toBase64(b).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

/** Decodes standard or URL-safe base64, with or without padding. */
export function fromBase64(s: string): Uint8Array {
  let len = s.length;
  while (len > 0 && s.charCodeAt(len - 1) === 61 /* = */) len--;
  const out = new Uint8Array(Math.floor((len * 3) / 4));
  let bits = 0;
  let acc = 0;
  let o = 0;
  for (let i = 0; i < len; i++) {
    const c = s.charCodeAt(i);
    const v = c < 128 ? B64_INDEX[c]! : -1;
    if (v < 0) throw new Error('parley: invalid base64');
    acc = (acc << 6) | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (acc >> bits) & 0xff;
    }
  }
  return out.subarray(0, o);
}

// Made on first use, so that the SDK loads where they are missing until a
// polyfill is installed (React Native has no TextDecoder).
let enc: TextEncoder | undefined;
let dec: TextDecoder | undefined;

/** UTF-8 bytes of a string. */
export function utf8(s: string): Uint8Array {
  return (enc ??= new TextEncoder()).encode(s);
}

/** The text of UTF-8 bytes (empty for none). Needs a global TextDecoder. */
export function text(b: Uint8Array | undefined): string {
  return b ? (dec ??= new TextDecoder()).decode(b) : '';
}

/** Encodes a client frame as the JSON text of one WebSocket message. */
export function encodeFrame(f: ClientFrame): string {
  return JSON.stringify(f, (_k, v: unknown) => (v instanceof Uint8Array ? toBase64(v) : v));
}

/** Decodes a server frame from a WebSocket text message. */
export function decodeFrame(data: string): ServerFrame {
  const f = JSON.parse(data, function (this: Record<string, unknown>, k: string, v: unknown) {
    if (typeof v === 'string') {
      if (NUMERIC.has(k)) return Number(v);
      // A search hit's snippet is text, a reply preview's bytes: of the two
      // only the hit carries a conversationId.
      if (BYTES.has(k) && !(k === 'snippet' && 'conversationId' in this)) return fromBase64(v);
    } else if (k === 'seqs' && Array.isArray(v)) {
      return v.map(Number);
    }
    return v;
  }) as ServerFrame;
  if (typeof f.id === 'string') f.id = Number(f.id);
  return f;
}

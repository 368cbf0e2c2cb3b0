// A Web Push service for the browser tests, in place of the browser vendor's
// (which cannot be reached from here): an HTTPS server on 127.0.0.1 that
// takes RFC 8030 pushes (POST to a subscription's endpoint, answered 201),
// and the checks a real push service and browser make of them: the VAPID
// identification (RFC 8292) and the aes128gcm payload encryption (RFC 8291),
// decrypted with the subscription's private key, which the test holds.
//
// Its certificate is self-signed, made here; the Parley server under test
// trusts it through SSL_CERT_FILE (Go reads the roots from that file).
import { createDecipheriv, createECDH, createPublicKey, generateKeyPairSync, hkdfSync, randomBytes, sign, verify, type ECDH, type KeyObject } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const b64url = (b: Uint8Array) => Buffer.from(b).toString('base64url');

// ---- a self-signed certificate (X.509 v3, ECDSA P-256), DER built by hand ----

function tlv(tag: number, ...parts: Buffer[]): Buffer {
  const body = Buffer.concat(parts);
  let len: Buffer;
  if (body.length < 0x80) len = Buffer.from([body.length]);
  else {
    const b: number[] = [];
    for (let n = body.length; n > 0; n >>= 8) b.unshift(n & 0xff);
    len = Buffer.from([0x80 | b.length, ...b]);
  }
  return Buffer.concat([Buffer.from([tag]), len, body]);
}
const seq = (...p: Buffer[]) => tlv(0x30, ...p);
function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number);
  const out = [40 * a! + b!];
  for (const n of rest) {
    const bytes = [n & 0x7f];
    for (let v = n >>> 7; v; v >>>= 7) bytes.unshift((v & 0x7f) | 0x80);
    out.push(...bytes);
  }
  return tlv(0x06, Buffer.from(out));
}
const utcTime = (d: Date) => tlv(0x17, Buffer.from(d.toISOString().replace(/[-:T]/g, '').slice(2, 14) + 'Z'));

/** A certificate for IP address 127.0.0.1, valid from an hour ago for a day, signed by its own key. */
function selfSignedCert(): { cert: string; key: string } {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const ecdsaSHA256 = seq(oid('1.2.840.10045.4.3.2'));
  const name = seq(tlv(0x31, seq(oid('2.5.4.3'), tlv(0x0c, Buffer.from('Parley test push service')))));
  const serial = randomBytes(8);
  serial[0] = (serial[0]! & 0x7f) | 0x40; // positive, minimal
  const now = Date.now();
  const subjectAltName = seq(oid('2.5.29.17'), tlv(0x04, seq(tlv(0x87, Buffer.from([127, 0, 0, 1])))));
  const basicConstraints = seq(oid('2.5.29.19'), tlv(0x01, Buffer.from([0xff])), tlv(0x04, seq(tlv(0x01, Buffer.from([0xff])))));
  const tbs = seq(
    tlv(0xa0, tlv(0x02, Buffer.from([2]))), // v3
    tlv(0x02, serial),
    ecdsaSHA256,
    name,
    seq(utcTime(new Date(now - 3600_000)), utcTime(new Date(now + 86400_000))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    tlv(0xa3, seq(subjectAltName, basicConstraints)),
  );
  const sig = sign('sha256', tbs, privateKey);
  const der = seq(tbs, ecdsaSHA256, tlv(0x03, Buffer.from([0]), sig));
  const cert = '-----BEGIN CERTIFICATE-----\n' + der.toString('base64').replace(/.{64}/g, '$&\n').trimEnd() + '\n-----END CERTIFICATE-----\n';
  return { cert, key: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string };
}

// ---- subscriptions ----

/** A browser's push subscription as the test makes it: the endpoint, the public keys, and the private key to decrypt with. */
export class TestSubscription {
  readonly id: string;
  readonly endpoint: string;
  /** base64url of the 65-byte uncompressed P-256 point (the browser's "p256dh"). */
  readonly p256dh: string;
  /** base64url of the 16-byte authentication secret. */
  readonly auth: string;
  private readonly ecdh: ECDH;
  private readonly authSecret: Buffer;

  constructor(origin: string) {
    this.id = randomBytes(9).toString('base64url');
    this.endpoint = `${origin}/push/${this.id}`;
    this.ecdh = createECDH('prime256v1');
    this.ecdh.generateKeys();
    this.authSecret = randomBytes(16);
    this.p256dh = b64url(this.ecdh.getPublicKey());
    this.auth = b64url(this.authSecret);
  }

  /** What the page's PushManager stub hands out. */
  keys(): { endpoint: string; p256dh: string; auth: string } {
    return { endpoint: this.endpoint, p256dh: this.p256dh, auth: this.auth };
  }

  /**
   * Decrypts an aes128gcm body (RFC 8188 with the RFC 8291 key derivation):
   * header salt(16) rs(4) idlen(1) keyid(the sender's ephemeral public key),
   * then one record: ciphertext and tag, the plaintext padded after a 0x02
   * delimiter. Throws when any of it is wrong.
   */
  decrypt(body: Buffer): Buffer {
    if (body.length < 21 + 65 + 16 + 1) throw new Error(`body of ${body.length} bytes is too short for aes128gcm`);
    const salt = body.subarray(0, 16);
    const rs = body.readUInt32BE(16);
    const idlen = body[20]!;
    if (idlen !== 65) throw new Error(`keyid of ${idlen} bytes; RFC 8291 puts the 65-byte sender key there`);
    const senderKey = body.subarray(21, 21 + 65);
    const record = body.subarray(21 + 65);
    if (rs < 18 || record.length > rs) throw new Error(`record of ${record.length} bytes with rs ${rs}: RFC 8291 sends one record`);
    const ecdhSecret = this.ecdh.computeSecret(senderKey);
    const keyInfo = Buffer.concat([Buffer.from('WebPush: info\0'), this.ecdh.getPublicKey(), senderKey]);
    const ikm = Buffer.from(hkdfSync('sha256', ecdhSecret, this.authSecret, keyInfo, 32));
    const cek = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: aes128gcm\0'), 16));
    const nonce = Buffer.from(hkdfSync('sha256', ikm, salt, Buffer.from('Content-Encoding: nonce\0'), 12));
    const d = createDecipheriv('aes-128-gcm', cek, nonce);
    d.setAuthTag(record.subarray(record.length - 16));
    const padded = Buffer.concat([d.update(record.subarray(0, record.length - 16)), d.final()]);
    let end = padded.length - 1;
    while (end >= 0 && padded[end] === 0) end--;
    if (end < 0 || padded[end] !== 2) throw new Error('no 0x02 delimiter ending the last record');
    return padded.subarray(0, end);
  }
}

// ---- the service ----

export interface PushRequest {
  /** The subscription id (the endpoint's last path segment). */
  id: string;
  method: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

export interface PushService {
  origin: string;
  /** A PEM file with the service's certificate, for SSL_CERT_FILE. */
  caFile: string;
  /** Every request taken, in order. */
  requests: PushRequest[];
  subscribe(): TestSubscription;
  /** The requests for one subscription. */
  received(sub: TestSubscription): PushRequest[];
  close(): Promise<void>;
}

export async function startPushService(): Promise<PushService> {
  const { cert, key } = selfSignedCert();
  const dir = mkdtempSync(join(tmpdir(), 'parley-push-'));
  const caFile = join(dir, 'ca.pem');
  writeFileSync(caFile, cert);
  const requests: PushRequest[] = [];
  const known = new Set<string>();
  let served = 0;
  const server: Server = createServer({ cert, key }, (req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= 8192) chunks.push(c);
    });
    req.on('end', () => {
      const m = /^\/push\/([A-Za-z0-9_-]+)$/.exec(req.url ?? '');
      if (req.method !== 'POST' || !m || !known.has(m[1]!)) {
        res.writeHead(404).end('no such subscription');
        return;
      }
      if (size > 8192) {
        res.writeHead(413).end('payload too large');
        return;
      }
      requests.push({ id: m[1]!, method: req.method, headers: req.headers, body: Buffer.concat(chunks) });
      // RFC 8030 §5: 201 Created, with the push message resource's URL.
      res.writeHead(201, { location: `/message/${++served}` }).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const origin = `https://127.0.0.1:${port}`;
  return {
    origin,
    caFile,
    requests,
    subscribe() {
      const s = new TestSubscription(origin);
      known.add(s.id);
      return s;
    },
    received: (sub) => requests.filter((r) => r.id === sub.id),
    close: () =>
      new Promise<void>((r) => {
        server.closeAllConnections();
        server.close(() => r());
        rmSync(dir, { recursive: true, force: true });
      }),
  };
}

// ---- checking a push as a push service and a browser would ----

export interface CheckedPush {
  /** The VAPID JWT's claims. */
  claims: { aud: string; exp: number; sub: string };
  ttl: number;
  urgency: string;
  topic: string | undefined;
  /** The decrypted payload, parsed as JSON. */
  payload: Record<string, unknown>;
}

function rawP256Key(raw: Buffer): KeyObject {
  if (raw.length !== 65 || raw[0] !== 4) throw new Error('the VAPID key is not a 65-byte uncompressed P-256 point');
  return createPublicKey({ key: { kty: 'EC', crv: 'P-256', x: b64url(raw.subarray(1, 33)), y: b64url(raw.subarray(33)) }, format: 'jwk' });
}

/**
 * Checks one request as a push service must (RFC 8030, RFC 8292) and
 * decrypts it as the browser would (RFC 8291); throws on the first fault.
 * vapidKey: the server's public key (GET /v1/push/webpush-key); subject: the
 * contact the server is configured with.
 */
export function checkPush(req: PushRequest, sub: TestSubscription, vapidKey: string, subject: string): CheckedPush {
  const h = req.headers;
  const one = (name: string) => {
    const v = h[name];
    if (Array.isArray(v)) throw new Error(`${name} given ${v.length} times`);
    return v;
  };
  if (req.method !== 'POST') throw new Error(`method ${req.method}, want POST`);
  // RFC 8292 §3: Authorization: vapid t=<JWT>, k=<public key>.
  const m = /^vapid t=([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]+),\s*k=([A-Za-z0-9_-]+)$/.exec(h.authorization ?? '');
  if (!m) throw new Error(`Authorization ${JSON.stringify(h.authorization)} is not "vapid t=JWT, k=KEY"`);
  const [, jh, jc, js, k] = m as unknown as [string, string, string, string, string];
  if (k !== vapidKey.replace(/=+$/, '')) throw new Error(`k=${k} is not the server's VAPID key ${vapidKey}`);
  const header = JSON.parse(Buffer.from(jh, 'base64url').toString()) as { alg?: string; typ?: string };
  if (header.alg !== 'ES256') throw new Error(`JWT alg ${header.alg}, want ES256`);
  const ok = verify('sha256', Buffer.from(`${jh}.${jc}`), { key: rawP256Key(Buffer.from(k, 'base64url')), dsaEncoding: 'ieee-p1363' }, Buffer.from(js, 'base64url'));
  if (!ok) throw new Error('the VAPID JWT signature does not verify with the server key');
  const claims = JSON.parse(Buffer.from(jc, 'base64url').toString()) as CheckedPush['claims'];
  const aud = new URL(sub.endpoint).origin;
  if (claims.aud !== aud) throw new Error(`JWT aud ${claims.aud}, want the endpoint's origin ${aud}`);
  const now = Date.now() / 1000;
  if (typeof claims.exp !== 'number' || claims.exp <= now || claims.exp > now + 24 * 3600 + 60) {
    throw new Error(`JWT exp ${claims.exp} is not in the next 24 hours (now ${Math.floor(now)})`);
  }
  if (claims.sub !== subject) throw new Error(`JWT sub ${claims.sub}, want ${subject}`);
  // RFC 8030 §5.2–5.4 and RFC 8291 §4.
  if (one('content-encoding') !== 'aes128gcm') throw new Error(`Content-Encoding ${h['content-encoding']}, want aes128gcm`);
  const ttl = one('ttl') ?? '';
  if (!/^\d+$/.test(ttl)) throw new Error(`TTL ${JSON.stringify(ttl)} is not a number of seconds`);
  const urgency = one('urgency') ?? 'normal';
  if (!['very-low', 'low', 'normal', 'high'].includes(urgency)) throw new Error(`Urgency ${urgency}`);
  const topic = one('topic');
  if (topic !== undefined && !/^[A-Za-z0-9_-]{1,32}$/.test(topic)) throw new Error(`Topic ${topic} is not at most 32 base64url characters`);
  if (req.body.length > 4096) throw new Error(`body of ${req.body.length} bytes; push services need take only 4096`);
  const payload = JSON.parse(sub.decrypt(req.body).toString('utf8')) as Record<string, unknown>;
  return { claims, ttl: Number(ttl), urgency, topic, payload };
}

/**
 * An init script for the page: PushManager's subscribe and getSubscription
 * hand out a subscription with the test's endpoint and keys (a real
 * browser's would name its vendor's push service). It refuses as the real
 * one does without permission or userVisibleOnly, keeps the subscription in
 * localStorage (so a reload sees it), and records in window.__push the
 * applicationServerKey of each subscribe (base64url) and each unsubscribe.
 */
export function pushManagerStub(s: { endpoint: string; p256dh: string; auth: string }): void {
  if (!('PushManager' in self)) return;
  const KEY = 'test.pushSubscription';
  const fromB64 = (v: string) => Uint8Array.from(atob(v.replace(/-/g, '+').replace(/_/g, '/')), (c) => c.charCodeAt(0));
  const toB64 = (b: Uint8Array) => btoa(String.fromCharCode(...b)).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  const log: { subscribe: string[]; unsubscribe: number } = { subscribe: [], unsubscribe: 0 };
  (window as unknown as { __push: typeof log }).__push = log;
  const make = (serverKey: string) => ({
    endpoint: s.endpoint,
    expirationTime: null,
    options: { userVisibleOnly: true, applicationServerKey: fromB64(serverKey).buffer },
    getKey: (name: string) => (name === 'p256dh' ? fromB64(s.p256dh).buffer : name === 'auth' ? fromB64(s.auth).buffer : null),
    toJSON: () => ({ endpoint: s.endpoint, expirationTime: null, keys: { p256dh: s.p256dh, auth: s.auth } }),
    unsubscribe: async () => {
      localStorage.removeItem(KEY);
      log.unsubscribe++;
      return true;
    },
  });
  PushManager.prototype.getSubscription = async function () {
    const k = localStorage.getItem(KEY);
    return (k ? make(k) : null) as unknown as PushSubscription;
  };
  PushManager.prototype.subscribe = async function (opts?: PushSubscriptionOptionsInit) {
    if (Notification.permission !== 'granted') throw new DOMException('Registration failed - permission denied', 'NotAllowedError');
    if (!opts?.userVisibleOnly) throw new DOMException('Chrome requires userVisibleOnly', 'NotAllowedError');
    const k = opts.applicationServerKey;
    if (!k) throw new DOMException('no applicationServerKey', 'AbortError');
    const key = typeof k === 'string' ? k.replace(/=+$/, '') : toB64(ArrayBuffer.isView(k) ? new Uint8Array(k.buffer, k.byteOffset, k.byteLength) : new Uint8Array(k));
    log.subscribe.push(key);
    localStorage.setItem(KEY, key);
    return make(key) as unknown as PushSubscription;
  };
}

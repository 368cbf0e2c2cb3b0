import { afterEach, describe, expect, it } from 'vitest';
import { ParleyClient } from '../../src/client.js';
import { fromBase64, toBase64Url } from '../../src/codec.js';
import { ParleyError } from '../../src/errors.js';
import { webPushKey } from '../../src/http.js';
import type { PushRegistration } from '../../src/push.js';
import type { PushTarget } from '../../src/types.js';
import { FakeServer } from '../helpers/fake-server.js';

const clients: ParleyClient[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

function client(server: FakeServer, url = 'ws://fake/ws'): ParleyClient {
  const c = new ParleyClient({ url, token: 'bob', WebSocket: server.WebSocket, minBackoffMs: 5, maxBackoffMs: 40 });
  clients.push(c);
  return c;
}

// A VAPID-like key: 65 bytes starting with 0x04, with bytes whose base64 has '+' and '/'.
const serverKeyBytes = Uint8Array.from({ length: 65 }, (_, i) => (i === 0 ? 4 : 0xf8 + (i % 8)));
const serverKey = toBase64Url(serverKeyBytes);

interface FetchCall {
  url: string;
  method: string;
}
function fakeFetch(calls: FetchCall[], status = 200, body: unknown = { publicKey: serverKey }): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    calls.push({ url: String(input), method: init?.method ?? 'GET' });
    return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json' } });
  }) as typeof fetch;
}

/** A stand-in for a browser's PushSubscription. */
function fakeSubscription(endpoint: string, key: Uint8Array | null) {
  const p256dh = Uint8Array.from({ length: 65 }, (_, i) => (i === 0 ? 4 : 0xfb));
  const auth = Uint8Array.from({ length: 16 }, (_, i) => 0xff - i);
  const sub = {
    endpoint,
    options: { userVisibleOnly: true, applicationServerKey: key ? key.slice().buffer : null },
    unsubscribed: false,
    getKey: (name: string) => (name === 'p256dh' ? p256dh.slice().buffer : name === 'auth' ? auth.slice().buffer : null),
    unsubscribe: async () => ((sub.unsubscribed = true), true),
  };
  return { sub, p256dh, auth };
}

/** A stand-in for a ServiceWorkerRegistration's pushManager. */
function fakeRegistration(existing: ReturnType<typeof fakeSubscription>['sub'] | null = null) {
  const state = {
    current: existing,
    subscribeCalls: [] as PushSubscriptionOptionsInit[],
    made: null as ReturnType<typeof fakeSubscription> | null,
  };
  const reg = {
    pushManager: {
      getSubscription: async () => state.current,
      subscribe: async (o: PushSubscriptionOptionsInit) => {
        state.subscribeCalls.push(o);
        state.made = fakeSubscription('https://push.example.com/send/abc', new Uint8Array(o.applicationServerKey as Uint8Array));
        state.current = state.made.sub;
        return state.made.sub;
      },
    },
  };
  return { reg: reg as unknown as PushRegistration, state };
}

describe('push targets', () => {
  it('registers each kind of target as the protocol spells it, this session’s device by default', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    await c.waitReady(2000);
    await c.registerPush({ apns: { deviceToken: 'ab'.repeat(32), topic: 'com.example.app' } });
    await c.registerPush({ apns: { deviceToken: 'cd'.repeat(32), topic: 'com.example.app', sandbox: true } }, 'phone-1');
    await c.registerPush({ fcm: { token: 'fcm-token' } });
    const extra = { endpoint: 'https://push.example.com/x', p256dh: 'BPk', auth: 'QUJD', keys: { p256dh: 'x' }, expirationTime: null };
    await c.registerPush({ webpush: extra } as PushTarget);
    const bodies = srv.frames.filter((f) => f.registerPush).map((f) => f.registerPush);
    expect(bodies).toEqual([
      { apns: { deviceToken: 'ab'.repeat(32), topic: 'com.example.app' } },
      { deviceId: 'phone-1', apns: { deviceToken: 'cd'.repeat(32), topic: 'com.example.app', sandbox: true } },
      { fcm: { token: 'fcm-token' } },
      // Only the fields the protocol knows: the server refuses unknown ones.
      { webpush: { endpoint: 'https://push.example.com/x', p256dh: 'BPk', auth: 'QUJD' } },
    ]);
    expect(srv.frames.filter((f) => f.registerPush).every((f) => typeof f.id === 'number' && f.id > 0)).toBe(true);
  });

  it('refuses a target with no platform or with several, without sending it', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    await c.waitReady(2000);
    await expect(c.registerPush({} as PushTarget)).rejects.toBeInstanceOf(TypeError);
    await expect(c.registerPush({ fcm: { token: 'a' }, apns: { deviceToken: 'b', topic: 'c' } } as unknown as PushTarget)).rejects.toBeInstanceOf(TypeError);
    expect(srv.frames.some((f) => f.registerPush)).toBe(false);
  });

  it('passes the server’s refusal on as a ParleyError', async () => {
    const srv = new FakeServer();
    srv.hook = (s, f) => {
      if (!f.registerPush) return false;
      s.push({ id: f.id, error: { code: 'ERROR_CODE_BAD_REQUEST', message: 'bad request', temporary: false } });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    const err = await c.registerPush({ apns: { deviceToken: 'zz', topic: 'com.example.app' } }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ParleyError);
    expect((err as ParleyError).code).toBe('ERROR_CODE_BAD_REQUEST');
    expect(srv.frames.filter((f) => f.registerPush)).toHaveLength(1); // not retried
  });

  it('unregisters this session’s device, or a named one', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    await c.waitReady(2000);
    await c.unregisterPush();
    await c.unregisterPush('phone-1');
    expect(srv.frames.filter((f) => f.unregisterPush).map((f) => f.unregisterPush)).toEqual([{}, { deviceId: 'phone-1' }]);
  });
});

describe('webPushKey', () => {
  it('GETs /v1/push/webpush-key and returns the key', async () => {
    const calls: FetchCall[] = [];
    expect(await webPushKey({ baseUrl: 'https://chat.example.com/', fetch: fakeFetch(calls) })).toBe(serverKey);
    expect(calls).toEqual([{ url: 'https://chat.example.com/v1/push/webpush-key', method: 'GET' }]);
    expect(fromBase64(serverKey)).toEqual(serverKeyBytes);
  });

  it('fails with the server’s error code when Web Push is off', async () => {
    const off = fakeFetch([], 404, { error: { code: 'not_found', message: 'web push is off' } });
    const err = await webPushKey({ fetch: off }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ParleyError);
    expect((err as ParleyError).code).toBe('ERROR_CODE_PERMISSION_DENIED');
    expect((err as ParleyError).apiCode).toBe('not_found');
    await expect(webPushKey({ fetch: fakeFetch([], 200, {}) })).rejects.toThrow(/publicKey/);
  });
});

describe('subscribeWebPush (a stubbed pushManager)', () => {
  it('subscribes with the server’s key and registers the subscription in base64url', async () => {
    const srv = new FakeServer();
    const c = client(srv, 'wss://chat.example.com:8443/ws');
    await c.waitReady(2000);
    const calls: FetchCall[] = [];
    const { reg, state } = fakeRegistration();
    const sub = await c.subscribeWebPush(reg, { fetch: fakeFetch(calls) });
    // The key comes from the HTTP origin of the WebSocket URL.
    expect(calls).toEqual([{ url: 'https://chat.example.com:8443/v1/push/webpush-key', method: 'GET' }]);
    expect(state.subscribeCalls).toHaveLength(1);
    expect(state.subscribeCalls[0]!.userVisibleOnly).toBe(true);
    expect(new Uint8Array(state.subscribeCalls[0]!.applicationServerKey as Uint8Array)).toEqual(serverKeyBytes);
    expect(sub).toBe(state.made!.sub);
    const body = srv.frames.find((f) => f.registerPush)!.registerPush!;
    expect(body).toEqual({
      webpush: { endpoint: 'https://push.example.com/send/abc', p256dh: toBase64Url(state.made!.p256dh), auth: toBase64Url(state.made!.auth) },
    });
    expect(body.webpush!.p256dh).toMatch(/^[A-Za-z0-9_-]+$/); // URL-safe, unpadded
    expect(body.webpush!.p256dh).toMatch(/[-_]/);
    expect(fromBase64(body.webpush!.p256dh)).toHaveLength(65);
    expect(fromBase64(body.webpush!.auth)).toHaveLength(16);
  });

  it('reuses a subscription made with the same key, and replaces one made with another', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    await c.waitReady(2000);
    const same = fakeSubscription('https://push.example.com/same', serverKeyBytes);
    const r1 = fakeRegistration(same.sub);
    expect(await c.subscribeWebPush(r1.reg, { publicKey: serverKey })).toBe(same.sub);
    expect(r1.state.subscribeCalls).toHaveLength(0);
    expect(same.sub.unsubscribed).toBe(false);

    const other = fakeSubscription('https://push.example.com/old', new Uint8Array(65).fill(7));
    const r2 = fakeRegistration(other.sub);
    const calls: FetchCall[] = [];
    const sub = await c.subscribeWebPush(r2.reg, { fetch: fakeFetch(calls), deviceId: 'web-1' });
    expect(calls[0]!.url).toBe('http://fake/v1/push/webpush-key');
    expect(other.sub.unsubscribed).toBe(true);
    expect(r2.state.subscribeCalls).toHaveLength(1);
    expect(sub.endpoint).toBe('https://push.example.com/send/abc');
    const bodies = srv.frames.filter((f) => f.registerPush).map((f) => f.registerPush!);
    expect(bodies.map((b) => [b.deviceId, b.webpush?.endpoint])).toEqual([
      [undefined, 'https://push.example.com/same'],
      ['web-1', 'https://push.example.com/send/abc'],
    ]);
  });

  it('registers nothing when the browser refuses to subscribe', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    await c.waitReady(2000);
    const { reg } = fakeRegistration();
    reg.pushManager.subscribe = async () => {
      throw new DOMException('permission denied', 'NotAllowedError');
    };
    await expect(c.subscribeWebPush(reg, { publicKey: serverKey })).rejects.toMatchObject({ name: 'NotAllowedError' });
    expect(srv.frames.some((f) => f.registerPush)).toBe(false);
  });

  it('unsubscribeWebPush unregisters the device and ends the subscription', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    await c.waitReady(2000);
    const { sub } = fakeSubscription('https://push.example.com/x', serverKeyBytes);
    const { reg } = fakeRegistration(sub);
    expect(await c.unsubscribeWebPush(reg)).toBe(true);
    expect(sub.unsubscribed).toBe(true);
    expect(srv.frames.filter((f) => f.unregisterPush)).toHaveLength(1);
    // Without a subscription: the server is still told.
    expect(await c.unsubscribeWebPush(fakeRegistration(null).reg)).toBe(false);
    expect(srv.frames.filter((f) => f.unregisterPush)).toHaveLength(2);
  });
});

describe('push types', () => {
  it('take the DOM’s ServiceWorkerRegistration and give back its PushSubscription', () => {
    // Checked by tsc (tsconfig.test.json): the SDK declares the few members it
    // uses, so that Node apps compile without the DOM library; the DOM's
    // types must still fit them.
    const subscribe = (c: ParleyClient, reg: ServiceWorkerRegistration): Promise<PushSubscription> => c.subscribeWebPush(reg);
    const unsubscribe = (c: ParleyClient, reg: ServiceWorkerRegistration): Promise<boolean> => c.unsubscribeWebPush(reg);
    expect([typeof subscribe, typeof unsubscribe]).toEqual(['function', 'function']);
  });
});

// Offline push notifications: the targets a device registers (APNs, FCM, Web
// Push) and the browser side of Web Push (a PushSubscription made with the
// server's VAPID key).
import { fromBase64, toBase64Url } from './codec.js';
import type { PushTarget, WebPushTarget } from './types.js';

/**
 * The frame body for a push target: exactly one platform, and only the
 * fields the protocol knows (the server refuses a frame with unknown fields,
 * so an app passing e.g. `subscription.toJSON()` would lose its connection).
 * Throws TypeError when the target names no platform or several.
 */
export function pushTargetBody(t: PushTarget): PushTarget {
  const kinds = (['apns', 'fcm', 'webpush'] as const).filter((k) => (t as Record<string, unknown> | null)?.[k] != null);
  if (kinds.length !== 1) throw new TypeError('parley: a push target has exactly one of apns, fcm or webpush');
  const s = (v: unknown) => (typeof v === 'string' ? v : '');
  if (t.apns) {
    const { deviceToken, topic, sandbox } = t.apns;
    return { apns: sandbox ? { deviceToken: s(deviceToken), topic: s(topic), sandbox: true } : { deviceToken: s(deviceToken), topic: s(topic) } };
  }
  if (t.fcm) return { fcm: { token: s(t.fcm.token) } };
  const w = t.webpush!;
  return { webpush: { endpoint: s(w.endpoint), p256dh: s(w.p256dh), auth: s(w.auth) } };
}

/**
 * What the SDK uses of a browser's PushSubscription. Declared here rather
 * than taken from the DOM's types so that apps compiled without the DOM
 * library (Node) can use the SDK's types; a PushSubscription fits.
 */
export interface WebPushSubscription {
  readonly endpoint: string;
  readonly options?: { readonly applicationServerKey: ArrayBuffer | null };
  getKey(name: 'p256dh' | 'auth'): ArrayBuffer | null;
  unsubscribe(): Promise<boolean>;
}

/** The Web Push target of a browser's PushSubscription: its endpoint and its keys in base64url. */
export function webPushTarget(sub: WebPushSubscription): WebPushTarget {
  const p256dh = sub.getKey('p256dh');
  const auth = sub.getKey('auth');
  if (!p256dh || !auth) throw new Error('parley: the push subscription has no p256dh and auth keys');
  return { endpoint: sub.endpoint, p256dh: toBase64Url(new Uint8Array(p256dh)), auth: toBase64Url(new Uint8Array(auth)) };
}

/**
 * What {@link ParleyClient.subscribeWebPush} needs of a
 * ServiceWorkerRegistration (which fits, its subscriptions being S).
 */
export interface PushRegistration<S extends WebPushSubscription = WebPushSubscription> {
  readonly pushManager: {
    getSubscription(): Promise<S | null>;
    subscribe(options: { userVisibleOnly: boolean; applicationServerKey: ArrayBuffer }): Promise<S>;
  };
}

export interface SubscribeWebPushOptions {
  /** The server's VAPID public key (base64url); default: asked of the server (webPushKey). */
  publicKey?: string;
  /** The server's HTTP origin for webPushKey; default: the origin of the client's WebSocket URL. */
  baseUrl?: string;
  fetch?: typeof fetch;
  /** The device to register it for; default: this session's device. */
  deviceId?: string;
}

/**
 * The registration's push subscription for this server key: the existing one
 * when it was made with the same key, else a new one (an existing one made
 * with another key, e.g. before the server's key changed, is ended first:
 * the browser refuses a second key otherwise).
 */
export async function subscribeWithKey<S extends WebPushSubscription>(registration: PushRegistration<S>, publicKey: string): Promise<S> {
  const key = new Uint8Array(fromBase64(publicKey)); // a fresh ArrayBuffer-backed copy
  const pm = registration.pushManager;
  const old = await pm.getSubscription();
  if (old) {
    if (sameBytes(old.options?.applicationServerKey ?? null, key)) return old;
    await old.unsubscribe();
  }
  return pm.subscribe({ userVisibleOnly: true, applicationServerKey: key.buffer });
}

function sameBytes(a: ArrayBuffer | null, b: Uint8Array): boolean {
  if (!a || a.byteLength !== b.length) return false;
  const x = new Uint8Array(a);
  for (let i = 0; i < b.length; i++) if (x[i] !== b[i]) return false;
  return true;
}

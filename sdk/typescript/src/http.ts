// The HTTP side of Parley: accounts and tokens, and any request over POST /v1/rpc.
import { decodeFrame, encodeFrame } from './codec.js';
import { badResponse, httpError } from './errors.js';
import type { ClientBodies, ClientBodyName, ServerFrame } from './types.js';

export interface TokenResponse {
  user_id: string;
  token: string;
  expires_at: string;
}

export interface HttpOptions {
  /** The server's HTTP origin, e.g. "https://chat.example.com" ("" in a page served by the server). */
  baseUrl?: string;
  fetch?: typeof fetch;
}

async function call(o: HttpOptions, path: string, init: RequestInit): Promise<Response> {
  const f = o.fetch ?? globalThis.fetch;
  const res = await f((o.baseUrl ?? '').replace(/\/$/, '') + path, init);
  if (!res.ok) {
    let body = '';
    try {
      body = await res.text();
    } catch {
      /* the answer broke off: the status says enough */
    }
    throw httpError(res.status, body || res.statusText);
  }
  return res;
}

function json(body: unknown, token?: string): RequestInit {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (token) headers.Authorization = 'Bearer ' + token;
  return { method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body) };
}

/**
 * Creates an account (built-in accounts) and returns its first token.
 * A taken name is ERROR_CODE_CONFLICT, a name or password outside the rules
 * ERROR_CODE_BAD_REQUEST, registration turned off ERROR_CODE_PERMISSION_DENIED
 * (apiCode `registration_disabled`).
 */
export async function register(o: HttpOptions, username: string, password: string): Promise<TokenResponse> {
  return (await call(o, '/v1/register', json({ username, password }))).json() as Promise<TokenResponse>;
}

/** Logs in; an unknown user or a wrong password is ERROR_CODE_UNAUTHENTICATED (apiCode `invalid_credentials`). */
export async function login(o: HttpOptions, username: string, password: string): Promise<TokenResponse> {
  return (await call(o, '/v1/login', json({ username, password }))).json() as Promise<TokenResponse>;
}

/** Revokes the token; sessions opened with it are closed. */
export async function logout(o: HttpOptions, token: string): Promise<void> {
  await call(o, '/v1/logout', json(undefined, token));
}

/**
 * Changes the password; every earlier token is revoked; returns a new token.
 * A wrong old password is ERROR_CODE_UNAUTHENTICATED (apiCode `invalid_credentials`).
 */
export async function changePassword(o: HttpOptions, token: string, oldPassword: string, newPassword: string): Promise<TokenResponse> {
  const body = { old_password: oldPassword, new_password: newPassword };
  return (await call(o, '/v1/password', json(body, token))).json() as Promise<TokenResponse>;
}

/**
 * Any request of the socket protocol (except auth, ping and presence) over
 * HTTP. Refusals carry the same ERROR_CODE as on a socket.
 */
export async function rpc<K extends ClientBodyName>(o: HttpOptions, token: string, name: K, body: ClientBodies[K]): Promise<ServerFrame> {
  const res = await call(o, '/v1/rpc', {
    ...json(undefined, token),
    body: encodeFrame({ [name]: body }),
  });
  return decodeFrame(await res.text());
}

/**
 * The server's VAPID public key for Web Push (GET /v1/push/webpush-key): an
 * uncompressed P-256 point (65 bytes) in base64url, to pass (decoded) as
 * `applicationServerKey` to `pushManager.subscribe`. Needs no token. Fails
 * with ERROR_CODE_PERMISSION_DENIED, apiCode `not_found`, when the server
 * has Web Push turned off.
 */
export async function webPushKey(o: HttpOptions = {}): Promise<string> {
  const body = (await (await call(o, '/v1/push/webpush-key', { method: 'GET' })).json()) as { publicKey?: unknown };
  if (typeof body.publicKey !== 'string' || body.publicKey === '') throw badResponse('no publicKey in the answer');
  return body.publicKey;
}

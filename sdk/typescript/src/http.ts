// The HTTP side of Parley: accounts and tokens, and any request over POST /v1/rpc.
import { decodeFrame, encodeFrame } from './codec.js';
import { ParleyError, type ErrorDetails } from './errors.js';
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
    let code = `http_${res.status}`;
    let message = res.statusText;
    let temporary: boolean | undefined;
    const details: ErrorDetails = {};
    try {
      const body = (await res.json()) as {
        error?: { code?: string; message?: string; temporary?: boolean; reason?: string; reject_code?: string };
      };
      if (body.error?.code) code = body.error.code;
      if (body.error?.message) message = body.error.message;
      if (typeof body.error?.temporary === 'boolean') temporary = body.error.temporary;
      // A `rejected` answer (the app's moderation): what to show, and the rule.
      if (typeof body.error?.reason === 'string') details.reason = body.error.reason;
      if (typeof body.error?.reject_code === 'string') details.rejectCode = body.error.reject_code;
    } catch {
      /* not JSON */
    }
    throw new ParleyError(code, message, temporary, res.status, details);
  }
  return res;
}

function json(body: unknown, token?: string): RequestInit {
  const headers: Record<string, string> = { 'Content-Type': 'application/json' };
  if (token) headers.Authorization = 'Bearer ' + token;
  return { method: 'POST', headers, body: body === undefined ? undefined : JSON.stringify(body) };
}

/** Creates an account (built-in accounts) and returns its first token. Errors: `conflict` (taken), `registration_disabled`. */
export async function register(o: HttpOptions, username: string, password: string): Promise<TokenResponse> {
  return (await call(o, '/v1/register', json({ username, password }))).json() as Promise<TokenResponse>;
}

/** Logs in; `invalid_credentials` for an unknown user or a wrong password. */
export async function login(o: HttpOptions, username: string, password: string): Promise<TokenResponse> {
  return (await call(o, '/v1/login', json({ username, password }))).json() as Promise<TokenResponse>;
}

/** Revokes the token; sessions opened with it are closed. */
export async function logout(o: HttpOptions, token: string): Promise<void> {
  await call(o, '/v1/logout', json(undefined, token));
}

/** Changes the password; every earlier token is revoked; returns a new token. */
export async function changePassword(o: HttpOptions, token: string, oldPassword: string, newPassword: string): Promise<TokenResponse> {
  const body = { old_password: oldPassword, new_password: newPassword };
  return (await call(o, '/v1/password', json(body, token))).json() as Promise<TokenResponse>;
}

/** Any request of the socket protocol (except auth, ping and presence) over HTTP. */
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
 * with `not_found` when the server has Web Push turned off.
 */
export async function webPushKey(o: HttpOptions = {}): Promise<string> {
  const body = (await (await call(o, '/v1/push/webpush-key', { method: 'GET' })).json()) as { publicKey?: unknown };
  if (typeof body.publicKey !== 'string' || body.publicKey === '') throw new ParleyError('bad_response', 'no publicKey in the answer');
  return body.publicKey;
}

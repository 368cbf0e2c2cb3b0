// Account export and deletion over HTTP (docs/accounts.md).
import { httpError } from './errors.js';
import type { HttpOptions } from './http.js';

/** An account export. `state`: pending, running, ready (downloadable until `expires_at`) or failed. */
export interface ExportJob {
  id: string;
  user_id: string;
  state: 'pending' | 'running' | 'ready' | 'failed';
  created_at: string;
  expires_at?: string;
  size?: number;
  error?: string;
}

/** An account deletion: running, then done. */
export interface AccountDeletion {
  user_id: string;
  state: 'running' | 'done';
  started_at: string;
  finished_at?: string;
}

async function request(o: HttpOptions, method: string, path: string, token: string, body?: unknown): Promise<Response> {
  const f = o.fetch ?? globalThis.fetch;
  const headers: Record<string, string> = { Authorization: 'Bearer ' + token };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const res = await f((o.baseUrl ?? '').replace(/\/$/, '') + path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!res.ok) {
    let text = '';
    try {
      text = await res.text();
    } catch {
      /* the answer broke off: the status says enough */
    }
    throw httpError(res.status, text || res.statusText);
  }
  return res;
}

const exportPath = (id: string) => '/v1/account/exports/' + encodeURIComponent(id);

/** Starts an export of the token's user's data, or returns the one running. */
export async function startExport(o: HttpOptions, token: string): Promise<ExportJob> {
  return (await request(o, 'POST', '/v1/account/exports', token)).json() as Promise<ExportJob>;
}

/** The state of one of the user's exports; another user's, like a missing one, is ERROR_CODE_NOT_FOUND (apiCode `not_found`). */
export async function exportStatus(o: HttpOptions, token: string, id: string): Promise<ExportJob> {
  return (await request(o, 'GET', exportPath(id), token)).json() as Promise<ExportJob>;
}

/**
 * Waits until the export is no longer pending or running, asking every
 * `intervalMs` (default 1000), and returns it.
 */
export async function waitForExport(o: HttpOptions, token: string, id: string, intervalMs = 1000, signal?: AbortSignal): Promise<ExportJob> {
  for (;;) {
    const j = await exportStatus(o, token, id);
    if (j.state !== 'pending' && j.state !== 'running') return j;
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(resolve, intervalMs);
      signal?.addEventListener('abort', () => {
        clearTimeout(t);
        reject(signal.reason);
      });
    });
  }
}

/** Fetches a ready export's zip archive: the Response, whose body streams it. */
export async function downloadExport(o: HttpOptions, token: string, id: string): Promise<Response> {
  return request(o, 'GET', exportPath(id) + '/archive', token);
}

/**
 * Deletes the token's user's account; `password` is the account's password
 * (a wrong one is ERROR_CODE_UNAUTHENTICATED, apiCode `invalid_credentials`;
 * an account without one is deleted by the app through the admin API:
 * ERROR_CODE_PERMISSION_DENIED). The user is logged out everywhere at once.
 */
export async function deleteAccount(o: HttpOptions, token: string, password: string): Promise<AccountDeletion> {
  return (await request(o, 'POST', '/v1/account/delete', token, { password })).json() as Promise<AccountDeletion>;
}

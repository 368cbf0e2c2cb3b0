// One code set for socket and HTTP errors: the HTTP API's snake_case codes
// map to the protocol's ERROR_CODE_ names, as the server's table says.
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ParleyError, errorCodeOfApi, httpError, isCode, isTemporary } from '../../src/errors.js';
import { login, register, rpc } from '../../src/http.js';
import type { ErrorCode } from '../../src/types.js';
import { repoRoot } from '../helpers/server.js';

/** fetch answering every request with status and body. */
function answer(status: number, body: unknown): typeof fetch {
  return (async () => new Response(typeof body === 'string' ? body : JSON.stringify(body), { status })) as typeof fetch;
}

async function failure(p: Promise<unknown>): Promise<ParleyError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ParleyError);
  return err as ParleyError;
}

describe('error codes', () => {
  it('maps every row of the server table (errcode/errcode.go) to its ERROR_CODE', () => {
    const src = readFileSync(resolve(repoRoot, 'errcode/errcode.go'), 'utf8');
    const rows = [...src.matchAll(/case pb\.ErrorCode_(ERROR_CODE_\w+):\s*return Info\{"[^"]*", http\.Status\w+, "(\w+)"/g)].map(
      (m) => [m[1] as ErrorCode, m[2]!] as const,
    );
    expect(rows.length).toBeGreaterThanOrEqual(18);
    // The frame-level codes share their HTTP code with another row and map to that one.
    const frameLevel: Partial<Record<ErrorCode, ErrorCode>> = {
      ERROR_CODE_MALFORMED_FRAME: 'ERROR_CODE_BAD_REQUEST',
      ERROR_CODE_UNKNOWN_FRAME: 'ERROR_CODE_BAD_REQUEST',
      ERROR_CODE_FRAME_TOO_LARGE: 'ERROR_CODE_TOO_LARGE',
    };
    for (const [code, api] of rows) {
      // Any status: the code decides when it is known.
      expect([api, errorCodeOfApi(api, 400), errorCodeOfApi(api, 500)]).toEqual([api, frameLevel[code] ?? code, frameLevel[code] ?? code]);
    }
    expect(rows.map((r) => r[0])).toContain('ERROR_CODE_NO_SUCH_USER');
  });

  it('maps each endpoint code of docs/protocol.md to the closest ERROR_CODE', () => {
    const doc = readFileSync(resolve(repoRoot, 'docs/protocol.md'), 'utf8');
    const listed = /the HTTP API's own codes\s*\(([^)]*)\)/.exec(doc)![1]!;
    const own = [...listed.matchAll(/`(\w+)`/g)].map((m) => m[1]!);
    expect(own.sort()).toEqual(['body_too_large', 'invalid_credentials', 'not_found', 'registration_disabled', 'user_disabled']);
    const want: Record<string, ErrorCode> = {
      body_too_large: 'ERROR_CODE_TOO_LARGE',
      invalid_credentials: 'ERROR_CODE_UNAUTHENTICATED',
      not_found: 'ERROR_CODE_PERMISSION_DENIED',
      registration_disabled: 'ERROR_CODE_PERMISSION_DENIED',
      user_disabled: 'ERROR_CODE_PERMISSION_DENIED',
    };
    for (const api of own) expect([api, errorCodeOfApi(api, 500)]).toEqual([api, want[api]]);
  });

  it('falls back on the status for codes it does not know', () => {
    expect(errorCodeOfApi('from_the_future', 409)).toBe('ERROR_CODE_CONFLICT');
    expect(errorCodeOfApi('', 429)).toBe('ERROR_CODE_TOO_MANY_REQUESTS');
    expect(errorCodeOfApi('', 502)).toBe('ERROR_CODE_UNAVAILABLE');
    expect(errorCodeOfApi('', 500)).toBe('ERROR_CODE_INTERNAL');
    expect(errorCodeOfApi('', 418)).toBe('ERROR_CODE_BAD_REQUEST');
    expect(errorCodeOfApi('toString', 400)).toBe('ERROR_CODE_BAD_REQUEST'); // not an inherited property
  });

  it('gives HTTP refusals the socket codes, keeping the server’s own code in apiCode', async () => {
    const o = { baseUrl: 'http://x' };
    const taken = await failure(register({ ...o, fetch: answer(409, { error: { code: 'conflict', message: 'taken', temporary: false } }) }, 'alice', 'pw-alice-1'));
    expect([taken.code, taken.apiCode, taken.status, taken.temporary]).toEqual(['ERROR_CODE_CONFLICT', 'conflict', 409, false]);
    expect(isCode(taken, 'ERROR_CODE_CONFLICT')).toBe(true);
    expect(taken.message).toBe('parley: ERROR_CODE_CONFLICT: taken');

    const wrong = await failure(login({ ...o, fetch: answer(401, { error: { code: 'invalid_credentials', message: 'invalid username or password' } }) }, 'alice', 'nope-nope'));
    expect([wrong.code, wrong.apiCode]).toEqual(['ERROR_CODE_UNAUTHENTICATED', 'invalid_credentials']);
    expect(wrong.message).toBe('parley: ERROR_CODE_UNAUTHENTICATED (invalid_credentials): invalid username or password');

    const refused = await failure(
      rpc({ ...o, fetch: answer(422, { error: { code: 'rejected', temporary: false, reason: 'no spam', reject_code: 'spam' } }) }, 't', 'send', { clientMsgId: 'c1', to: 'bob' }),
    );
    expect([refused.code, refused.reason, refused.rejectCode]).toEqual(['ERROR_CODE_REJECTED', 'no spam', 'spam']);

    const nobody = await failure(rpc({ ...o, fetch: answer(404, { error: { code: 'no_such_user', temporary: false } }) }, 't', 'send', { clientMsgId: 'c2', to: 'ghost' }));
    expect([nobody.code, nobody.status]).toEqual(['ERROR_CODE_NO_SUCH_USER', 404]);

    const busy = await failure(login({ ...o, fetch: answer(503, 'Service Unavailable') }, 'alice', 'pw-alice-1'));
    expect([busy.code, busy.apiCode, isTemporary(busy)]).toEqual(['ERROR_CODE_UNAVAILABLE', '', true]);
  });

  it('takes only the protocol’s codes in isCode', () => {
    const e = httpError(409, '{"error":{"code":"conflict"}}');
    expect(isCode(e, 'ERROR_CODE_CONFLICT')).toBe(true);
    // @ts-expect-error: the HTTP API's spelling is not a code (apiCode holds it)
    expect(isCode(e, 'conflict')).toBe(false);
    expect(isCode(new Error('conflict'), 'ERROR_CODE_CONFLICT')).toBe(false);
  });
});

import { describe, expect, it } from 'vitest';
import { deleteAccount, downloadExport, exportStatus, startExport, waitForExport } from '../../src/account.js';
import { ParleyError } from '../../src/errors.js';

interface Call {
  url: string;
  method: string;
  auth: string | null;
  body?: string;
}

function fakeFetch(calls: Call[], answers: Array<[number, unknown]>): typeof fetch {
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const h = new Headers(init?.headers);
    calls.push({ url: String(input), method: init?.method ?? 'GET', auth: h.get('Authorization'), body: init?.body as string | undefined });
    const [status, body] = answers.shift() ?? [500, {}];
    return new Response(typeof body === 'string' ? body : JSON.stringify(body), { status });
  }) as typeof fetch;
}

describe('account HTTP calls', () => {
  it('start, poll, download and delete use their routes with the bearer token', async () => {
    const calls: Call[] = [];
    const job = { id: 'j/1', user_id: 'alice', state: 'pending', created_at: '2026-01-01T00:00:00Z' };
    const o = {
      baseUrl: 'https://chat.test/',
      fetch: fakeFetch(calls, [
        [202, job],
        [200, { ...job, state: 'running' }],
        [200, { ...job, state: 'ready', size: 4 }],
        [200, 'PK\u0003\u0004'],
        [202, { user_id: 'alice', state: 'running', started_at: '2026-01-01T00:00:00Z' }],
      ]),
    };
    expect((await startExport(o, 'tok')).id).toBe('j/1');
    expect((await waitForExport(o, 'tok', 'j/1', 1)).state).toBe('ready');
    expect(await (await downloadExport(o, 'tok', 'j/1')).text()).toBe('PK\u0003\u0004');
    expect((await deleteAccount(o, 'tok', 'pw')).state).toBe('running');
    expect(calls.map((c) => `${c.method} ${c.url}`)).toEqual([
      'POST https://chat.test/v1/account/exports',
      'GET https://chat.test/v1/account/exports/j%2F1',
      'GET https://chat.test/v1/account/exports/j%2F1',
      'GET https://chat.test/v1/account/exports/j%2F1/archive',
      'POST https://chat.test/v1/account/delete',
    ]);
    expect(calls.every((c) => c.auth === 'Bearer tok')).toBe(true);
    expect(JSON.parse(calls[4]!.body!)).toEqual({ password: 'pw' });
  });

  it('a refusal is a ParleyError with the server’s code', async () => {
    const calls: Call[] = [];
    const o = { fetch: fakeFetch(calls, [[404, { error: { code: 'not_found', message: 'export not found' } }]]) };
    const err = await exportStatus(o, 'tok', 'x').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ParleyError);
    expect((err as ParleyError).status).toBe(404);
    expect((err as ParleyError).apiCode).toBe('not_found');
  });
});

import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { deleteAccount, downloadExport, exportStatus, login, ParleyError, startExport, waitForExport } from '../../src/index.js';
import { startServer, type RunningServer } from '../helpers/server.js';
import { closeClients, newUser } from '../helpers/users.js';

let srv: RunningServer;
beforeAll(async () => {
  srv = await startServer(inject('parleyBin'));
});
afterAll(async () => {
  await srv?.dispose();
});
afterEach(() => closeClients());

async function refusal(p: Promise<unknown>): Promise<ParleyError> {
  const err = await p.then(
    () => new Error('expected a refusal'),
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ParleyError);
  return err as ParleyError;
}

describe('account export and deletion against a real server', () => {
  it('exports the user’s data as a zip only its owner can read', async () => {
    const [alice, bob] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob')]);
    const o = { baseUrl: srv.http };
    const job = await startExport(o, alice.token);
    expect(job.user_id).toBe(alice.id);
    const done = await waitForExport(o, alice.token, job.id, 50);
    expect(done.state).toBe('ready');
    const res = await downloadExport(o, alice.token, job.id);
    const zip = new Uint8Array(await res.arrayBuffer());
    expect(zip.length).toBe(done.size);
    expect([zip[0], zip[1]]).toEqual([0x50, 0x4b]); // "PK"
    const other = await refusal(exportStatus(o, bob.token, job.id));
    const none = await refusal(exportStatus(o, bob.token, '0123456789abcdef0123456789abcdef'));
    expect(other.apiCode).toBe('not_found');
    expect([other.status, other.apiCode, other.message]).toEqual([none.status, none.apiCode, none.message]);
  });

  it('deletes the account with its password; the user cannot log in again', async () => {
    const alice = await newUser(srv, 'alice');
    const o = { baseUrl: srv.http };
    expect((await refusal(deleteAccount(o, alice.token, 'not-the-password'))).apiCode).toBe('invalid_credentials');
    const d = await deleteAccount(o, alice.token, alice.password);
    expect(d.user_id).toBe(alice.id);
    expect((await refusal(login(o, alice.id, alice.password))).apiCode).toBe('invalid_credentials');
  });
});

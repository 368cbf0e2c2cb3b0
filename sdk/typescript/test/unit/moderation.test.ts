import { afterEach, describe, expect, it } from 'vitest';
import { ParleyClient } from '../../src/client.js';
import { ParleyError, isCode, isTemporary } from '../../src/errors.js';
import { rpc } from '../../src/http.js';
import type { ErrorBody, Message } from '../../src/types.js';
import { FakeServer } from '../helpers/fake-server.js';
import { waitFor } from '../helpers/server.js';

const clients: ParleyClient[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

function client(server: FakeServer): ParleyClient {
  const c = new ParleyClient({ url: 'ws://fake/ws', token: 'bob', WebSocket: server.WebSocket, minBackoffMs: 5, maxBackoffMs: 40 });
  clients.push(c);
  return c;
}

/** A server that rejects every send with this error. */
function rejecting(srv: FakeServer, error: ErrorBody): void {
  srv.hook = (s, f) => {
    if (!f.send) return false;
    s.push({ id: f.id, error });
    return true;
  };
}

describe('moderation in the SDK', () => {
  it('reportMessage sends ReportMessage and resolves on ok; the note is optional', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    await c.waitReady(2000);
    await c.reportMessage('p:alice:bob', 4, 'abuse', 'threatening me');
    await c.reportMessage('p:alice:bob', 5, 'spam');
    expect(srv.frames.filter((f) => f.reportMessage).map((f) => f.reportMessage)).toEqual([
      { conversationId: 'p:alice:bob', seq: 4, reason: 'abuse', note: 'threatening me' },
      { conversationId: 'p:alice:bob', seq: 5, reason: 'spam' },
    ]);
  });

  it('reportMessage rejects with the server’s refusal', async () => {
    const srv = new FakeServer();
    srv.hook = (s, f) => {
      if (!f.reportMessage) return false;
      s.push({ id: f.id, error: { code: 'ERROR_CODE_PERMISSION_DENIED', message: 'permission denied', temporary: false } });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    const err = await c.reportMessage('p:alice:carol', 1, 'spam').catch((e: unknown) => e);
    expect(isCode(err, 'ERROR_CODE_PERMISSION_DENIED')).toBe(true);
    expect(srv.frames.filter((f) => f.reportMessage)).toHaveLength(1);
  });

  it('a REJECTED send fails once, not retried, with the reason and the rule', async () => {
    const srv = new FakeServer();
    rejecting(srv, { code: 'ERROR_CODE_REJECTED', message: 'rejected by moderation', temporary: false, reason: 'No spam here, please', rejectCode: 'spam' });
    const c = client(srv);
    await c.waitReady(2000);
    const err = (await c.sendText('alice', 'bad deal').catch((e: unknown) => e)) as ParleyError;
    expect(err).toBeInstanceOf(ParleyError);
    expect(err.code).toBe('ERROR_CODE_REJECTED');
    expect(err.reason).toBe('No spam here, please');
    expect(err.rejectCode).toBe('spam');
    expect(err.temporary).toBe(false);
    expect(isTemporary(err)).toBe(false);
    expect(isCode(err, 'ERROR_CODE_REJECTED')).toBe(true);
    expect(err.message).toBe('parley: ERROR_CODE_REJECTED (spam): No spam here, please');
    await new Promise((r) => setTimeout(r, 50));
    expect(srv.frames.filter((f) => f.send)).toHaveLength(1);
    expect(c.pendingSends()).toHaveLength(0);
  });

  it('a REJECTED send without `temporary` (the word filter gives no reason) is not retried either', async () => {
    const srv = new FakeServer();
    rejecting(srv, { code: 'ERROR_CODE_REJECTED', rejectCode: 'word_filter' });
    const c = client(srv);
    await c.waitReady(2000);
    const err = (await c.sendText('alice', 'free bitcoin').catch((e: unknown) => e)) as ParleyError;
    expect(err.code).toBe('ERROR_CODE_REJECTED');
    expect(err.temporary).toBeUndefined();
    expect(isTemporary(err)).toBe(false); // the code decides, and REJECTED is not temporary
    expect(err.reason).toBe('');
    expect(err.rejectCode).toBe('word_filter');
    expect(err.message).toBe('parley: ERROR_CODE_REJECTED (word_filter)');
    await new Promise((r) => setTimeout(r, 50));
    expect(srv.frames.filter((f) => f.send)).toHaveLength(1);
    expect(c.state).toBe('ready'); // a refusal of one message, not of the connection
  });

  it('other errors carry no reason or rule, and keep their message', () => {
    const e = new ParleyError('ERROR_CODE_MUTED', 'muted', false);
    expect(e.reason).toBe('');
    expect(e.rejectCode).toBe('');
    expect(e.message).toBe('parley: ERROR_CODE_MUTED: muted');
  });

  it('a moderated recall reaches the app with event.moderated', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    const got: Message[] = [];
    c.on('message', (m) => got.push(m));
    await c.waitReady(2000);
    const m1 = srv.store('p:alice:bob', 'alice', 'against the rules');
    srv.live[0]!.push({ message: m1 });
    const recall: Message = { conversationId: 'p:alice:bob', seq: 2, from: 'alice', to: 'bob', kind: 'MESSAGE_KIND_RECALL', event: { targetSeq: 1, moderated: true } };
    srv.convs.get('p:alice:bob')!.push({ ...recall, clientMsgId: '' });
    srv.live[0]!.push({ message: recall });
    await waitFor(() => got.length >= 2);
    expect(got[1]!.kind).toBe('MESSAGE_KIND_RECALL');
    expect(got[1]!.event).toEqual({ targetSeq: 1, moderated: true });
  });

  it('over HTTP (rpc), a `rejected` answer carries reason and reject_code too', async () => {
    const fetch = (async () =>
      new Response(
        JSON.stringify({ error: { code: 'rejected', message: 'rejected by moderation', temporary: false, reason: 'Pick another word', reject_code: 'word_filter' } }),
        { status: 422, headers: { 'Content-Type': 'application/json' } },
      )) as typeof globalThis.fetch;
    const err = (await rpc({ baseUrl: 'http://x', fetch }, 'tok', 'send', { clientMsgId: 'c1', to: 'bob' }).catch((e: unknown) => e)) as ParleyError;
    expect(err).toBeInstanceOf(ParleyError);
    expect(err.status).toBe(422);
    expect([err.code, err.apiCode]).toEqual(['ERROR_CODE_REJECTED', 'rejected']);
    expect(isCode(err, 'ERROR_CODE_REJECTED')).toBe(true);
    expect(err.reason).toBe('Pick another word');
    expect(err.rejectCode).toBe('word_filter');
    expect(isTemporary(err)).toBe(false);
  });
});

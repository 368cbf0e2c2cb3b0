import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, inject } from 'vitest';
import { ParleyError, fromBase64, isCode, isTemporary, rpc, text, type Message } from '../../src/index.js';
import { startServer, waitFor, type RunningServer } from '../helpers/server.js';
import { closeClients, connect, inbox, newUser } from '../helpers/users.js';

// A real server with the word filter (a list of the configuration, and one
// added through the admin API) and a before-send hook: a small HTTP server in
// this process that rejects texts starting with "bad" with a reason of its own.
let srv: RunningServer;
let hook: Server;
const hookCalls: Array<{ type: string; text?: string }> = [];

beforeAll(async () => {
  hook = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const ev = JSON.parse(body) as { type: string; text?: string };
      hookCalls.push(ev);
      res.setHeader('Content-Type', 'application/json');
      res.end(
        JSON.stringify(
          ev.text?.startsWith('bad') ? { action: 'reject', code: 'spam', reason: 'No spam here, please' } : { action: 'allow' },
        ),
      );
    });
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
  const hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
  srv = await startServer(inject('parleyBin'), undefined, {
    config: [
      'word_filter_lists:',
      '  - name: banned',
      '    action: reject',
      '    words: ["forbidden phrase"]',
      'moderation_hooks:',
      '  - name: app',
      `    url: ${hookUrl}`,
      '    events: [message.direct, message.edit]',
      '    secret: integration-hook-secret-0123456789',
      '    policy: fail_open',
      '    timeout: 3s',
      '',
    ].join('\n'),
  });
});
afterAll(async () => {
  await srv?.dispose();
  await new Promise((r) => hook?.close(r));
});
afterEach(() => closeClients());

/** A request to the admin API with the server's admin key; resolves with the JSON answer. */
async function admin<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(srv.http + path, {
    method,
    headers: { 'X-Api-Key': srv.adminKey(), ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const out = (await res.json()) as T;
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(out)}`);
  return out;
}

interface Report {
  id: string;
  reporter: string;
  conversation_id: string;
  seq: number;
  reason: string;
  note?: string;
  status: string;
  message: { from?: string; seq?: string; contentType?: string; payload?: string } | null;
}

async function rejection(p: Promise<unknown>): Promise<ParleyError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ParleyError);
  return err as ParleyError;
}

describe('moderation against a real server', () => {
  it('the word filter refuses a send with REJECTED word_filter (no reason of its own), not retried; the admin API adds lists', async () => {
    const [alice, bob] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob')]);
    const a = connect(srv, alice);
    const b = connect(srv, bob);
    const bGot = inbox(b);
    await Promise.all([a.waitReady(5000), b.waitReady(5000)]);

    const err = await rejection(a.sendText(bob.id, 'this has a Forbidden Phrase in it'));
    expect(err.code).toBe('ERROR_CODE_REJECTED');
    expect(isCode(err, 'ERROR_CODE_REJECTED')).toBe(true);
    expect(err.rejectCode).toBe('word_filter');
    expect(err.reason).toBe(''); // the word filter gives none: the app words it
    expect(err.temporary).toBe(false);
    expect(isTemporary(err)).toBe(false);
    expect(a.pendingSends()).toHaveLength(0); // dropped, not kept for a resend
    expect(a.state).toBe('ready');

    // The link is fine: the next message goes through, and is the only one bob gets.
    const ok = await a.sendText(bob.id, 'a fine message');
    await waitFor(() => bGot.length >= 1, 5000, 'bob gets the fine message');
    await new Promise((r) => setTimeout(r, 200));
    expect(bGot.map((m) => text(m.payload))).toEqual(['a fine message']);

    // Edits are filtered too.
    const editErr = await rejection(a.edit(ok.conversationId, ok.seq, 'now a forbidden phrase'));
    expect(editErr.code).toBe('ERROR_CODE_REJECTED');
    expect(editErr.rejectCode).toBe('word_filter');

    // A list added through the admin API (PUT /v1/admin/word-lists/{name}) is used within a second or so.
    await admin('PUT', '/v1/admin/word-lists/scam', { action: 'reject', words: ['free bitcoin'], ignore_separators: true });
    const lists = await admin<{ config: Array<{ name: string }>; lists: Array<{ name: string }> }>('GET', '/v1/admin/word-lists');
    expect(lists.config.map((l) => l.name)).toEqual(['banned']);
    expect(lists.lists.map((l) => l.name)).toEqual(['scam']);
    const scam = await waitFor(
      () =>
        a.sendText(bob.id, 'get FREE b.i.t.c.o.i.n now').then(
          () => null,
          (e: unknown) => e as ParleyError,
        ),
      5000,
      'the admin API list in use',
    );
    expect(scam.code).toBe('ERROR_CODE_REJECTED');
    expect(scam.rejectCode).toBe('word_filter');
    await admin('DELETE', '/v1/admin/word-lists/scam');
  });

  it('a before-send hook refuses with its own code and reason, over the socket and over HTTP', async () => {
    const [alice, bob] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob')]);
    const a = connect(srv, alice);
    await a.waitReady(5000);
    const err = await rejection(a.sendText(bob.id, 'bad deal, buy now'));
    expect(err.code).toBe('ERROR_CODE_REJECTED');
    expect(err.reason).toBe('No spam here, please');
    expect(err.rejectCode).toBe('spam');
    expect(err.message).toBe('parley: ERROR_CODE_REJECTED (spam): No spam here, please');
    expect(isTemporary(err)).toBe(false);
    expect(hookCalls.filter((c) => c.text === 'bad deal, buy now')).toHaveLength(1); // asked once: not resent

    // POST /v1/rpc: the same refusal in the HTTP API's form.
    const httpErr = await rejection(
      rpc({ baseUrl: srv.http }, alice.token, 'send', { clientMsgId: 'rpc-bad-1', to: bob.id, contentType: 'text', payload: new TextEncoder().encode('bad again') }),
    );
    expect(httpErr.status).toBe(422);
    expect([httpErr.code, httpErr.apiCode]).toEqual(['ERROR_CODE_REJECTED', 'rejected']);
    expect(isCode(httpErr, 'ERROR_CODE_REJECTED')).toBe(true);
    expect(httpErr.reason).toBe('No spam here, please');
    expect(httpErr.rejectCode).toBe('spam');
    expect(await a.sendText(bob.id, 'good deal')).toMatchObject({ seq: 1 });
  });

  it('a user reports a message; the admin API lists it with the message; a moderator deletes it: event.moderated', async () => {
    const [alice, bob] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob')]);
    const a = connect(srv, alice);
    const b = connect(srv, bob);
    const aGot = inbox(a);
    const bGot = inbox(b);
    await Promise.all([a.waitReady(5000), b.waitReady(5000)]);
    const ack = await a.sendText(bob.id, 'you will regret this');
    await waitFor(() => bGot.some((m) => m.seq === ack.seq), 5000, 'bob gets it');

    await b.reportMessage(ack.conversationId, ack.seq, 'abuse', 'threatening me');
    await b.reportMessage(ack.conversationId, ack.seq, 'abuse', 'again'); // changes nothing
    // Refusals: one's own message, a reason that is not a code, a message one cannot read.
    expect((await rejection(a.reportMessage(ack.conversationId, ack.seq, 'spam'))).code).toBe('ERROR_CODE_BAD_REQUEST');
    expect((await rejection(b.reportMessage(ack.conversationId, ack.seq, 'Not A Code'))).code).toBe('ERROR_CODE_BAD_REQUEST');
    expect((await rejection(b.reportMessage(ack.conversationId, ack.seq + 50, 'spam'))).code).toBe('ERROR_CODE_PERMISSION_DENIED');

    // The moderators' queue (all pages), as the operator page reads it.
    const open: Report[] = [];
    let after = '';
    do {
      const page = await admin<{ reports: Report[]; next?: string }>('GET', `/v1/admin/reports?status=open&limit=50${after ? '&after=' + after : ''}`);
      open.push(...page.reports);
      after = page.next ?? '';
    } while (after);
    const mine = open.filter((r) => r.reporter === bob.id);
    expect(mine).toHaveLength(1);
    const r = mine[0]!;
    expect(r).toMatchObject({ conversation_id: ack.conversationId, seq: ack.seq, reason: 'abuse', note: 'threatening me', status: 'open' });
    expect(r.message?.from).toBe(alice.id);
    expect(text(fromBase64(r.message!.payload!))).toBe('you will regret this');

    // The moderator deletes the message for everyone: both sides get a RECALL marked moderated.
    await admin('DELETE', `/v1/admin/conversations/${encodeURIComponent(ack.conversationId)}/messages/${ack.seq}`);
    const moderated = (got: Message[]) => got.find((m) => m.kind === 'MESSAGE_KIND_RECALL' && m.event?.targetSeq === ack.seq);
    const bRecall = await waitFor(() => moderated(bGot), 5000, 'bob gets the moderated recall');
    expect(bRecall.event!.moderated).toBe(true);
    const aRecall = await waitFor(() => moderated(aGot), 5000, 'alice gets the moderated recall');
    expect(aRecall.event!.moderated).toBe(true);
    const hist = await b.history(ack.conversationId, 0, 10);
    expect(hist.messages!.find((m) => m.seq === ack.seq)).toMatchObject({ recalled: true });
    expect(hist.messages!.find((m) => m.seq === bRecall.seq)!.event!.moderated).toBe(true);

    // A user's own recall is not moderated.
    const ack2 = await a.sendText(bob.id, 'oops');
    await a.recall(ack2.conversationId, ack2.seq);
    const own = await waitFor(() => bGot.find((m) => m.kind === 'MESSAGE_KIND_RECALL' && m.event?.targetSeq === ack2.seq), 5000, 'own recall');
    expect(own.event!.moderated).toBeUndefined();

    const resolved = await admin<Report>('POST', `/v1/admin/reports/${encodeURIComponent(r.id)}/resolve`, { note: 'deleted' });
    expect(resolved.status).toBe('resolved');
  });
});

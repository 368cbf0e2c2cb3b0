import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { directConversationId, login, logout, register, rpc, text, DisconnectError, ParleyError } from '../../src/index.js';
import { startServer, waitFor, type RunningServer } from '../helpers/server.js';
import { closeClients, connect, inbox, newUser } from '../helpers/users.js';

let srv: RunningServer;
beforeAll(async () => {
  srv = await startServer(inject('parleyBin'));
});
afterAll(async () => {
  await srv?.dispose();
});
afterEach(() => closeClients());

describe('1:1 messaging against a real server', () => {
  it('sends, delivers in order, and reports delivered and read receipts', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    const a = connect(srv, alice);
    const b = connect(srv, bob);
    const bobGot = inbox(b);
    const receipts: { deliveredSeq?: number; readSeq?: number; userId: string }[] = [];
    a.on('receipt', (r) => receipts.push(r));
    await Promise.all([a.waitReady(5000), b.waitReady(5000)]);

    const acks = [];
    for (let i = 1; i <= 5; i++) acks.push(await a.sendText(bob.id, 'hello ' + i));
    const conv = directConversationId(alice.id, bob.id);
    expect(acks.map((x) => x.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(acks[0]!.conversationId).toBe(conv);

    await waitFor(() => bobGot.length === 5, 5000, 'bob gets 5');
    expect(bobGot.map((m) => text(m.payload))).toEqual([1, 2, 3, 4, 5].map((i) => 'hello ' + i));
    expect(bobGot.every((m) => m.from === alice.id)).toBe(true);

    // The client acks delivery on its own; alice sees the receipt.
    await waitFor(() => receipts.some((r) => r.userId === bob.id && r.deliveredSeq === 5), 5000, 'delivered receipt');
    await b.markRead(conv, 5);
    await waitFor(() => receipts.some((r) => r.userId === bob.id && r.readSeq === 5), 5000, 'read receipt');

    const list = await a.conversations();
    const c = list.find((x) => x.conversationId === conv)!;
    expect(c.lastSeq).toBe(5);
    expect(c.peer).toBe(bob.id);
    await waitFor(async () => ((await a.conversations()).find((x) => x.conversationId === conv)?.peerReadSeq ?? 0) >= 5, 5000);
  });

  it('a client that was away gets exactly what it missed, in order, once', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    const a = connect(srv, alice);
    let b = connect(srv, bob);
    const first = inbox(b);
    await Promise.all([a.waitReady(5000), b.waitReady(5000)]);
    await a.sendText(bob.id, 'before');
    await waitFor(() => first.length === 1);
    const saved = b.cursors();
    b.close();

    for (let i = 1; i <= 7; i++) await a.sendText(bob.id, 'while away ' + i);

    b = connect(srv, bob, { cursors: saved });
    const later = inbox(b);
    await b.waitReady(5000);
    await new Promise((r) => setTimeout(r, 200)); // any late duplicate would land here
    expect(later.map((m) => m.seq)).toEqual([2, 3, 4, 5, 6, 7, 8]);
    expect(later.map((m) => text(m.payload))).toEqual([1, 2, 3, 4, 5, 6, 7].map((i) => 'while away ' + i));
  });

  it('a new install with resumeFromServer starts at the server cursor instead of downloading history', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    const a = connect(srv, alice);
    const b1 = connect(srv, bob);
    const got1 = inbox(b1);
    await Promise.all([a.waitReady(5000), b1.waitReady(5000)]);
    for (let i = 1; i <= 3; i++) await a.sendText(bob.id, 'old ' + i);
    await waitFor(() => got1.length === 3);
    await new Promise((r) => setTimeout(r, 250)); // delivered cursor written (coalesced ~100 ms)
    b1.close();
    await a.sendText(bob.id, 'new');
    const b2 = connect(srv, bob, { resumeFromServer: true, deviceId: 'other-install' });
    const got2 = inbox(b2);
    await b2.waitReady(5000);
    expect(got2.map((m) => text(m.payload))).toEqual(['new']);
  });

  it('survives a server restart: sends made while it is down are stored once and everything arrives in order', async () => {
    const local = await startServer(inject('parleyBin'));
    try {
      const alice = await newUser(local, 'alice');
      const bob = await newUser(local, 'bob');
      // The first address is dead: the client must move on to the next one.
      const a = connect(local, alice, { urls: ['ws://127.0.0.1:1/ws', local.ws] });
      const b = connect(local, bob);
      const got = inbox(b);
      await Promise.all([a.waitReady(10000), b.waitReady(10000)]);
      await a.sendText(bob.id, 'm1');
      await waitFor(() => got.length === 1);

      await local.stop();
      await waitFor(() => a.state !== 'ready' && b.state !== 'ready', 5000, 'both see the server gone');
      const pending = [2, 3, 4, 5].map((i) => a.sendText(bob.id, 'm' + i));
      await new Promise((r) => setTimeout(r, 300));
      expect(a.pendingSends()).toHaveLength(4);

      await local.restart();
      const acks = await Promise.all(pending);
      expect(acks.map((x) => x.seq)).toEqual([2, 3, 4, 5]);
      await waitFor(() => got.length >= 5, 10000, 'bob catches up');
      await new Promise((r) => setTimeout(r, 200));
      expect(got.map((m) => text(m.payload))).toEqual(['m1', 'm2', 'm3', 'm4', 'm5']);
      const page = await b.history(acks[0]!.conversationId, 0, 50);
      expect(page.messages!.map((m) => text(m.payload))).toEqual(['m1', 'm2', 'm3', 'm4', 'm5']); // stored once each
    } finally {
      closeClients();
      await local.dispose();
    }
  });

  it('a resend with the same clientMsgId returns the original ack and stores nothing new', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    const a = connect(srv, alice);
    await a.waitReady(5000);
    const first = await a.send({ to: bob.id, payload: 'once', clientMsgId: 'fixed-id-1' });
    const again = await a.send({ to: bob.id, payload: 'once', clientMsgId: 'fixed-id-1' });
    expect(again.seq).toBe(first.seq);
    expect(again.messageId).toBe(first.messageId);
    expect(again.duplicate).toBe(true);
    const page = await a.history(first.conversationId);
    expect(page.messages).toHaveLength(1);
  });

  it('history pages backwards from the newest', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    const a = connect(srv, alice);
    await a.waitReady(5000);
    for (let i = 1; i <= 25; i++) await a.sendText(bob.id, 'h' + i);
    const conv = directConversationId(alice.id, bob.id);
    const p1 = await a.history(conv, 0, 10);
    expect(p1.messages!.map((m) => m.seq)).toEqual([16, 17, 18, 19, 20, 21, 22, 23, 24, 25]);
    expect(p1.hasMore).toBe(true);
    const p2 = await a.history(conv, 16, 10);
    expect(p2.messages!.map((m) => m.seq)).toEqual([6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
    const p3 = await a.history(conv, 6, 10);
    expect(p3.messages!.map((m) => m.seq)).toEqual([1, 2, 3, 4, 5]);
    expect(p3.hasMore).toBeFalsy();
  });

  it('recall, edit and delete-for-me reach the other side as sequenced events', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    const a = connect(srv, alice);
    const b = connect(srv, bob);
    const got = inbox(b);
    await Promise.all([a.waitReady(5000), b.waitReady(5000)]);
    const m1 = await a.sendText(bob.id, 'typo');
    const m2 = await a.sendText(bob.id, 'oops');
    const edit = await a.edit(m1.conversationId, m1.seq, 'fixed');
    const recall = await a.recall(m2.conversationId, m2.seq);
    expect(recall!.seq).toBe(4);
    await waitFor(() => got.length === 4, 5000);
    expect(got[2]!.kind).toBe('MESSAGE_KIND_EDIT');
    expect(got[2]!.event!.targetSeq).toBe(m1.seq);
    expect(text(got[2]!.payload)).toBe('fixed');
    expect(edit.seq).toBe(3);
    expect(got[3]!.kind).toBe('MESSAGE_KIND_RECALL');
    expect(got[3]!.event!.targetSeq).toBe(m2.seq);
    const h = await b.history(m1.conversationId);
    expect(text(h.messages![0]!.payload)).toBe('fixed');
    expect(h.messages![0]!.editedAt).toBeGreaterThan(0);
    expect(h.messages![1]!.recalled).toBe(true);
    expect(h.messages![1]!.payload).toBeUndefined();
    // Bob cannot edit Alice's message.
    await expect(b.edit(m1.conversationId, m1.seq, 'mine now')).rejects.toMatchObject({ code: 'ERROR_CODE_PERMISSION_DENIED' });

    const hidden: number[][] = [];
    const b2 = connect(srv, bob, { deviceId: 'bob-phone', deviceType: 'phone', resumeFromServer: true });
    b2.on('hidden', (h) => hidden.push(h.seqs ?? []));
    await b2.waitReady(5000);
    await b.deleteForMe(m1.conversationId, [m1.seq]);
    const after = await b.history(m1.conversationId);
    expect(after.messages!.map((m) => m.seq)).not.toContain(m1.seq);
    expect((await a.history(m1.conversationId)).messages!.map((m) => m.seq)).toContain(m1.seq);
    await waitFor(() => hidden.some((s) => s.includes(m1.seq)), 5000, 'hidden event on the other device');
  });

  it('typing and presence', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    const a = connect(srv, alice);
    await a.waitReady(5000);
    await a.sendText(bob.id, 'hi'); // a shared conversation makes presence visible
    const conv = directConversationId(alice.id, bob.id);
    const now = await a.subscribePresence([bob.id]);
    expect(now.find((p) => p.userId === bob.id)?.online ?? false).toBe(false);
    const seen: { userId: string; online?: boolean; lastSeen?: number }[] = [];
    a.on('presence', (p) => seen.push(p));
    const b = connect(srv, bob);
    await b.waitReady(5000);
    await waitFor(() => seen.some((p) => p.userId === bob.id && p.online), 5000, 'bob online');
    const typing: string[] = [];
    a.on('typing', (t) => t.conversationId === conv && typing.push(t.userId));
    b.typing(conv);
    await waitFor(() => typing.includes(bob.id), 5000, 'typing');
    b.close();
    await waitFor(() => seen.some((p) => p.userId === bob.id && !p.online && (p.lastSeen ?? 0) > 0), 5000, 'bob offline');
  });

  it('a second login with the same device type kicks the first: it stops and does not come back', async () => {
    const alice = await newUser(srv, 'alice');
    const first = connect(srv, alice, { deviceId: 'laptop', deviceType: 'web' });
    await first.waitReady(5000);
    const closed = new Promise<Error>((r) => first.on('closed', r));
    const second = connect(srv, alice, { deviceId: 'desktop', deviceType: 'web' });
    await second.waitReady(5000);
    const err = await closed;
    expect(err).toBeInstanceOf(DisconnectError);
    expect((err as DisconnectError).code).toBe('DISCONNECT_CODE_KICKED');
    await new Promise((r) => setTimeout(r, 300));
    expect(first.state).toBe('closed');
    expect(second.state).toBe('ready');
  });

  it('logout revokes the token: the session ends for good; login and rpc work over HTTP', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    const t = await login({ baseUrl: srv.http }, alice.id, alice.password);
    const a = connect(srv, { ...alice, token: t.token });
    await a.waitReady(5000);
    const f = await rpc({ baseUrl: srv.http }, t.token, 'send', { clientMsgId: 'rpc-1', to: bob.id, payload: new TextEncoder().encode('via http') });
    expect(f.sendAck!.seq).toBe(1);
    const closed = new Promise<Error>((r) => a.on('closed', r));
    await logout({ baseUrl: srv.http }, t.token);
    const err = await closed;
    expect((err as DisconnectError).code).toBe('DISCONNECT_CODE_TOKEN_REVOKED');
    await expect(login({ baseUrl: srv.http }, alice.id, 'wrong-password')).rejects.toMatchObject({ code: 'ERROR_CODE_UNAUTHENTICATED', apiCode: 'invalid_credentials', temporary: false });
    await expect(rpc({ baseUrl: srv.http }, t.token, 'listContacts', {})).rejects.toBeInstanceOf(ParleyError);
    // HTTP refusals carry the socket's codes.
    await expect(register({ baseUrl: srv.http }, alice.id, 'another-password')).rejects.toMatchObject({ code: 'ERROR_CODE_CONFLICT', apiCode: 'conflict', status: 409 });
    await expect(rpc({ baseUrl: srv.http }, t.token, 'listContacts', {})).rejects.toMatchObject({ code: 'ERROR_CODE_UNAUTHENTICATED', apiCode: 'unauthenticated' });
  });
});

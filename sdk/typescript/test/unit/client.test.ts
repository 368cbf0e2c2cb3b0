import { afterEach, describe, expect, it } from 'vitest';
import { ParleyClient } from '../../src/client.js';
import { text } from '../../src/codec.js';
import { DisconnectError, ParleyError, isTemporary } from '../../src/errors.js';
import type { ErrorBody, Message } from '../../src/types.js';
import { FakeServer } from '../helpers/fake-server.js';
import { waitFor } from '../helpers/server.js';

const clients: ParleyClient[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

function client(server: FakeServer, opts: Partial<ConstructorParameters<typeof ParleyClient>[0]> = {}): ParleyClient {
  const c = new ParleyClient({ url: 'ws://fake/ws', token: 'bob', WebSocket: server.WebSocket, minBackoffMs: 5, maxBackoffMs: 40, ...opts });
  clients.push(c);
  return c;
}

function collect(c: ParleyClient): Message[] {
  const got: Message[] = [];
  c.on('message', (m) => got.push(m));
  return got;
}

describe('ParleyClient against a scripted server', () => {
  it('fills a gap before delivering, drops duplicates, and acks cumulatively', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    const got = collect(c);
    await c.waitReady(2000);
    const conv = 'p:alice:bob';
    const m1 = srv.store(conv, 'alice', 'one');
    const m2 = srv.store(conv, 'alice', 'two');
    const m3 = srv.store(conv, 'alice', 'three');
    const sock = srv.live[0]!;
    sock.push({ message: m1 });
    sock.push({ message: m3 }); // seq 2 never pushed: a gap
    sock.push({ message: m2 }); // arrives late: a duplicate by then
    sock.push({ message: m1 }); // a plain duplicate
    await waitFor(() => got.length >= 3);
    await new Promise((r) => setTimeout(r, 30));
    expect(got.map((m) => m.seq)).toEqual([1, 2, 3]);
    expect(got.map((m) => text(m.payload))).toEqual(['one', 'two', 'three']);
    expect(srv.frames.some((f) => f.syncMessages?.conversationId === conv && f.syncMessages.afterSeq === 1)).toBe(true);
    const acks = srv.frames.filter((f) => f.delivered).map((f) => Number(f.delivered!.seq));
    expect(acks.at(-1)).toBe(3);
    expect(acks.length).toBeLessThan(3); // coalesced, not one per message
    expect(c.cursor(conv)).toBe(3);
  });

  it('catches up from seeded cursors after connecting', async () => {
    const srv = new FakeServer();
    for (let i = 1; i <= 5; i++) srv.store('g:1', 'alice', 'm' + i);
    const c = client(srv, { cursors: { 'g:1': 2 }, syncPageSize: 2 });
    const got = collect(c);
    await c.waitReady(2000);
    expect(got.map((m) => m.seq)).toEqual([3, 4, 5]);
    const pages = srv.frames.filter((f) => f.syncMessages).map((f) => Number(f.syncMessages!.afterSeq));
    expect(pages).toEqual([2, 4]);
  });

  it('keeps paging while hasMore on short pages and retries a busy refusal on the same link', async () => {
    const srv = new FakeServer();
    for (let i = 1; i <= 7; i++) srv.store('g:1', 'alice', 'm' + i);
    let busy = 2;
    srv.hook = (s, f) => {
      if (!f.syncMessages) return false;
      if (busy > 0) {
        busy--;
        s.push({ id: f.id, error: { code: 'ERROR_CODE_TOO_MANY_REQUESTS' } });
        return true;
      }
      // A byte-bounded page: two entries, though the client asked for 200.
      const list = srv.convs.get(f.syncMessages.conversationId) ?? [];
      const page = list.filter((m) => m.seq > Number(f.syncMessages!.afterSeq ?? 0)).slice(0, 2);
      const last = page.length ? page[page.length - 1]!.seq : 0;
      s.push({ id: f.id, messages: { conversationId: 'g:1', messages: page, hasMore: last < list.length, lastSeq: list.length } });
      return true;
    };
    const c = client(srv);
    const got = collect(c);
    await c.waitReady(2000);
    expect(got.map((m) => m.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(srv.sockets.length).toBe(1); // retried in place, not by reconnecting
  });

  it('retries a refused send only when the server says the refusal is temporary', async () => {
    const srv = new FakeServer();
    const refusals: ErrorBody[] = [
      { code: 'ERROR_CODE_BAD_REQUEST', temporary: true }, // the server's word beats the code
      { code: 'ERROR_CODE_UNAVAILABLE' }, // an older server: the code decides
    ];
    srv.hook = (s, f) => {
      if (!f.send) return false;
      const e = refusals.shift();
      if (!e) return false;
      s.push({ id: f.id, error: e });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    const ack = await c.sendText('alice', 'retried twice');
    expect(ack.seq).toBe(1);
    expect(srv.frames.filter((f) => f.send)).toHaveLength(3);

    // UNAVAILABLE but not temporary (the server knows better): not retried.
    srv.hook = (s, f) => {
      if (!f.send) return false;
      s.push({ id: f.id, error: { code: 'ERROR_CODE_UNAVAILABLE', temporary: false } });
      return true;
    };
    const err = await c.sendText('alice', 'refused').then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ParleyError);
    expect((err as ParleyError).temporary).toBe(false);
    expect(isTemporary(err)).toBe(false);
    expect(srv.frames.filter((f) => f.send)).toHaveLength(4);
  });

  it('decides by the code when a server does not say whether a refusal is temporary', () => {
    expect(isTemporary(new ParleyError('ERROR_CODE_UNAVAILABLE'))).toBe(true);
    expect(isTemporary(new ParleyError('ERROR_CODE_TOO_MANY_REQUESTS'))).toBe(true);
    expect(isTemporary(new ParleyError('ERROR_CODE_INTERNAL'))).toBe(false); // damaged storage: never mended by a retry
    expect(isTemporary(new ParleyError('ERROR_CODE_QUOTA_EXCEEDED'))).toBe(false);
    expect(isTemporary(new ParleyError('ERROR_CODE_INTERNAL', '', true))).toBe(true);
    expect(isTemporary(new Error('x'))).toBe(false);
  });

  it('resends an unacknowledged send after a reconnect under the same clientMsgId, stored once', async () => {
    const srv = new FakeServer();
    const c = client(srv, { urls: ['ws://one/ws', 'ws://two/ws'] });
    await c.waitReady(2000);
    srv.swallowAcks = 1; // the first attempt is stored but its ack is lost
    const p = c.send({ to: 'alice', payload: 'hello' });
    await waitFor(() => srv.frames.some((f) => f.send));
    expect(c.pendingSends()).toHaveLength(1);
    srv.dropAll();
    const ack = await p;
    const sends = srv.frames.filter((f) => f.send);
    expect(sends).toHaveLength(2);
    expect(sends[0]!.send!.clientMsgId).toBe(sends[1]!.send!.clientMsgId);
    expect(ack.duplicate).toBe(true);
    expect(srv.convs.get('p:alice:bob')).toHaveLength(1);
    expect(srv.attempts.slice(0, 2)).toEqual(['ws://one/ws', 'ws://two/ws']); // moved to the next address
    expect(c.pendingSends()).toHaveLength(0);
  });

  it('queues sends while disconnected and sends them in order once connected', async () => {
    const srv = new FakeServer();
    srv.accepting = false;
    const c = client(srv);
    const acks = [c.sendText('alice', 'a'), c.sendText('alice', 'b'), c.sendText('alice', 'c')];
    await new Promise((r) => setTimeout(r, 50));
    expect(srv.frames.filter((f) => f.send)).toHaveLength(0);
    srv.accepting = true;
    const seqs = (await Promise.all(acks)).map((a) => a.seq);
    expect(seqs).toEqual([1, 2, 3]);
  });

  it('backs off with jitter between failed attempts, bounded by the maximum', async () => {
    const srv = new FakeServer();
    srv.accepting = false;
    const times: number[] = [];
    const c = client(srv, { minBackoffMs: 20, maxBackoffMs: 160 });
    c.on('disconnected', () => times.push(Date.now()));
    await waitFor(() => times.length >= 7, 5000);
    const gaps = times.slice(1).map((t, i) => t - times[i]!);
    // Nominal waits 20, 40, 80, 160, 160, 160; each is between half and all of it (+ timer slack).
    const nominal = [20, 40, 80, 160, 160, 160];
    gaps.forEach((g, i) => {
      expect(g).toBeGreaterThanOrEqual(nominal[i]! / 2 - 2);
      expect(g).toBeLessThanOrEqual(nominal[i]! + 60);
    });
    expect(new Set(gaps.slice(3).map((g) => Math.round(g / 5))).size).toBeGreaterThan(1); // jittered, not in step
  });

  it('skips a dead address and connects to the next one', async () => {
    const srv = new FakeServer();
    const c = client(srv, { urls: ['ws://dead/ws', 'ws://live/ws'] });
    await c.waitReady(2000);
    expect(srv.attempts).toEqual(['ws://dead/ws', 'ws://live/ws']);
  });

  it('stops for good when kicked, without reconnecting', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    await c.waitReady(2000);
    const closed = new Promise<Error>((r) => c.on('closed', r));
    const pending = c.sendText('alice', 'never acked');
    srv.swallowAcks = 1;
    const s = srv.live[0]!;
    s.push({ disconnect: { code: 'DISCONNECT_CODE_KICKED', reason: 'signed in on another device of the same type' } });
    s.close();
    const err = await closed;
    expect(err).toBeInstanceOf(DisconnectError);
    expect((err as DisconnectError).code).toBe('DISCONNECT_CODE_KICKED');
    await expect(pending).rejects.toBeInstanceOf(DisconnectError);
    await new Promise((r) => setTimeout(r, 60));
    expect(srv.attempts).toHaveLength(1);
    expect(c.state).toBe('closed');
  });

  it('stops on a refused token, and renews it with getToken', async () => {
    const srv = new FakeServer();
    const bad = client(srv, { token: 'bad' });
    await expect(bad.waitReady(2000)).rejects.toThrow(/UNAUTHENTICATED|AUTH_FAILED/);
    let n = 0;
    const renewing = client(srv, { token: undefined, getToken: () => (n++ === 0 ? 'bad' : 'bob') });
    await renewing.waitReady(2000);
    expect(renewing.userId).toBe('bob');
  });

  it('waits as long as the server asks after a shutdown disconnect', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    await c.waitReady(2000);
    const t0 = Date.now();
    const s = srv.live[0]!;
    s.push({ disconnect: { code: 'DISCONNECT_CODE_SERVER_SHUTDOWN', reconnectAfterMs: 150 } });
    s.close();
    await waitFor(() => srv.attempts.length === 2, 3000);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(150);
  });

  it('pings when idle and reconnects when the link goes silent', async () => {
    const srv = new FakeServer();
    const c = client(srv, { heartbeatMs: 40 });
    await c.waitReady(2000);
    await waitFor(() => srv.frames.some((f) => f.ping), 2000, 'a ping');
    srv.answerPings = false;
    const dropped = new Promise<Error>((r) => c.on('disconnected', r));
    const err = await dropped;
    expect(err.message).toMatch(/heartbeat/);
    srv.answerPings = true;
    await waitFor(() => c.state === 'ready' && srv.attempts.length === 2, 3000, 'reconnect');
  });

  it('subscribes to presence again after reconnecting', async () => {
    const srv = new FakeServer();
    srv.hook = (s, f) => {
      if (!f.subscribePresence) return false;
      s.push({ id: f.id, presence: { users: f.subscribePresence.userIds.map((userId) => ({ userId, online: true })) } });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    expect(await c.subscribePresence(['alice'])).toEqual([{ userId: 'alice', online: true }]);
    const seen: string[] = [];
    c.on('presence', (p) => seen.push(p.userId));
    srv.dropAll();
    await waitFor(() => seen.includes('alice'), 3000, 'presence after reconnect');
    expect(srv.frames.filter((f) => f.subscribePresence)).toHaveLength(2);
  });
});

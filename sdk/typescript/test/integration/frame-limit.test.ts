// Requests over the server's frame limit against a real server with a small
// max_frame_bytes: refused by the SDK at once, never resent, the session kept.
import WebSocket from 'ws';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { directConversationId, isCode, text, type AuthOk, type WebSocketHandler, type WebSocketLike } from '../../src/index.js';
import { startServer, waitFor, type RunningServer } from '../helpers/server.js';
import { closeClients, connect, inbox, newUser } from '../helpers/users.js';

const LIMIT = 2048;

let srv: RunningServer;
beforeAll(async () => {
  srv = await startServer(inject('parleyBin'), undefined, { config: `max_frame_bytes: ${LIMIT}\n` });
});
afterAll(async () => {
  await srv?.dispose();
});
afterEach(() => closeClients());

/**
 * The `ws` WebSocket, except that the authOk it passes on announces a far
 * larger frame limit than the server's: the SDK then writes an oversized
 * frame, and the server's own refusal (an error, then the close) is what it
 * has to handle.
 */
class OverstatedLimit implements WebSocketLike {
  onopen: WebSocketHandler<unknown> | null = null;
  onmessage: WebSocketHandler<{ data: unknown }> | null = null;
  onclose: WebSocketHandler<{ code?: number; reason?: string }> | null = null;
  onerror: WebSocketHandler<unknown> | null = null;
  private ws: WebSocket;
  constructor(url: string) {
    this.ws = new WebSocket(url);
    this.ws.onopen = (e) => this.onopen?.(e);
    this.ws.onmessage = (e) => this.onmessage?.({ data: String(e.data).replace(/"maxFrameBytes":\d+/, '"maxFrameBytes":1000000') });
    this.ws.onclose = (e) => this.onclose?.(e);
    this.ws.onerror = (e) => this.onerror?.(e);
  }
  get readyState(): number {
    return this.ws.readyState;
  }
  send(data: string): void {
    this.ws.send(data);
  }
  close(code?: number, reason?: string): void {
    this.ws.close(code, reason);
  }
}

async function refusal(p: Promise<unknown>): Promise<unknown> {
  return p.then(
    () => new Error('resolved'),
    (e: unknown) => e,
  );
}

describe('the frame limit against a real server', () => {
  it('refuses oversized sends and edits at once, keeps the socket, and resends nothing after a reconnect', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    const a = connect(srv, alice);
    const b = connect(srv, bob);
    const bobGot = inbox(b);
    const connected: AuthOk[] = [];
    const drops: Error[] = [];
    a.on('connected', (ok) => connected.push(ok));
    a.on('disconnected', (e) => drops.push(e));
    await Promise.all([a.waitReady(5000), b.waitReady(5000)]);
    expect(connected.map((ok) => ok.maxFrameBytes)).toEqual([LIMIT]);

    const started = Date.now();
    const err = await refusal(a.sendText(bob.id, 'x'.repeat(LIMIT), 'too-big'));
    expect(isCode(err, 'ERROR_CODE_TOO_LARGE')).toBe(true);
    expect(Date.now() - started).toBeLessThan(500); // refused here, not after a timeout
    expect(a.pendingSends()).toEqual([]);

    const ack = await a.sendText(bob.id, 'fits');
    const conv = directConversationId(alice.id, bob.id);
    expect(ack).toMatchObject({ conversationId: conv, seq: 1 });
    expect(isCode(await refusal(a.edit(conv, 1, 'y'.repeat(LIMIT))), 'ERROR_CODE_TOO_LARGE')).toBe(true);
    expect(drops).toEqual([]); // the socket stayed up throughout
    expect(connected.length).toBe(1);

    a.dropConnection();
    await waitFor(() => connected.length === 2, 5000, 'reconnected');
    await a.waitReady(5000);
    expect((await a.sendText(bob.id, 'after')).seq).toBe(2);
    await waitFor(() => bobGot.length === 2, 5000, 'bob gets 2');
    await new Promise((r) => setTimeout(r, 200)); // a resent message would land here
    expect(bobGot.map((m) => text(m.payload))).toEqual(['fits', 'after']);
    expect((await a.syncMessages(conv)).messages?.map((m) => m.seq)).toEqual([1, 2]);
  });

  it('fails the request the server closed the connection for, and does not resend it', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    const a = connect(srv, alice, { WebSocket: OverstatedLimit });
    const b = connect(srv, bob);
    const bobGot = inbox(b);
    const connected: AuthOk[] = [];
    a.on('connected', (ok) => connected.push(ok));
    await Promise.all([a.waitReady(5000), b.waitReady(5000)]);
    expect(connected[0]!.maxFrameBytes).toBe(1_000_000);

    const err = await refusal(a.sendText(bob.id, 'x'.repeat(LIMIT), 'too-big'));
    expect(isCode(err, 'ERROR_CODE_TOO_LARGE')).toBe(true);
    expect(a.pendingSends()).toEqual([]);
    await waitFor(() => connected.length === 2, 5000, 'reconnected after the server closed');
    await a.waitReady(5000);
    expect((await a.sendText(bob.id, 'fits')).seq).toBe(1);
    await waitFor(() => bobGot.length === 1, 5000, 'bob gets 1');
    await new Promise((r) => setTimeout(r, 200)); // a resent message would land here
    expect(bobGot.map((m) => text(m.payload))).toEqual(['fits']);
    expect(connected.length).toBe(2);
  });
});

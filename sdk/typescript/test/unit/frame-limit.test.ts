// Requests over the server's frame limit (AuthOk.maxFrameBytes) fail at once
// with ERROR_CODE_TOO_LARGE and never wedge a session.
import { afterEach, describe, expect, it } from 'vitest';
import { ParleyClient } from '../../src/client.js';
import { utf8Length } from '../../src/connection.js';
import { ParleyError, isCode } from '../../src/errors.js';
import type { ClientFrame } from '../../src/types.js';
import { FakeServer, type FakeSocket } from '../helpers/fake-server.js';
import { waitFor } from '../helpers/server.js';

const clients: ParleyClient[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

/**
 * A server announcing `announced` as its frame limit and enforcing `enforced`
 * as the real one does: an error without id, a disconnect, then the close.
 */
function limited(announced: number, enforced = announced): FakeServer {
  const srv = new FakeServer();
  srv.hook = (s: FakeSocket, f: ClientFrame) => {
    if (Buffer.byteLength(JSON.stringify(f)) > enforced) {
      s.push({ error: { code: 'ERROR_CODE_FRAME_TOO_LARGE', message: 'frame too large', temporary: false } });
      s.push({ disconnect: { code: 'DISCONNECT_CODE_PROTOCOL_ERROR', reason: 'protocol error' } });
      s.close();
      return true;
    }
    if (!f.auth) return false;
    s.userId = f.auth.token;
    s.push({ id: f.id, authOk: { userId: f.auth.token, sessionId: 's' + srv.sockets.length, heartbeatSeconds: 30, maxFrameBytes: announced } });
    return true;
  };
  return srv;
}

function client(srv: FakeServer): ParleyClient {
  const c = new ParleyClient({ url: 'ws://fake/ws', token: 'bob', WebSocket: srv.WebSocket, minBackoffMs: 5, maxBackoffMs: 40 });
  clients.push(c);
  return c;
}

const sendsOf = (srv: FakeServer, clientMsgId: string) => srv.frames.filter((f) => f.send?.clientMsgId === clientMsgId).length;

async function tooLarge(p: Promise<unknown>): Promise<ParleyError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ParleyError);
  expect(isCode(err, 'ERROR_CODE_TOO_LARGE')).toBe(true);
  expect((err as ParleyError).temporary).toBe(false);
  return err as ParleyError;
}

describe('the frame limit', () => {
  it('refuses an oversized send before the socket, keeps the connection, and sends the next one', async () => {
    const srv = limited(2048);
    const c = client(srv);
    await c.waitReady(2000);
    const sock = srv.live[0]!;

    const err = await tooLarge(c.sendText('alice', 'x'.repeat(3000), 'big-1'));
    expect(err.message).toMatch(/2048/);
    expect(sendsOf(srv, 'big-1')).toBe(0);
    expect(c.pendingSends()).toEqual([]);

    const ack = await c.sendText('alice', 'small', 'small-1');
    expect(ack.seq).toBe(1);
    expect(srv.live).toEqual([sock]); // the same connection throughout
    expect(c.state).toBe('ready');
  });

  it('covers every request that carries content: edit, stream appends, room sends', async () => {
    const srv = limited(2048);
    const c = client(srv);
    await c.waitReady(2000);
    await tooLarge(c.edit('p:alice:bob', 1, 'y'.repeat(3000)));
    await tooLarge(c.roomSend('lobby', 1, 'z'.repeat(3000)));
    await tooLarge(c.friendRequest('alice', 'n'.repeat(3000)));
    srv.hook = ((inner) => (s: FakeSocket, f: ClientFrame) => {
      if (f.streamOpen) {
        s.push({ id: f.id, streamOpened: { streamId: 'st1', conversationId: 'p:alice:bob' } });
        return true;
      }
      return inner!(s, f);
    })(srv.hook);
    const st = await c.openStream({ to: 'alice' });
    // Counted in UTF-8 bytes, not characters: 700 euro signs are 2100 bytes.
    await tooLarge(st.append('€'.repeat(700)));
    expect(st.length).toBe(0); // refused text is not counted as appended
    await st.append('€'.repeat(500));
    expect(st.length).toBe(1500);
    expect(srv.frames.filter((f) => f.edit || f.roomSend || f.friendRequest)).toEqual([]);
    expect(srv.live.length).toBe(1);
  });

  it('while offline, refuses at once by the last known limit and queues what fits', async () => {
    const srv = limited(2048);
    const c = client(srv);
    await c.waitReady(2000);
    srv.accepting = false;
    srv.dropAll();
    await waitFor(() => c.state === 'connecting');
    await tooLarge(c.sendText('alice', 'x'.repeat(3000), 'big-2'));
    await tooLarge(c.edit('p:alice:bob', 1, 'y'.repeat(3000)));
    const small = c.sendText('alice', 'fits', 'small-2');
    expect(c.pendingSends().map((s) => s.clientMsgId)).toEqual(['small-2']);
    srv.accepting = true;
    c.reconnectNow();
    expect((await small).seq).toBe(1);
    expect(sendsOf(srv, 'big-2')).toBe(0);
  });

  it('fails the request the server refused as too large instead of resending it, and resends the others', async () => {
    // The server announces more than it accepts: its refusal is the only sign.
    const srv = limited(1_000_000, 2048);
    const c = client(srv);
    await c.waitReady(2000);
    srv.swallowAcks = 1; // the small send waits for its ack when the big one closes the link
    const small = c.sendText('alice', 'small', 'small-3');
    await waitFor(() => sendsOf(srv, 'small-3') === 1);
    const big = c.sendText('alice', 'x'.repeat(3000), 'big-3');
    await tooLarge(big);
    expect((await small).clientMsgId).toBe('small-3'); // resent after the reconnect
    expect(srv.sockets.length).toBe(2);
    await new Promise((r) => setTimeout(r, 50));
    expect(sendsOf(srv, 'big-3')).toBe(1); // never resent
    expect(sendsOf(srv, 'small-3')).toBe(2);
    expect(c.pendingSends()).toEqual([]);
    expect(c.state).toBe('ready');
  });

  it('counts UTF-8 bytes as the socket sends them', () => {
    for (const s of ['', 'ascii', 'é', '€uro', '👍🏽 ok', '\u07ff\u0800\uffff', '{"a":"\\ud800"}', 'lone \ud800 x', 'lone \udc00', 'end \ud83d']) {
      expect(utf8Length(s)).toBe(Buffer.byteLength(s, 'utf8'));
    }
  });
});

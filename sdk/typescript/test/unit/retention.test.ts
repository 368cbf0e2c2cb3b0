import { afterEach, describe, expect, it } from 'vitest';
import { ParleyClient } from '../../src/client.js';
import { decodeFrame } from '../../src/codec.js';
import { ParleyError } from '../../src/errors.js';
import { DISAPPEARING_TIMERS, disappearingSeconds, isDisappearingTimer, isExpired, msUntilExpiry } from '../../src/retention.js';
import { FakeServer, wire } from '../helpers/fake-server.js';

const clients: ParleyClient[] = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
});

function client(server: FakeServer): ParleyClient {
  const c = new ParleyClient({ url: 'ws://fake/ws', token: 'bob', WebSocket: server.WebSocket, minBackoffMs: 5, maxBackoffMs: 40 });
  clients.push(c);
  return c;
}

describe('retention and disappearing messages', () => {
  it('decodes expiresAt, firstSeq and the timer event as numbers', () => {
    const m = decodeFrame(
      wire({ message: { conversationId: 'p:a:b', seq: 12, serverTime: 1763800510000, expiresAt: 1763800810000, kind: 'MESSAGE_KIND_NORMAL' } }),
    ).message!;
    expect(m.expiresAt).toBe(1763800810000);
    const ev = decodeFrame(
      wire({ message: { conversationId: 'p:a:b', seq: 11, kind: 'MESSAGE_KIND_DISAPPEARING_SET', event: { disappearingSeconds: 300 } } }),
    ).message!;
    expect(ev.kind).toBe('MESSAGE_KIND_DISAPPEARING_SET');
    expect(ev.event!.disappearingSeconds).toBe(300);
    const list = decodeFrame(wire({ conversations: { conversations: [{ conversationId: 'p:a:b', firstSeq: 8, disappearingSeconds: 300 }] } }));
    const c = list.conversations!.conversations![0]!;
    expect(c.firstSeq).toBe(8);
    expect(disappearingSeconds(c)).toBe(300);
    expect(disappearingSeconds({})).toBe(0);
  });

  it('tells expired messages and the offered timers', () => {
    expect(isExpired({ expiresAt: 1000 }, 999)).toBe(false);
    expect(isExpired({ expiresAt: 1000 }, 1000)).toBe(true);
    expect(isExpired({}, 1e15)).toBe(false);
    expect(msUntilExpiry({ expiresAt: 1000 }, 400)).toBe(600);
    expect(msUntilExpiry({ expiresAt: 1000 }, 4000)).toBe(0);
    expect(msUntilExpiry({}, 400)).toBeUndefined();
    expect(DISAPPEARING_TIMERS).toEqual([0, 30, 300, 3600, 86400, 604800, 2419200]);
    expect(isDisappearingTimer(300)).toBe(true);
    expect(isDisappearingTimer(45)).toBe(false);
  });

  it('setDisappearing sends the frame and resolves with the event ack; a refusal rejects', async () => {
    const srv = new FakeServer();
    srv.hook = (s, f) => {
      if (!f.setDisappearing) return false;
      if (f.setDisappearing.seconds === 45) {
        s.push({ id: f.id, error: { code: 'ERROR_CODE_BAD_REQUEST', temporary: false } });
      } else {
        s.push({ id: f.id, sendAck: { conversationId: 'p:a:b', seq: 11, clientMsgId: f.setDisappearing.clientMsgId!, serverTime: 1, messageId: '7' } });
      }
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    const ack = await c.setDisappearing('p:a:b', 300);
    expect(ack.seq).toBe(11);
    const sent = srv.frames.filter((f) => f.setDisappearing).map((f) => f.setDisappearing!);
    expect(sent[0]).toMatchObject({ conversationId: 'p:a:b', seconds: 300 });
    expect(sent[0]!.clientMsgId).toBeTruthy();
    const err = await c.setDisappearing('p:a:b', 45).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ParleyError);
    expect((err as ParleyError).code).toBe('ERROR_CODE_BAD_REQUEST');
  });
});

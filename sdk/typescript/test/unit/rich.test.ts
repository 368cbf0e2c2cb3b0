import { afterEach, describe, expect, it } from 'vitest';
import { ParleyClient } from '../../src/client.js';
import { decodeFrame, text } from '../../src/codec.js';
import { ParleyError } from '../../src/errors.js';
import { applyReaction, mentionsUser } from '../../src/rich.js';
import type { Message, ReactionUpdate, StreamChunk } from '../../src/types.js';
import { FakeServer, wire } from '../helpers/fake-server.js';
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

describe('rich messages on the wire', () => {
  it('decodes replies, threads, reactions and pins the way the SDK hands them out', () => {
    const snippet = new TextEncoder().encode('the original, cut');
    const f = decodeFrame(
      wire({
        message: {
          conversationId: 'g:1',
          seq: 9,
          replyTo: 4,
          threadRoot: 2,
          mentions: ['alice'],
          mentionAll: true,
          replyPreview: { seq: 4, from: 'alice', contentType: 'text', snippet, truncated: true, attachments: 2, editedAt: 1700000000123 },
          thread: { replyCount: 3, lastReplySeq: 8, lastReplyAt: 1700000000999 },
          reactions: [{ emoji: '👍', count: 2, me: true }],
          reactionVersion: 12,
          streamId: 'st1',
          incomplete: true,
        },
      }),
    );
    const m = f.message!;
    expect(m.replyTo).toBe(4);
    expect(m.threadRoot).toBe(2);
    expect(m.reactionVersion).toBe(12);
    expect(m.replyPreview!.seq).toBe(4);
    expect(m.replyPreview!.editedAt).toBe(1700000000123);
    expect(text(m.replyPreview!.snippet)).toBe('the original, cut');
    expect(m.replyPreview!.attachments).toBe(2);
    expect(m.thread).toEqual({ replyCount: 3, lastReplySeq: 8, lastReplyAt: 1700000000999 });
    expect(m.reactions).toEqual([{ emoji: '👍', count: 2, me: true }]);
    const c = decodeFrame(
      wire({ id: 3, conversations: { conversations: [{ conversationId: 'g:1', unreadMentions: 2, reactionVersion: 40, pins: [{ seq: 5, pinnedBy: 'ann', pinnedAt: 1700000000000 }] }] } }),
    ).conversations!.conversations![0]!;
    expect(c.reactionVersion).toBe(40);
    expect(c.pins).toEqual([{ seq: 5, pinnedBy: 'ann', pinnedAt: 1700000000000 }]);
    const r = decodeFrame(wire({ reaction: { conversationId: 'g:1', seq: 9, version: 41, reactions: [{ emoji: 'ok', count: 1 }] } })).reaction!;
    expect(r.version).toBe(41);
  });

  it('sends replyTo, mentions, mentionAll and threadRoot with a send', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    await c.waitReady(2000);
    await c.sendText('g:1', 'see above @alice', { replyTo: 4, mentions: ['alice'], clientMsgId: 'x1' });
    await c.send({ conversationId: 'g:1', payload: 'in the thread', threadRoot: 2, mentionAll: true });
    await c.sendText('alice', 'plain', 'x3'); // the old third argument, a clientMsgId
    const sends = srv.frames.filter((f) => f.send).map((f) => f.send!);
    expect(sends[0]).toMatchObject({ clientMsgId: 'x1', conversationId: 'g:1', replyTo: 4, mentions: ['alice'] });
    expect(sends[0]!.threadRoot).toBeUndefined();
    expect(sends[1]).toMatchObject({ conversationId: 'g:1', threadRoot: 2, mentionAll: true });
    expect(sends[2]).toMatchObject({ clientMsgId: 'x3', to: 'alice' });
    expect(sends[2]!.replyTo).toBeUndefined();
    expect('mentions' in sends[2]!).toBe(false);
  });

  it('sends searchText with a send and an edit, and nothing when not given', async () => {
    const srv = new FakeServer();
    srv.hook = (s, f) => {
      if (!f.edit) return false;
      s.push({ id: f.id, sendAck: { conversationId: f.edit.conversationId, seq: 3, messageId: '9', clientMsgId: f.edit.clientMsgId ?? '' } });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    await c.send({ to: 'bob', contentType: 'application/x-sealed', payload: new Uint8Array([1]), searchText: 'the old mill' });
    await c.sendText('bob', 'plain');
    await c.edit('p:alice:bob', 1, new Uint8Array([2]), 'application/x-sealed', 'the new mill');
    const sends = srv.frames.filter((f) => f.send).map((f) => f.send!);
    expect(sends[0]!.searchText).toBe('the old mill');
    expect('searchText' in sends[1]!).toBe(false);
    expect(srv.frames.find((f) => f.edit)!.edit!.searchText).toBe('the new mill');
  });

  it('react and unreact send React and resolve with the personal update', async () => {
    const srv = new FakeServer();
    srv.hook = (s, f) => {
      if (!f.react) return false;
      const me = !f.react.remove;
      s.push({ id: f.id, reaction: { conversationId: f.react.conversationId, seq: f.react.seq, version: me ? 5 : 6, personal: true, reactions: me ? [{ emoji: f.react.emoji, count: 1, me }] : [] } });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    const u = await c.react('g:1', 3, '🎉');
    expect(u).toEqual({ conversationId: 'g:1', seq: 3, version: 5, personal: true, reactions: [{ emoji: '🎉', count: 1, me: true }] });
    const v = await c.unreact('g:1', 3, '🎉');
    expect(v.version).toBe(6);
    expect(srv.frames.filter((f) => f.react).map((f) => f.react)).toEqual([
      { conversationId: 'g:1', seq: 3, emoji: '🎉' },
      { conversationId: 'g:1', seq: 3, emoji: '🎉', remove: true },
    ]);
  });

  it('hands pushed reaction updates over after the messages pushed before them (a gap filled first)', async () => {
    const srv = new FakeServer();
    const c = client(srv);
    const order: string[] = [];
    c.on('message', (m) => order.push('m' + m.seq));
    c.on('reaction', (u) => order.push('r' + u.seq));
    await c.waitReady(2000);
    const m1 = srv.store('g:1', 'alice', 'one');
    srv.store('g:1', 'alice', 'two');
    const m3 = srv.store('g:1', 'alice', 'three');
    const s = srv.live[0]!;
    s.push({ message: m1 });
    s.push({ message: m3 }); // seq 2 missing: filled by a sync before 3 is delivered
    s.push({ reaction: { conversationId: 'g:1', seq: 3, version: 1, reactions: [{ emoji: '👍', count: 1 }] } });
    await waitFor(() => order.length === 4);
    expect(order).toEqual(['m1', 'm2', 'm3', 'r3']);
  });

  it('catches up on reactions after reconnecting, from the version held, page by page', async () => {
    const srv = new FakeServer();
    srv.store('g:1', 'alice', 'one');
    srv.store('g:2', 'alice', 'other');
    srv.convExtra.set('g:1', { reactionVersion: 7 });
    srv.convExtra.set('g:2', { reactionVersion: 30 });
    const changes: ReactionUpdate[] = [4, 5, 6, 7, 9].map((version, i) => ({ conversationId: 'g:1', seq: 1, version, personal: true, reactions: [{ emoji: 'e' + i, count: 1 }] }));
    srv.hook = (s, f) => {
      if (!f.syncReactions) return false;
      const after = Number(f.syncReactions.afterVersion ?? 0);
      const all = changes.filter((u) => u.version! > after && u.version! <= Number(srv.convExtra.get('g:1')!.reactionVersion));
      const page = all.slice(0, 2);
      s.push({ id: f.id, reactions: { conversationId: 'g:1', updates: page, hasMore: all.length > 2, version: srv.convExtra.get('g:1')!.reactionVersion } });
      return true;
    };
    // g:1 held at version 3; g:2 never seen: it starts at the server's version, without a sync.
    const c = client(srv, { reactionVersions: { 'g:1': 3 }, cursors: { 'g:1': 1, 'g:2': 1 } });
    const got: number[] = [];
    c.on('reaction', (u) => got.push(u.version!));
    await c.waitReady(2000);
    expect(got).toEqual([4, 5, 6, 7]);
    expect(srv.frames.filter((f) => f.syncReactions).map((f) => [f.syncReactions!.conversationId, Number(f.syncReactions!.afterVersion)])).toEqual([
      ['g:1', 3],
      ['g:1', 5],
    ]);
    expect(c.reactionVersions()).toEqual({ 'g:1': 7, 'g:2': 30 });

    // While away a reaction changed: the next catch-up asks from 7.
    srv.convExtra.get('g:1')!.reactionVersion = 9;
    srv.dropAll();
    await waitFor(() => got.length === 5, 3000, 'the change made while away');
    expect(got.at(-1)).toBe(9);
    expect(c.reactionVersions()['g:1']).toBe(9);
    expect(srv.frames.filter((f) => f.syncReactions).map((f) => Number(f.syncReactions!.afterVersion))).toEqual([3, 5, 7]);

    // Nothing changed: no sync at all on the next reconnect.
    srv.dropAll();
    await waitFor(() => srv.sockets.length === 3 && c.state === 'ready', 3000);
    expect(srv.frames.filter((f) => f.syncReactions)).toHaveLength(3);
  });

  it('a conversation first seen by a push has all its reaction changes synced after a reconnect', async () => {
    const srv = new FakeServer();
    srv.hook = (s, f) => {
      if (!f.syncReactions) return false;
      s.push({ id: f.id, reactions: { conversationId: f.syncReactions.conversationId, updates: [{ conversationId: 'g:9', seq: 1, version: 2, personal: true }], version: 2 } });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    const m = srv.store('g:9', 'alice', 'new group');
    srv.live[0]!.push({ message: m });
    await waitFor(() => c.cursor('g:9') === 1);
    expect(c.reactionVersions()['g:9']).toBe(0);
    srv.convExtra.set('g:9', { reactionVersion: 2 });
    srv.dropAll();
    await waitFor(() => c.reactionVersions()['g:9'] === 2, 3000);
    expect(srv.frames.find((f) => f.syncReactions)!.syncReactions).toMatchObject({ conversationId: 'g:9', afterVersion: 0 });
  });

  it('does not sync reactions with syncReactions: false', async () => {
    const srv = new FakeServer();
    srv.store('g:1', 'alice', 'one');
    srv.convExtra.set('g:1', { reactionVersion: 7 });
    const c = client(srv, { reactionVersions: { 'g:1': 3 }, syncReactions: false });
    await c.waitReady(2000);
    expect(srv.frames.filter((f) => f.syncReactions)).toHaveLength(0);
  });

  it('pin and unpin send Pin with a clientMsgId; a retry that finds it done resolves null', async () => {
    const srv = new FakeServer();
    let drop = 1;
    srv.hook = (s, f) => {
      if (!f.pin) return false;
      if (f.pin.unpin && drop-- > 0) {
        srv.dropAll(); // the unpin is applied, its answer lost
        return true;
      }
      if (f.pin.unpin && srv.frames.filter((x) => x.pin?.unpin).length > 1) {
        s.push({ id: f.id, error: { code: 'ERROR_CODE_CONFLICT', temporary: false } });
        return true;
      }
      s.push({ id: f.id, sendAck: { clientMsgId: f.pin.clientMsgId!, conversationId: f.pin.conversationId, seq: 10, messageId: '77' } });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    const ack = await c.pin('g:1', 4);
    expect(ack!.seq).toBe(10);
    expect(await c.unpin('g:1', 4)).toBeNull();
    const pins = srv.frames.filter((f) => f.pin).map((f) => f.pin!);
    expect(pins[0]).toMatchObject({ conversationId: 'g:1', seq: 4 });
    expect(pins[0]!.unpin).toBeUndefined();
    expect(pins[1]).toMatchObject({ seq: 4, unpin: true });
    expect(pins[2]!.clientMsgId).toBe(pins[1]!.clientMsgId); // the retry is the same request
  });

  it('a refused pin rejects at once', async () => {
    const srv = new FakeServer();
    srv.hook = (s, f) => {
      if (!f.pin) return false;
      s.push({ id: f.id, error: { code: 'ERROR_CODE_CONFLICT', temporary: false } });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    const err = await c.pin('g:1', 4).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ParleyError);
    expect((err as ParleyError).code).toBe('ERROR_CODE_CONFLICT');
  });

  it('threadHistory and syncThread page a thread', async () => {
    const srv = new FakeServer();
    srv.hook = (s, f) => {
      if (!f.threadHistory) return false;
      s.push({ id: f.id, messages: { conversationId: 'g:1', messages: [{ conversationId: 'g:1', seq: 8, threadRoot: 2 }], lastSeq: 9 } });
      return true;
    };
    const c = client(srv);
    await c.waitReady(2000);
    const p = await c.threadHistory('g:1', 2);
    expect(p.messages![0]!.threadRoot).toBe(2);
    await c.threadHistory('g:1', 2, 8, 10);
    await c.syncThread('g:1', 2, 5);
    expect(srv.frames.filter((f) => f.threadHistory).map((f) => f.threadHistory)).toEqual([
      { conversationId: 'g:1', rootSeq: 2, beforeSeq: 0, limit: 30 },
      { conversationId: 'g:1', rootSeq: 2, beforeSeq: 8, limit: 10 },
      { conversationId: 'g:1', rootSeq: 2, afterSeq: 5 },
    ]);
  });

  it('streams: open, append in order, finish; chunks pushed to a member are events', async () => {
    const srv = new FakeServer();
    srv.hook = (s, f) => {
      if (f.streamOpen) s.push({ id: f.id, streamOpened: { streamId: 'st-1', conversationId: f.streamOpen.conversationId ?? 'p:alice:bob' } });
      else if (f.streamAppend) s.push({ id: f.id, ok: {} });
      else if (f.streamFinish) s.push({ id: f.id, sendAck: { clientMsgId: 'c', conversationId: 'g:1', seq: 12, messageId: '5' } });
      else return false;
      return true;
    };
    const c = client(srv);
    const chunks: StreamChunk[] = [];
    c.on('streamChunk', (ch) => chunks.push(ch));
    await c.waitReady(2000);
    const st = await c.openStream({ conversationId: 'g:1', replyTo: 3, threadRoot: 2 });
    expect(st.streamId).toBe('st-1');
    expect(st.conversationId).toBe('g:1');
    await Promise.all([st.append('Hel'), st.append('lo, '), st.append('wörld')]);
    expect(st.length).toBe(13);
    const ack = await st.finish();
    expect(ack.seq).toBe(12);
    expect(await st.finish()).toBe(ack); // once
    await expect(st.append('more')).rejects.toThrow(/finished/);
    const open = srv.frames.find((f) => f.streamOpen)!.streamOpen!;
    expect(open).toMatchObject({ conversationId: 'g:1', replyTo: 3, threadRoot: 2 });
    expect(open.clientMsgId).toBe(st.clientMsgId);
    expect(srv.frames.filter((f) => f.streamAppend).map((f) => f.streamAppend!.text)).toEqual(['Hel', 'lo, ', 'wörld']);
    expect(srv.frames.filter((f) => f.streamFinish)).toEqual([expect.objectContaining({ streamFinish: { streamId: 'st-1' } })]);

    const ab = await c.openStream({ to: 'alice' });
    await ab.abandon();
    expect(srv.frames.filter((f) => f.streamFinish).at(-1)!.streamFinish).toEqual({ streamId: 'st-1', abandon: true });

    srv.live[0]!.push({ streamChunk: { streamId: 'st-9', conversationId: 'g:1', from: 'bot', offset: 0, text: 'Hi' } });
    await waitFor(() => chunks.length === 1);
    expect(chunks[0]).toMatchObject({ streamId: 'st-9', from: 'bot', offset: 0, text: 'Hi' });
  });
});

describe('applyReaction', () => {
  const up = (version: number, reactions: ReactionUpdate['reactions'], personal = false): ReactionUpdate => ({ conversationId: 'g:1', seq: 1, version, reactions, personal });

  it('keeps the higher version and takes me only from personal updates', () => {
    const m: Message = { conversationId: 'g:1', seq: 1, reactions: [{ emoji: '👍', count: 1, me: true }], reactionVersion: 3 };
    expect(applyReaction(m, up(2, [{ emoji: '👍', count: 5 }]))).toBe(false); // older
    expect(m.reactions).toEqual([{ emoji: '👍', count: 1, me: true }]);
    // Someone else reacted: counts change, my 👍 stays mine.
    expect(applyReaction(m, up(4, [{ emoji: '👍', count: 2 }, { emoji: '❤️', count: 1, me: true }]))).toBe(true);
    expect(m.reactions).toEqual([{ emoji: '👍', count: 2, me: true }, { emoji: '❤️', count: 1 }]);
    expect(m.reactionVersion).toBe(4);
    // The same version again: nothing, unless personal.
    expect(applyReaction(m, up(4, [{ emoji: '👍', count: 2 }]))).toBe(false);
    // My own ❤️ answered after the broadcast of the same version.
    expect(applyReaction(m, up(4, [{ emoji: '👍', count: 2, me: true }, { emoji: '❤️', count: 1, me: true }], true))).toBe(true);
    expect(m.reactions).toEqual([{ emoji: '👍', count: 2, me: true }, { emoji: '❤️', count: 1, me: true }]);
    // I took 👍 back on another device (personal), then everything went.
    expect(applyReaction(m, up(6, [{ emoji: '👍', count: 1 }, { emoji: '❤️', count: 1, me: true }], true))).toBe(true);
    expect(m.reactions).toEqual([{ emoji: '👍', count: 1 }, { emoji: '❤️', count: 1, me: true }]);
    expect(applyReaction(m, up(7, []))).toBe(true);
    expect(m.reactions).toBeUndefined();
    expect(m.reactionVersion).toBe(7);
  });

  it('mentionsUser: by name or everyone, never the sender', () => {
    expect(mentionsUser({ from: 'a', mentions: ['b'] }, 'b')).toBe(true);
    expect(mentionsUser({ from: 'a', mentions: ['c'] }, 'b')).toBe(false);
    expect(mentionsUser({ from: 'a', mentionAll: true }, 'b')).toBe(true);
    expect(mentionsUser({ from: 'b', mentionAll: true }, 'b')).toBe(false);
    expect(mentionsUser({ from: 'a' }, 'b')).toBe(false);
  });
});

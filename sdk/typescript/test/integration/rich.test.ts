import { afterAll, afterEach, beforeAll, describe, expect, it, inject } from 'vitest';
import {
  ParleyError,
  applyReaction,
  directConversationId,
  mentionsUser,
  text,
  type Message,
  type ReactionUpdate,
  type StreamChunk,
} from '../../src/index.js';
import { startServer, waitFor, type RunningServer } from '../helpers/server.js';
import { closeClients, connect, inbox, newUser, type TestUser } from '../helpers/users.js';

// Rich messages (docs/rich-messages.md) against a real server: replies,
// mentions, reactions, pins, threads and streamed messages.
let srv: RunningServer;
beforeAll(async () => {
  srv = await startServer(inject('parleyBin'));
});
afterAll(async () => {
  await srv?.dispose();
});
afterEach(() => closeClients());

/** A request to the admin API with the server's admin key; resolves with the JSON answer. */
async function admin<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const res = await fetch(srv.http + path, {
    method,
    headers: { 'X-Api-Key': srv.adminKey(), ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const out = (await res.json().catch(() => ({}))) as T;
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(out)}`);
  return out;
}

/** Gives a user the bot role (they may stream messages). */
async function makeBot(u: TestUser): Promise<void> {
  await admin('PATCH', `/v1/admin/users/${encodeURIComponent(u.id)}`, { bot: true });
}

async function rejection(p: Promise<unknown>): Promise<ParleyError> {
  const err = await p.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ParleyError);
  return err as ParleyError;
}

const normal = (got: Message[]) => got.filter((m) => (m.kind ?? 'MESSAGE_KIND_NORMAL') === 'MESSAGE_KIND_NORMAL');

describe('rich messages against a real server', () => {
  it('a reply carries the original as a preview, live and in pages; a recalled original shows as recalled', async () => {
    const [alice, bob] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob')]);
    const a = connect(srv, alice);
    const b = connect(srv, bob);
    const aGot = inbox(a);
    await Promise.all([a.waitReady(5000), b.waitReady(5000)]);
    const conv = directConversationId(alice.id, bob.id);
    const long = 'é'.repeat(200); // 400 bytes: the snippet is cut at 256, on a character boundary
    const orig = await a.sendText(bob.id, long);
    const reply = await b.sendText(conv, 'answering that', { replyTo: orig.seq });
    await waitFor(() => aGot.some((m) => m.seq === reply.seq), 5000, 'alice gets the reply');
    const live = aGot.find((m) => m.seq === reply.seq)!;
    expect(live.replyTo).toBe(orig.seq);
    expect(live.replyPreview).toMatchObject({ seq: orig.seq, from: alice.id, truncated: true });
    const snip = live.replyPreview!.snippet!;
    expect(snip.length).toBeLessThanOrEqual(256);
    expect(text(snip)).toBe('é'.repeat(128));

    await a.recall(conv, orig.seq);
    const page = await b.history(conv, 0, 10);
    const again = page.messages!.find((m) => m.seq === reply.seq)!;
    expect(again.replyPreview).toMatchObject({ seq: orig.seq, recalled: true });
    expect(again.replyPreview!.snippet ?? new Uint8Array()).toHaveLength(0);

    // A reply to a seq that does not exist: the preview says missing (or the send is refused).
    const r2 = await b.sendText(conv, 'to nothing', { replyTo: 9999 }).then(
      (ack) => ack,
      (e: unknown) => e as ParleyError,
    );
    if (r2 instanceof ParleyError) expect(r2.code).toBe('ERROR_CODE_BAD_REQUEST');
    else expect((await b.history(conv, 0, 1)).messages!.at(-1)!.replyPreview).toMatchObject({ missing: true });
  });

  it('mentions: named users and everyone; unreadMentions counts them until read; who may mention everyone', async () => {
    const [ann, ben, cat, out] = await Promise.all(['ann', 'ben', 'cat', 'out'].map((n) => newUser(srv, n)));
    const a = connect(srv, ann!);
    const b = connect(srv, ben!);
    const c = connect(srv, cat!);
    const bGot = inbox(b);
    await Promise.all([a.waitReady(5000), b.waitReady(5000), c.waitReady(5000)]);
    const g = await a.createGroup({ name: 'mentions', userIds: [ben!.id, cat!.id] });
    const gid = g.conversationId;
    const m1 = await a.sendText(gid, `hey @${ben!.id}`, { mentions: [ben!.id] });
    await waitFor(() => bGot.some((m) => m.seq === m1.seq), 5000, 'ben gets it');
    const got = bGot.find((m) => m.seq === m1.seq)!;
    expect(got.mentions).toEqual([ben!.id]);
    expect(mentionsUser(got, ben!.id)).toBe(true);
    expect(mentionsUser(got, cat!.id)).toBe(false);
    const m2 = await a.sendText(gid, '@all lunch?', { mentionAll: true });
    await waitFor(() => bGot.some((m) => m.seq === m2.seq), 5000);
    expect(bGot.find((m) => m.seq === m2.seq)!.mentionAll).toBe(true);

    const unread = async (cl: typeof a) => (await cl.conversations()).find((x) => x.conversationId === gid)?.unreadMentions ?? 0;
    expect(await unread(b)).toBe(2);
    expect(await unread(c)).toBe(1);
    expect(await unread(a)).toBe(0); // not one's own
    await b.setConversation(gid, { muted: true });
    expect(await unread(b)).toBe(2); // counted even when muted
    await b.markRead(gid, m2.seq);
    await waitFor(async () => (await unread(b)) === 0, 5000, 'read: no unread mentions');

    // A plain member may not mention everyone, unless the group allows it.
    expect((await rejection(c.sendText(gid, '@all?', { mentionAll: true }))).code).toBe('ERROR_CODE_PERMISSION_DENIED');
    const upd = await a.updateGroup({ conversationId: gid, membersMentionAll: true });
    expect(upd.membersMentionAll).toBe(true);
    await c.sendText(gid, '@all now I can', { mentionAll: true });
    // Mentioning someone who cannot read the conversation is refused.
    expect((await rejection(a.sendText(gid, 'hi outsider', { mentions: [out!.id] }))).code).toBe('ERROR_CODE_BAD_REQUEST');
  });

  it('reactions: the reactor gets a personal answer, members a live update, pages carry them; a reconnect catches up', async () => {
    const [alice, bob] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob')]);
    const a = connect(srv, alice);
    const a2 = connect(srv, alice, { deviceId: 'alice-phone', deviceType: 'phone' });
    let b = connect(srv, bob);
    const bGot = inbox(b);
    const bReact: ReactionUpdate[] = [];
    const a2React: ReactionUpdate[] = [];
    b.on('reaction', (u) => bReact.push(u));
    a2.on('reaction', (u) => a2React.push(u));
    await Promise.all([a.waitReady(5000), a2.waitReady(5000), b.waitReady(5000)]);
    const conv = directConversationId(alice.id, bob.id);
    const ack = await a.sendText(bob.id, 'react to me');
    await waitFor(() => bGot.some((m) => m.seq === ack.seq), 5000);
    const bobsCopy = bGot.find((m) => m.seq === ack.seq)!;

    const mine = await a.react(conv, ack.seq, '👍');
    expect(mine).toMatchObject({ conversationId: conv, seq: ack.seq, personal: true });
    expect(mine.reactions).toEqual([{ emoji: '👍', count: 1, me: true }]);
    expect(mine.version).toBeGreaterThan(0);
    // Bob's device: a non-personal update; alice's phone: a personal one.
    await waitFor(() => bReact.some((u) => u.seq === ack.seq && u.reactions?.[0]?.count === 1), 5000, 'bob sees the 👍');
    expect(bReact.at(-1)!.personal).toBeFalsy();
    await waitFor(() => a2React.some((u) => u.personal && u.reactions?.[0]?.me), 5000, "alice's phone sees her 👍 as hers");
    for (const u of bReact) applyReaction(bobsCopy, u);
    expect(bobsCopy.reactions).toEqual([{ emoji: '👍', count: 1 }]);

    // Again: idempotent.
    const same = await a.react(conv, ack.seq, '👍');
    expect(same.reactions).toEqual([{ emoji: '👍', count: 1, me: true }]);
    expect(same.version).toBe(mine.version);

    const bobs = await b.react(conv, ack.seq, '👍');
    expect(bobs.reactions).toEqual([{ emoji: '👍', count: 2, me: true }]);
    applyReaction(bobsCopy, bobs);
    expect(bobsCopy.reactions).toEqual([{ emoji: '👍', count: 2, me: true }]);

    // Pages carry the counts with `me` for the reader.
    const aPage = await a.history(conv, 0, 5);
    const inPage = aPage.messages!.find((m) => m.seq === ack.seq)!;
    expect(inPage.reactions).toEqual([{ emoji: '👍', count: 2, me: true }]);
    expect(inPage.reactionVersion).toBe(bobs.version);

    // Bob goes away; alice reacts meanwhile; bob's catch-up brings it (personal).
    const cursors = b.cursors();
    const versions = b.reactionVersions();
    expect(versions[conv]).toBeDefined();
    b.close();
    const heart = await a.react(conv, ack.seq, '❤️');
    await a.unreact(conv, ack.seq, '👍');
    const list = await a.conversations();
    expect(list.find((x) => x.conversationId === conv)!.reactionVersion).toBeGreaterThan(heart.version!);
    b = connect(srv, bob, { cursors, reactionVersions: versions });
    const caught: ReactionUpdate[] = [];
    b.on('reaction', (u) => caught.push(u));
    await b.waitReady(5000);
    expect(caught.length).toBeGreaterThan(0);
    for (const u of caught) {
      expect(u.personal).toBe(true);
      applyReaction(bobsCopy, u);
    }
    expect(bobsCopy.reactions).toEqual([
      { emoji: '👍', count: 1, me: true },
      { emoji: '❤️', count: 1 },
    ]);
    expect(b.reactionVersions()[conv]).toBeGreaterThan(versions[conv]!);

    // syncReactions by hand: everything since 0.
    const all = await b.syncReactions(conv, 0);
    expect(all.updates!.map((u) => u.seq)).toEqual([ack.seq]);
    expect(all.version).toBe(b.reactionVersions()[conv]);

    // At most 20 distinct emojis per message; bad emojis are refused.
    for (let i = 0; i < 18; i++) await a.react(conv, ack.seq, 'e' + i);
    expect((await rejection(a.react(conv, ack.seq, 'one-too-many'))).code).toBe('ERROR_CODE_TOO_LARGE');
    expect((await rejection(a.react(conv, ack.seq, 'has space'))).code).toBe('ERROR_CODE_BAD_REQUEST');
    expect((await rejection(a.react(conv, ack.seq, 'x'.repeat(33)))).code).toBe('ERROR_CODE_BAD_REQUEST');
  });

  it('pins: either side of a 1:1, the owner and admins of a group; an event for members; listed in the conversation', async () => {
    const [alice, bob, carol] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob'), newUser(srv, 'carol')]);
    const a = connect(srv, alice);
    const b = connect(srv, bob);
    const c = connect(srv, carol);
    const bGot = inbox(b);
    const cGot = inbox(c);
    await Promise.all([a.waitReady(5000), b.waitReady(5000), c.waitReady(5000)]);
    const conv = directConversationId(alice.id, bob.id);
    const m = await a.sendText(bob.id, 'pin me');
    const pinAck = await b.pin(conv, m.seq);
    expect(pinAck!.seq).toBe(m.seq + 1);
    const pinsOf = async (cl: typeof a, id: string) => (await cl.conversations()).find((x) => x.conversationId === id)?.pins ?? [];
    expect(await pinsOf(a, conv)).toEqual([expect.objectContaining({ seq: m.seq, pinnedBy: bob.id })]);
    expect((await pinsOf(a, conv))[0]!.pinnedAt).toBeGreaterThan(0);
    expect((await rejection(a.pin(conv, m.seq))).code).toBe('ERROR_CODE_CONFLICT');
    const unpinAck = await a.unpin(conv, m.seq);
    expect(unpinAck!.seq).toBe(m.seq + 2);
    expect(await pinsOf(b, conv)).toEqual([]);
    // Bob's session made the pin: it gets only alice's unpin back.
    await waitFor(() => bGot.some((x) => x.kind === 'MESSAGE_KIND_UNPINNED'), 5000, 'bob sees the unpin');
    expect(bGot.find((x) => x.kind === 'MESSAGE_KIND_UNPINNED')!.event?.targetSeq).toBe(m.seq);

    const g = await a.createGroup({ name: 'pins', userIds: [bob.id, carol.id] });
    const gm = await c.sendText(g.conversationId, 'a member’s message');
    expect((await rejection(c.pin(g.conversationId, gm.seq))).code).toBe('ERROR_CODE_PERMISSION_DENIED');
    await a.pin(g.conversationId, gm.seq);
    await waitFor(() => cGot.some((x) => x.kind === 'MESSAGE_KIND_PINNED' && x.event?.targetSeq === gm.seq && x.from === alice.id), 5000, 'carol sees the pin');
    await a.setRole(g.conversationId, bob.id, 'GROUP_ROLE_ADMIN');
    await b.unpin(g.conversationId, gm.seq);
    expect(await pinsOf(c, g.conversationId)).toEqual([]);
  });

  it('threads: replies reach members live with threadRoot; the root carries a summary; threadHistory pages the replies', async () => {
    const [ann, ben, cat] = await Promise.all(['ann', 'ben', 'cat'].map((n) => newUser(srv, n)));
    const a = connect(srv, ann!);
    const b = connect(srv, ben!);
    const c = connect(srv, cat!);
    const cGot = inbox(c);
    await Promise.all([a.waitReady(5000), b.waitReady(5000), c.waitReady(5000)]);
    const gid = (await a.createGroup({ name: 'threads', userIds: [ben!.id, cat!.id] })).conversationId;
    const root = await a.sendText(gid, 'thread root');
    const r1 = await b.sendText(gid, 'first reply', { threadRoot: root.seq });
    await a.sendText(gid, 'in the main timeline');
    const r2 = await c.sendText(gid, 'second reply', { threadRoot: root.seq });
    await waitFor(() => cGot.some((m) => m.seq === r1.seq), 5000, 'cat gets the reply live');
    expect(cGot.find((m) => m.seq === r1.seq)!.threadRoot).toBe(root.seq);

    const page = await b.history(gid, 0, 20);
    const rootMsg = page.messages!.find((m) => m.seq === root.seq)!;
    expect(rootMsg.thread).toMatchObject({ replyCount: 2, lastReplySeq: r2.seq });
    expect(rootMsg.thread!.lastReplyAt).toBeGreaterThan(0);
    expect(page.messages!.find((m) => m.seq === r2.seq)?.threadRoot).toBe(root.seq);

    const th = await c.threadHistory(gid, root.seq);
    expect(th.messages!.map((m) => text(m.payload))).toEqual(['first reply', 'second reply']);
    const older = await c.threadHistory(gid, root.seq, r2.seq, 10);
    expect(older.messages!.map((m) => m.seq)).toEqual([r1.seq]);
    const newer = await c.syncThread(gid, root.seq, r1.seq);
    expect(newer.messages!.map((m) => m.seq)).toEqual([r2.seq]);

    // A thread reply cannot be a root.
    expect((await rejection(a.sendText(gid, 'nested', { threadRoot: r1.seq }))).code).toBe('ERROR_CODE_BAD_REQUEST');
  });

  it('streams: a bot streams a message; members online see the chunks, then the stored message; only bots may', async () => {
    const [botUser, bob, carol] = await Promise.all([newUser(srv, 'bot'), newUser(srv, 'bob'), newUser(srv, 'carol')]);
    await makeBot(botUser);
    const bot = connect(srv, botUser);
    const b = connect(srv, bob);
    const bGot = inbox(b);
    const chunks: StreamChunk[] = [];
    b.on('streamChunk', (ch) => chunks.push(ch));
    await Promise.all([bot.waitReady(5000), b.waitReady(5000)]);
    const conv = directConversationId(botUser.id, bob.id);
    const first = await bot.sendText(bob.id, 'question?');

    const st = await bot.openStream({ to: bob.id, replyTo: first.seq });
    expect(st.conversationId).toBe(conv);
    expect(st.streamId).not.toBe('');
    const parts = ['The ', 'answer ', 'is ', '42, ', 'naïvely.'];
    for (const p of parts) await st.append(p);
    await waitFor(() => chunks.length === parts.length, 5000, 'bob sees every chunk');
    expect(chunks.map((ch) => ch.text).join('')).toBe(parts.join(''));
    expect(chunks.every((ch) => ch.streamId === st.streamId && ch.from === botUser.id && ch.conversationId === conv)).toBe(true);
    let off = 0;
    for (const ch of chunks) {
      expect(ch.offset ?? 0).toBe(off);
      off += new TextEncoder().encode(ch.text ?? '').length;
    }
    const ack = await st.finish();
    await waitFor(() => bGot.some((m) => m.seq === ack.seq), 5000, 'the stored message');
    const stored = bGot.find((m) => m.seq === ack.seq)!;
    expect(stored.streamId).toBe(st.streamId);
    expect(text(stored.payload)).toBe(parts.join(''));
    expect(stored.replyTo).toBe(first.seq);
    expect(stored.incomplete).toBeFalsy();

    const ab = await bot.openStream({ to: bob.id });
    await ab.append('half a tho');
    const abAck = await ab.abandon();
    await waitFor(() => bGot.some((m) => m.seq === abAck.seq), 5000);
    const abandoned = bGot.find((m) => m.seq === abAck.seq)!;
    expect(abandoned.incomplete).toBe(true);
    expect(text(abandoned.payload)).toBe('half a tho');
    expect(normal(bGot).map((m) => m.seq)).toEqual([first.seq, ack.seq, abAck.seq]);

    // Not a bot: refused.
    const c = connect(srv, carol);
    await c.waitReady(5000);
    expect((await rejection(c.openStream({ to: bob.id }))).code).toBe('ERROR_CODE_PERMISSION_DENIED');
  });

  it('a stream its bot stops appending to is stored as it is, marked incomplete, after stream_idle_timeout', async () => {
    const local = await startServer(inject('parleyBin'), undefined, { config: 'stream_idle_timeout: 1s\n' });
    try {
      const botUser = await newUser(local, 'bot');
      const bob = await newUser(local, 'bob');
      const res = await fetch(`${local.http}/v1/admin/users/${encodeURIComponent(botUser.id)}`, {
        method: 'PATCH',
        headers: { 'X-Api-Key': local.adminKey(), 'Content-Type': 'application/json' },
        body: JSON.stringify({ bot: true }),
      });
      expect(res.ok).toBe(true);
      const bot = connect(local, botUser);
      const b = connect(local, bob);
      const bGot = inbox(b);
      await Promise.all([bot.waitReady(5000), b.waitReady(5000)]);
      const st = await bot.openStream({ to: bob.id });
      await st.append('cut short');
      const stored = await waitFor(() => bGot.find((m) => m.streamId === st.streamId), 8000, 'the timed-out stream stored');
      expect(stored.incomplete).toBe(true);
      expect(text(stored.payload)).toBe('cut short');
      // The stream is gone: appending or finishing it is refused.
      expect((await rejection(st.append('more'))).code).toBe('ERROR_CODE_BAD_REQUEST');
    } finally {
      closeClients();
      await local.dispose();
    }
  });
});

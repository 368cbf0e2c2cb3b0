import { afterAll, afterEach, beforeAll, describe, expect, it, inject } from 'vitest';
import { text } from '../../src/index.js';
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

describe('groups, contacts and rooms against a real server', () => {
  it('a group: create, messages to every member in order, read counts, members, admin actions', async () => {
    const [alice, bob, carol, dave] = await Promise.all(['alice', 'bob', 'carol', 'dave'].map((n) => newUser(srv, n)));
    const a = connect(srv, alice!);
    const b = connect(srv, bob!);
    const c = connect(srv, carol!);
    const bGot = inbox(b);
    const cGot = inbox(c);
    await Promise.all([a.waitReady(5000), b.waitReady(5000), c.waitReady(5000)]);

    const g = await a.createGroup({ name: 'trip', userIds: [bob!.id, carol!.id] });
    expect(g.conversationId).toMatch(/^g:[0-9a-f]{16}$/);
    expect(g.memberCount).toBe(3);
    const gid = g.conversationId;
    await waitFor(() => bGot.some((m) => m.kind === 'MESSAGE_KIND_GROUP_CREATED'), 5000, 'creation event');

    const s1 = await a.sendText(gid, 'from alice');
    const s2 = await b.sendText(gid, 'from bob');
    expect(s2.seq).toBe(s1.seq + 1);
    await waitFor(() => cGot.filter((m) => m.kind === 'MESSAGE_KIND_NORMAL').length === 2, 5000, 'carol gets both');
    expect(cGot.map((m) => m.seq)).toEqual([1, 2, 3]);
    expect(cGot.slice(1).map((m) => text(m.payload))).toEqual(['from alice', 'from bob']);
    // Bob does not get his own message back, only alice's.
    await waitFor(() => bGot.some((m) => m.seq === s1.seq), 5000);

    await c.markRead(gid, s2.seq);
    await waitFor(async () => {
      const counts = await a.readCounts(gid, [s1.seq]);
      return counts[0]!.count === 2 && counts[0]!.readers!.sort().join() === [bob!.id, carol!.id].sort().join();
    }, 5000, 'read by bob (sender of a later message) and carol');

    await a.addMembers(gid, [dave!.id]);
    const members = await a.allMembers(gid);
    expect(members.map((m) => m.userId).sort()).toEqual([alice!.id, bob!.id, carol!.id, dave!.id].sort());
    expect(members.find((m) => m.userId === alice!.id)!.role).toBe('GROUP_ROLE_OWNER');
    await waitFor(() => cGot.some((m) => m.kind === 'MESSAGE_KIND_MEMBERS_ADDED' && m.event?.userIds?.includes(dave!.id)), 5000);

    await a.setRole(gid, bob!.id, 'GROUP_ROLE_ADMIN');
    const upd = await b.updateGroup({ conversationId: gid, name: 'trip 2026' });
    expect(upd.name).toBe('trip 2026');
    await a.muteMember(gid, carol!.id, 60);
    await expect(c.sendText(gid, 'muted?')).rejects.toMatchObject({ code: 'ERROR_CODE_MUTED' });

    // The admin recalls a plain member's message at any time; the owner leaves only after a transfer.
    const d = connect(srv, dave!);
    await d.waitReady(5000);
    const dm = await d.sendText(gid, 'from dave');
    expect(await b.recall(gid, dm.seq)).not.toBeNull();
    await expect(a.leaveGroup(gid)).rejects.toMatchObject({ code: 'ERROR_CODE_CONFLICT' });
    await a.transferOwnership(gid, bob!.id);
    await a.leaveGroup(gid);
    expect((await b.getGroup(gid)).owner).toBe(bob!.id);
    const list = await a.conversations();
    expect(list.find((x) => x.conversationId === gid)?.left).toBe(true);
    await b.dissolveGroup(gid);
    await expect(b.sendText(gid, 'anyone?')).rejects.toMatchObject({ code: 'ERROR_CODE_CONFLICT' });
  });

  it('open groups can be joined; non-members are refused without a hint', async () => {
    const [alice, erin] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'erin')]);
    const a = connect(srv, alice);
    const e = connect(srv, erin);
    await Promise.all([a.waitReady(5000), e.waitReady(5000)]);
    const g = await a.createGroup({ name: 'open', openJoin: true });
    const closed = await a.createGroup({ name: 'closed' });
    await expect(e.sendText(closed.conversationId, 'let me in')).rejects.toMatchObject({ code: 'ERROR_CODE_PERMISSION_DENIED', temporary: false });
    await expect(e.history('g:0000000000000000')).rejects.toMatchObject({ code: 'ERROR_CODE_PERMISSION_DENIED' });
    const joined = await e.joinGroup(g.conversationId);
    expect(joined.memberCount).toBe(2);
    expect((await e.sendText(g.conversationId, 'hi all')).seq).toBeGreaterThan(1);
  });

  it('contacts: request, accept, list, remove, block', async () => {
    const [alice, bob] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob')]);
    const a = connect(srv, alice);
    const b = connect(srv, bob);
    const bEvents: { userId: string; state?: string }[] = [];
    const aEvents: { userId: string; state?: string }[] = [];
    b.on('contact', (x) => bEvents.push(x));
    a.on('contact', (x) => aEvents.push(x));
    await Promise.all([a.waitReady(5000), b.waitReady(5000)]);
    await a.friendRequest(bob.id, 'hi from alice');
    await waitFor(() => bEvents.some((x) => x.userId === alice.id && x.state === 'CONTACT_STATE_REQUEST_RECEIVED'), 5000);
    await b.respondFriend(alice.id, true);
    await waitFor(() => aEvents.some((x) => x.userId === bob.id && x.state === 'CONTACT_STATE_FRIEND'), 5000);
    expect((await a.listContacts()).contacts!.map((x) => [x.userId, x.state])).toEqual([[bob.id, 'CONTACT_STATE_FRIEND']]);
    await a.removeFriend(bob.id);
    expect((await a.listContacts()).contacts ?? []).toEqual([]);
    await b.block(alice.id);
    await expect(a.sendText(bob.id, 'hello?')).rejects.toMatchObject({ code: 'ERROR_CODE_PERMISSION_DENIED' });
    expect((await b.listContacts()).blocked).toEqual([alice.id]);
    await b.unblock(alice.id);
    expect((await a.sendText(bob.id, 'hello again')).seq).toBe(1);
    await a.setConversation(`p:${[alice.id, bob.id].sort().join(':')}`, { pinned: true });
    expect((await a.conversations())[0]!.pinned).toBe(true);
  });

  it('rooms: joined rooms get pushes, and are joined again after a reconnect', async () => {
    const alice = await newUser(srv, 'alice');
    const a = connect(srv, alice);
    const pushes: string[] = [];
    a.on('push', (p) => pushes.push(`${p.room}:${p.op}:${text(p.body)}`));
    await a.waitReady(5000);
    const info = await a.joinRoom('live:42');
    expect(info.online).toBeGreaterThanOrEqual(1);
    const push = async (body: string) => {
      const res = await fetch(`${srv.http}/v1/admin/push/room?room=live:42&op=7`, { method: 'POST', headers: { 'X-Api-Key': srv.adminKey() }, body });
      expect(res.status).toBe(200);
      return ((await res.json()) as { pushed: number }).pushed;
    };
    expect(await push('gift')).toBe(1);
    await waitFor(() => pushes.includes('live:42:7:gift'), 5000);
    a.dropConnection();
    await waitFor(async () => a.state === 'ready' && (await push('again')) === 1, 5000, 'rejoined');
    await waitFor(() => pushes.includes('live:42:7:again'), 5000);
    await a.leaveRoom('live:42');
    expect(await push('gone')).toBe(0);
  });
});

// End-to-end encryption through a real Parley server: ts-mls in every
// device, the server as the MLS Delivery Service (docs/e2ee.md).
import { afterAll, afterEach, beforeAll, describe, expect, it, inject } from 'vitest';
import { enableE2EE, MemoryKeyStore, plainText, type E2EE, type E2EEMessage } from '../../src/e2ee.js';
import type { ParleyClient } from '../../src/client.js';
import { startServer, waitFor, type RunningServer } from '../helpers/server.js';
import { closeClients, connect, newUser, type TestUser } from '../helpers/users.js';

let srv: RunningServer;
beforeAll(async () => {
  srv = await startServer(inject('parleyBin'));
});
afterAll(async () => {
  await srv?.dispose();
});
afterEach(() => closeClients());

interface Device {
  user: TestUser;
  client: ParleyClient;
  e2ee: E2EE;
  store: MemoryKeyStore;
  got: E2EEMessage[];
}

async function device(u: TestUser, n: number, store = new MemoryKeyStore()): Promise<Device> {
  const client = connect(srv, u, { deviceId: `${u.id}-d${n}`, deviceType: `node-${n}` });
  // The client's catch-up may deliver before enableE2EE resolves: the first listener gets those too.
  const e2ee = await enableE2EE(client, { store, keyPackageTarget: 5, keyPackageLow: 3 });
  const got: E2EEMessage[] = [];
  e2ee.on('message', (m) => got.push(m));
  return { user: u, client, e2ee, store, got };
}

const texts = (d: Device, conv: string) => d.got.filter((m) => m.conversationId === conv && m.plaintext).map(plainText);

async function allSee(devs: Device[], conv: string, want: string[]): Promise<void> {
  for (const d of devs) {
    await waitFor(() => want.every((w) => texts(d, conv).includes(w)), 10_000, `${d.client.device} sees ${want.join(', ')}`);
  }
}

describe('end-to-end encryption (MLS) between SDK devices', () => {
  it('two users with two devices each: an encrypted 1:1, both ways, on every device; the server stores ciphertext', async () => {
    const [alice, bob] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob')]);
    const devs = await Promise.all([device(alice!, 1), device(alice!, 2), device(bob!, 1), device(bob!, 2)]);
    const [a1, a2, b1, b2] = devs as [Device, Device, Device, Device];

    const g = await a1.e2ee.createDirect(bob!.id);
    expect(g.encrypted).toBe(true);
    const conv = g.conversationId;
    for (const d of [a2, b1, b2]) await waitFor(() => d.e2ee.isMember(conv), 10_000, `${d.client.device} joins`);
    expect((await a1.e2ee.memberDevices(conv)).sort()).toEqual([a1, a2, b1, b2].map((d) => `${d.user.id}/${d.client.device}`).sort());

    await a1.e2ee.send(conv, 'hello bob');
    await b2.e2ee.send(conv, 'hi alice');
    await a2.e2ee.send(conv, 'from my laptop');
    await allSee([a2, b1, b2], conv, ['hello bob']);
    await allSee([a1, a2, b1], conv, ['hi alice']);
    await allSee([a1, b1, b2], conv, ['from my laptop']);

    // What the server holds and serves is MLS ciphertext, not the words.
    const page = await b1.client.syncMessages(conv, 0, 100);
    const raw = page.messages!.filter((m) => m.kind === 'MESSAGE_KIND_NORMAL');
    expect(raw).toHaveLength(3);
    for (const m of raw) {
      expect(m.contentType).toBe('message/mls');
      expect(Buffer.from(m.payload!).toString('latin1')).not.toMatch(/hello|alice|laptop/);
    }
    // History comes back decrypted from the device's store.
    const h = await b1.e2ee.history(conv, 0, 50);
    expect(h.messages!.filter((m) => m.plaintext).map(plainText)).toEqual(['hello bob', 'hi alice', 'from my laptop']);
  });

  it('three users with several devices: a group; a removed member cannot decrypt later messages', async () => {
    const [alice, bob, carol] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob'), newUser(srv, 'carol')]);
    const devs = await Promise.all([device(alice!, 1), device(alice!, 2), device(bob!, 1), device(bob!, 2), device(carol!, 1), device(carol!, 2)]);
    const [a1, a2, b1, b2, c1, c2] = devs as [Device, Device, Device, Device, Device, Device];
    const g = await a1.e2ee.createGroup({ name: 'secret', userIds: [bob!.id, carol!.id] });
    const conv = g.conversationId;
    for (const d of devs.slice(1)) await waitFor(() => d.e2ee.isMember(conv), 10_000, `${d.client.device} joins`);

    await a1.e2ee.send(conv, 'one');
    await b1.e2ee.send(conv, 'two');
    await c2.e2ee.send(conv, 'three');
    for (const d of devs) {
      const own = { [a1.client.device]: 'one', [b1.client.device]: 'two', [c2.client.device]: 'three' }[d.client.device];
      await waitFor(() => ['one', 'two', 'three'].filter((w) => w !== own).every((w) => texts(d, conv).includes(w)), 10_000, `${d.client.device} gets all`);
    }

    await a1.e2ee.removeMember(conv, carol!.id);
    await waitFor(async () => (await b2.e2ee.memberDevices(conv)).length === 4, 10_000, 'bob sees carol removed');
    const ack = await b2.e2ee.send(conv, 'after carol left');
    await allSee([a1, a2, b1], conv, ['after carol left']);

    // The ciphertext, handed to carol's devices anyway, does not open.
    const later = (await a1.client.syncMessages(conv, ack.seq - 1, 1)).messages![0]!;
    expect(later.seq).toBe(ack.seq);
    for (const c of [c1, c2]) {
      await waitFor(() => c.got.some((m) => m.kind === 'MESSAGE_KIND_MEMBERS_REMOVED'), 10_000, 'carol sees her removal');
      expect(await c.e2ee.isMember(conv)).toBe(false);
      const r = await c.e2ee.decrypt(later);
      expect(r.plaintext).toBeUndefined();
      expect(r.e2eeError?.code).toMatch(/NOT_A_MEMBER|WRONG_EPOCH|INVALID/);
    }
    // And the server no longer gives it to her.
    expect((await c1.client.syncMessages(conv, ack.seq - 1, 10)).messages ?? []).toEqual([]);
  });

  it('a device offline across two epochs catches up by sync', async () => {
    const [alice, bob, carol] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob'), newUser(srv, 'carol')]);
    const a1 = await device(alice!, 1);
    const bobStore = new MemoryKeyStore();
    let b1 = await device(bob!, 1, bobStore);
    const g = await a1.e2ee.createGroup({ name: 'offline', userIds: [bob!.id] });
    const conv = g.conversationId;
    await waitFor(() => b1.e2ee.isMember(conv), 10_000, 'bob joins');
    const epoch0 = await b1.e2ee.epoch(conv);

    // Bob goes offline; two Commits and messages happen meanwhile.
    b1.e2ee.close();
    b1.client.close();
    await device(carol!, 1);
    await a1.e2ee.addMembers(conv, [carol!.id]);
    await a1.e2ee.send(conv, 'while you were away');
    await a1.e2ee.updateKeys(conv);
    await a1.e2ee.send(conv, 'two epochs later');
    expect(await a1.e2ee.epoch(conv)).toBe(epoch0 + 2);

    // Bob's device comes back with its key store: the client's catch-up feeds it the sequence.
    b1 = await device(bob!, 1, bobStore);
    await waitFor(() => texts(b1, conv).includes('two epochs later'), 10_000, 'bob catches up');
    expect(texts(b1, conv)).toEqual(['while you were away', 'two epochs later']);
    expect(await b1.e2ee.epoch(conv)).toBe(epoch0 + 2);
    await b1.e2ee.send(conv, 'back');
    await allSee([a1], conv, ['back']);
  });

  it('racing Commits from two devices: one wins, the other processes it and commits again; both converge', async () => {
    const [alice, bob] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob')]);
    const a1 = await device(alice!, 1);
    const b1 = await device(bob!, 1);
    const g = await a1.e2ee.createDirect(bob!.id);
    const conv = g.conversationId;
    await waitFor(() => b1.e2ee.isMember(conv), 10_000, 'bob joins');
    const e0 = await a1.e2ee.epoch(conv);
    expect(await b1.e2ee.epoch(conv)).toBe(e0);

    let stale = 0;
    a1.e2ee.on('staleEpoch', () => stale++);
    b1.e2ee.on('staleEpoch', () => stale++);
    // Both make their Commit in epoch e0 before either reaches the server.
    await Promise.all([a1.e2ee.updateKeys(conv), b1.e2ee.updateKeys(conv)]);
    expect(stale).toBe(1);
    await waitFor(async () => (await a1.e2ee.epoch(conv)) === e0 + 2 && (await b1.e2ee.epoch(conv)) === e0 + 2, 10_000, 'both at e0+2');
    const st = (await a1.client.request('getMlsState', { conversationId: conv })).mlsState!;
    expect(st.epoch).toBe(e0 + 2);

    await a1.e2ee.send(conv, 'after the race');
    await b1.e2ee.send(conv, 'converged');
    await allSee([b1], conv, ['after the race']);
    await allSee([a1], conv, ['converged']);
  });

  it('KeyPackages: published on enable, topped up after claims; an undecryptable message is flagged, not dropped', async () => {
    const [alice, bob] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob')]);
    const a1 = await device(alice!, 1);
    const b1 = await device(bob!, 1);
    expect((await b1.client.request('countKeyPackages', {})).keyPackageCount).toMatchObject({ count: 5, lastResort: true });
    for (let i = 0; i < 3; i++) await a1.client.request('claimKeyPackages', { userIds: [bob!.id] });
    expect((await b1.client.request('countKeyPackages', {})).keyPackageCount?.count).toBe(2);
    expect(await b1.e2ee.topUp()).toBe(5);

    const g = await a1.e2ee.createDirect(bob!.id);
    const conv = g.conversationId;
    await a1.e2ee.send(conv, 'readable');
    await waitFor(() => texts(b1, conv).includes('readable'), 10_000);
    // A valid MLS frame whose ciphertext was damaged (the server cannot tell).
    const st = (await a1.client.syncMessages(conv, 0, 100)).messages!.find((m) => m.kind === 'MESSAGE_KIND_NORMAL')!;
    const bad = st.payload!.slice();
    bad[bad.length - 3]! ^= 0xff;
    await a1.client.send({ conversationId: conv, contentType: 'message/mls', payload: bad });
    await waitFor(() => b1.got.some((m) => m.e2eeError), 10_000, 'flagged');
    const m = b1.got.find((x) => x.e2eeError)!;
    expect(m.e2eeError!.code).toBe('INVALID');
    expect(m.plaintext).toBeUndefined();
    // The group still works after it.
    await a1.e2ee.send(conv, 'still fine');
    await waitFor(() => texts(b1, conv).includes('still fine'), 10_000);
  });
});

describe('end-to-end encryption: membership moved by the server alone', () => {
  it('a member who leaves without a Commit is removed from the MLS group by one of the others (one Commit wins)', async () => {
    const [alice, bob, carol] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob'), newUser(srv, 'carol')]);
    const [a1, b1, c1] = (await Promise.all([device(alice!, 1), device(bob!, 1), device(carol!, 1)])) as [Device, Device, Device];
    const g = await a1.e2ee.createGroup({ name: 'leavers', userIds: [bob!.id, carol!.id] });
    const conv = g.conversationId;
    for (const d of [b1, c1]) await waitFor(() => d.e2ee.isMember(conv), 10_000, 'joined');
    const e0 = await a1.e2ee.epoch(conv);

    await b1.client.leaveGroup(conv);
    // Alice's and carol's devices both try to commit bob's removal; one wins, the other sees nothing left to remove.
    for (const d of [a1, c1]) {
      await waitFor(async () => (await d.e2ee.memberDevices(conv)).length === 2 && (await d.e2ee.epoch(conv)) === e0 + 1, 10_000, `${d.client.device} without bob`);
    }
    expect((await a1.client.request('getMlsState', { conversationId: conv })).mlsState!.epoch).toBe(e0 + 1);
    await c1.e2ee.send(conv, 'just us');
    await allSee([a1], conv, ['just us']);
  });

  it('a device whose client starts at the server cursor still finds its Welcome (the sequence is filled in first)', async () => {
    const [alice, bob] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob')]);
    const a1 = await device(alice!, 1);
    const bobStore = new MemoryKeyStore();
    const b1 = await device(bob!, 1, bobStore);
    // A copy of the device's keys as they were before it joined anything.
    const fresh = new MemoryKeyStore();
    for (const k of await bobStore.keys('')) await fresh.put(k, (await bobStore.get(k))!);
    const g = await a1.e2ee.createDirect(bob!.id);
    const conv = g.conversationId;
    await a1.e2ee.send(conv, 'first');
    await waitFor(() => texts(b1, conv).includes('first'), 10_000);
    b1.e2ee.close();
    b1.client.close();
    // The device again with its keys from before the group, and a client
    // that resumes at the server's delivered cursor (past the Welcome).
    const client = connect(srv, bob!, { deviceId: b1.client.device, deviceType: 'node-1', resumeFromServer: true });
    const e2ee = await enableE2EE(client, { store: fresh, keyPackageTarget: 5, keyPackageLow: 3 });
    const got: E2EEMessage[] = [];
    e2ee.on('message', (m) => got.push(m));
    await a1.e2ee.send(conv, 'second');
    await waitFor(() => got.some((m) => plainText(m) === 'second'), 10_000, 'decrypted after filling from the Welcome');
    expect(await e2ee.isMember(conv)).toBe(true);
  });
});

describe('end-to-end encryption: devices that come later', () => {
  it("a member's new device is added by addMembers with a device Commit, reads what follows, not what came before", async () => {
    const [alice, bob] = await Promise.all([newUser(srv, 'alice'), newUser(srv, 'bob')]);
    const a1 = await device(alice!, 1);
    const b1 = await device(bob!, 1);
    const g = await a1.e2ee.createDirect(bob!.id);
    const conv = g.conversationId;
    await a1.e2ee.send(conv, 'before the new phone');
    await waitFor(() => texts(b1, conv).includes('before the new phone'), 10_000);

    const b2 = await device(bob!, 2); // bob's new device: not in the MLS group yet
    await b1.e2ee.addMembers(conv, [bob!.id]); // his first device adds it (no Parley change: mlsCommit)
    await waitFor(() => b2.e2ee.isMember(conv), 10_000, 'the new device joins');
    expect(await a1.e2ee.memberDevices(conv)).toContain(`${bob!.id}/${b2.client.device}`);
    await a1.e2ee.send(conv, 'after the new phone');
    await allSee([b1, b2], conv, ['after the new phone']);
    // The earlier message is there, marked, not decrypted.
    const before = b2.got.find((m) => m.kind === 'MESSAGE_KIND_NORMAL' && !m.plaintext);
    expect(before?.e2eeError?.code).toBe('NOT_A_MEMBER');
    // Adding bob again adds nothing: no Commit, no epoch move.
    const e = await a1.e2ee.epoch(conv);
    await a1.e2ee.addMembers(conv, [bob!.id]);
    expect(await a1.e2ee.epoch(conv)).toBe(e);
  });
});

// End-to-end encryption with MLS (RFC 9420) on top of a ParleyClient; the
// model and the rules are in docs/e2ee.md. The cryptography is ts-mls's
// (MIT, a maintained RFC 9420 implementation, with @hpke/core and WebCrypto
// underneath); this file only moves its objects through Parley's frames and
// keeps the device's state in a KeyStore.
// Each module from its own path: ts-mls's index also loads its optional
// @noble provider (an extra package, and size in a browser bundle).
import { acceptAll, type IncomingMessageCallback } from 'ts-mls/incomingMessageAction.js';
import { createApplicationMessage } from 'ts-mls/createMessage.js';
import { createCommit } from 'ts-mls/createCommit.js';
import {
  createGroup as mlsCreateGroup,
  decodeGroupState,
  encodeGroupState,
  joinGroup as mlsJoinGroup,
  type ClientState as MlsState,
} from 'ts-mls/clientState.js';
import { decodeMlsMessage, encodeMlsMessage, type MLSMessage } from 'ts-mls/message.js';
import { defaultCapabilities } from 'ts-mls/defaultCapabilities.js';
import { defaultLifetime } from 'ts-mls/lifetime.js';
import { emptyPskIndex } from 'ts-mls/pskIndex.js';
import { generateKeyPackage, type KeyPackage, type PrivateKeyPackage } from 'ts-mls/keyPackage.js';
import { getCiphersuiteFromName, type CiphersuiteImpl, type CiphersuiteName } from 'ts-mls/crypto/ciphersuite.js';
import { getCiphersuiteImpl } from 'ts-mls/crypto/getCiphersuiteImpl.js';
import { processMessage } from 'ts-mls/processMessages.js';
import type { ClientConfig } from 'ts-mls/clientConfig.js';
import type { Credential } from 'ts-mls/credential.js';
import type { Proposal } from 'ts-mls/proposal.js';
import { decodeKeyPackage, encodeKeyPackage, makeKeyPackageRef } from 'ts-mls/keyPackage.js';
import { defaultClientConfig } from 'ts-mls/clientConfig.js';
import type { ParleyClient, SendOptions } from './client.js';
import { text, utf8 } from './codec.js';
import { Emitter } from './emitter.js';
import { MemoryKeyStore, type KeyStore } from './e2ee-store.js';
import type { GroupInfo, Message, MessagePage, SendAck } from './types.js';

export { MemoryKeyStore, IndexedDBKeyStore } from './e2ee-store.js';
export type { KeyStore } from './e2ee-store.js';

/** The content type of every MLS message in an encrypted conversation. */
export const MLS_CONTENT_TYPE = 'message/mls';

export interface E2EEOptions {
  /** Where the device's secrets live: IndexedDBKeyStore in a browser; default memory (lost on exit). */
  store?: KeyStore;
  /** The app's cipher suite; every member of a group must use the same one.
   *  Default MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519 (WebCrypto only, no extra package). */
  cipherSuite?: CiphersuiteName;
  /** One-time KeyPackages to hold on the server (default 30; the server keeps at most 200). */
  keyPackageTarget?: number;
  /** Publish more when fewer than this are left (default 10). */
  keyPackageLow?: number;
  /** Messages the client delivered before E2EE was created, processed first (in order). */
  earlier?: Message[];
}

/** Why a message could not be decrypted (or, NO_KEY_PACKAGES, a member not added). */
export type E2EEErrorCode =
  /** Sent before this device joined the group (or after it was removed): MLS gives it no key for it. */
  | 'NOT_A_MEMBER'
  /** Sent in an epoch this device no longer (or not yet) holds the keys of. */
  | 'WRONG_EPOCH'
  /** Already decrypted once and not kept on this device (MLS keys are used once). */
  | 'NOT_KEPT'
  /** The bytes are not a valid MLS message, or it failed to authenticate. */
  | 'INVALID'
  /** A Commit that names members the Parley event does not. */
  | 'REFUSED_COMMIT'
  /** (addMembers, createGroup) These users have no KeyPackage: they never enabled encryption, or may not be messaged. */
  | 'NO_KEY_PACKAGES';

/** A message that could not be decrypted: set as `e2eeError` on the message, never thrown from delivery. */
export class E2EEError extends Error {
  constructor(
    readonly code: E2EEErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'E2EEError';
  }
}

/** A conversation entry as the E2EE layer hands it on. */
export interface E2EEMessage extends Message {
  /** The conversation is end-to-end encrypted (an MLS message or a Commit event). */
  encrypted?: boolean;
  /** What the sender encrypted: its content type ("text", or the app's)… */
  plainContentType?: string;
  /** …and its bytes. Absent for Commits and for what could not be decrypted. */
  plaintext?: Uint8Array;
  /** Set when an application message could not be decrypted (shown as such, not dropped). */
  e2eeError?: E2EEError;
}

/** A page of messages, decrypted. */
export type E2EEPage = Omit<MessagePage, 'messages'> & { messages?: E2EEMessage[] };

export interface E2EEEvents {
  /** Every conversation entry, in seq order per conversation, decrypted where it is an MLS message
   *  (those processed before the first listener was added are given to it when it is). */
  message: (m: E2EEMessage) => void;
  /** This device joined an encrypted group from a Welcome. */
  joined: (conversationId: string) => void;
  /** A Commit of this device lost the race for its epoch; it processes the winner and retries. */
  staleEpoch: (conversationId: string) => void;
  /** A background task failed (publishing KeyPackages, a removal Commit). */
  error: (err: Error) => void;
}

interface Group {
  state?: MlsState;
  /** Processed up to this seq. */
  seq: number;
}

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Length-prefixed list of byte strings (the store's value format). */
function pack(parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += 4 + p.length;
  const out = new Uint8Array(n);
  const dv = new DataView(out.buffer);
  let o = 0;
  for (const p of parts) {
    dv.setUint32(o, p.length);
    out.set(p, o + 4);
    o += 4 + p.length;
  }
  return out;
}
function unpack(b: Uint8Array): Uint8Array[] {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  const out: Uint8Array[] = [];
  for (let o = 0; o + 4 <= b.length; ) {
    const n = dv.getUint32(o);
    out.push(b.subarray(o + 4, o + 4 + n));
    o += 4 + n;
  }
  return out;
}
const hex = (b: Uint8Array) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

/** The inner format of an application message: content type, then the payload. */
function envelope(contentType: string, payload: Uint8Array): Uint8Array {
  return pack([enc.encode(contentType), payload]);
}
function openEnvelope(b: Uint8Array): { contentType: string; payload: Uint8Array } {
  const [t, p] = unpack(b);
  if (!t || !p) throw new E2EEError('INVALID', 'not a Parley E2EE envelope');
  return { contentType: dec.decode(t), payload: p };
}

/** The MLS identity of a device: `<userId>/<deviceId>`. */
export function mlsIdentity(userId: string, deviceId: string): string {
  return `${userId}/${deviceId}`;
}
function identityOf(c: Credential): string {
  return c.credentialType === 'basic' ? dec.decode(c.identity) : '';
}
function userOfIdentity(id: string): string {
  const i = id.lastIndexOf('/');
  return i < 0 ? '' : id.slice(0, i);
}

/**
 * Turns end-to-end encryption on for a connected client: publishes this
 * device's KeyPackages, and from then on decrypts what arrives. Call it
 * right after creating the client (before its first catch-up ends), and
 * listen to the returned object's `message` event instead of the client's.
 */
export async function enableE2EE(client: ParleyClient, opts: E2EEOptions = {}): Promise<E2EE> {
  const e = createE2EE(client, opts);
  await e.ready;
  return e;
}

/**
 * enableE2EE without waiting: the object handles the client's messages from
 * this call on (listen to its `message` event at once); `ready` settles once
 * the cipher suite is loaded and the KeyPackages are published.
 */
export function createE2EE(client: ParleyClient, opts: E2EEOptions = {}): E2EE {
  const suite = getCiphersuiteFromName(opts.cipherSuite ?? 'MLS_128_DHKEMX25519_AES128GCM_SHA256_Ed25519');
  return new E2EE(client, getCiphersuiteImpl(suite), opts);
}

export class E2EE extends Emitter<E2EEEvents> {
  private readonly store: KeyStore;
  private readonly groups = new Map<string, Group>();
  private readonly locks = new Map<string, Promise<unknown>>();
  /** Plaintexts of this device's sends in flight, by clientMsgId (MLS cannot decrypt your own message). */
  private readonly pending = new Map<string, Uint8Array>();
  private readonly config: ClientConfig;
  private readonly offMessage: () => void;
  /** The highest seq handed on unprocessed per conversation (plain entries of groups this device has no state of). */
  private readonly passed = new Map<string, number>();
  /** Groups known not to be encrypted (seen created plain): their entries skip the lock. */
  private readonly plain = new Set<string>();
  /** Conversations the store has no record of (read once). */
  private readonly noRecord = new Set<string>();
  private impl!: CiphersuiteImpl;
  private readonly implReady: Promise<void>;
  /** Settles once the cipher suite is loaded and this device's KeyPackages are published. */
  readonly ready: Promise<void>;

  constructor(
    readonly client: ParleyClient,
    impl: Promise<CiphersuiteImpl>,
    private readonly opts: E2EEOptions,
  ) {
    super();
    this.implReady = impl.then((i) => {
      this.impl = i;
    });
    this.store = opts.store ?? new MemoryKeyStore();
    this.config = {
      ...defaultClientConfig,
      authService: {
        // A member's identity must be <userId>/<deviceId> (docs/e2ee.md).
        async validateCredential(c: Credential) {
          return c.credentialType === 'basic' && userOfIdentity(identityOf(c)) !== '';
        },
      },
    };
    this.offMessage = client.on('message', (m) => this.handle(m));
    for (const m of opts.earlier ?? []) this.handle(m);
    this.ready = this.implReady.then(() => this.start());
    this.ready.catch((err: unknown) => this.emit('error', err instanceof Error ? err : new Error(String(err))));
  }

  /** Entries handed on before the app listened (enableE2EE resolves after the client's catch-up began). */
  private held: E2EEMessage[] | null = [];

  /** Adds a listener; the first `message` listener also gets the entries processed before it was added. */
  override on<K extends keyof E2EEEvents>(event: K, fn: E2EEEvents[K]): () => void {
    const off = super.on(event, fn);
    if (event === 'message' && this.held) {
      const held = this.held;
      this.held = null;
      for (const m of held) (fn as E2EEEvents['message'])(m);
    }
    return off;
  }

  protected override emit<K extends keyof E2EEEvents>(event: K, ...args: Parameters<E2EEEvents[K]>): void {
    if (event === 'message' && this.held) {
      this.held.push(args[0] as E2EEMessage);
      return;
    }
    super.emit(event, ...args);
  }

  private get me(): string {
    return mlsIdentity(this.client.userId, this.client.device);
  }

  /** Stops handling the client's messages. */
  close(): void {
    this.offMessage();
  }

  /** Publishes KeyPackages: all fresh (replace) for a device without any, else a top-up. */
  private async start(): Promise<void> {
    await this.client.waitReady();
    const fresh = (await this.store.get('lastResort')) === undefined;
    if (fresh) await this.publish(this.opts.keyPackageTarget ?? 30, true);
    else await this.topUp();
  }

  /** Publishes more one-time KeyPackages when fewer than keyPackageLow are left; returns the count after. */
  async topUp(): Promise<number> {
    const c = (await this.client.request('countKeyPackages', {})).keyPackageCount ?? {};
    const have = c.count ?? 0;
    const target = this.opts.keyPackageTarget ?? 30;
    if (have >= (this.opts.keyPackageLow ?? 10) && c.lastResort) return have;
    return this.publish(Math.max(0, target - have), !c.lastResort);
  }

  private async newKeyPackage(): Promise<{ msg: Uint8Array; ref: string; pub: KeyPackage }> {
    const cred: Credential = { credentialType: 'basic', identity: utf8(this.me) };
    const kp = await generateKeyPackage(cred, defaultCapabilities(), defaultLifetime, [], this.impl);
    const ref = hex(await makeKeyPackageRef(kp.publicPackage, this.impl.hash));
    const p = kp.privatePackage;
    await this.store.put(`kp/${ref}`, pack([encodeKeyPackage(kp.publicPackage), p.initPrivateKey, p.hpkePrivateKey, p.signaturePrivateKey]));
    const msg = encodeMlsMessage({ version: 'mls10', wireformat: 'mls_key_package', keyPackage: kp.publicPackage });
    return { msg, ref, pub: kp.publicPackage };
  }

  private async publish(n: number, withLastResort: boolean): Promise<number> {
    const fresh = (await this.store.get('lastResort')) === undefined;
    const oneTime: Uint8Array[] = [];
    for (let i = 0; i < n; i++) oneTime.push((await this.newKeyPackage()).msg);
    let lastResort: Uint8Array | undefined;
    if (withLastResort || fresh) {
      const lr = await this.newKeyPackage();
      lastResort = lr.msg;
      await this.store.put('lastResort', utf8(lr.ref));
    }
    let count = 0;
    for (let i = 0; i === 0 || i < oneTime.length; i += 100) {
      const r = await this.client.request('publishKeyPackages', {
        keyPackages: oneTime.slice(i, i + 100),
        ...(i === 0 && lastResort ? { lastResort } : {}),
        ...(i === 0 && fresh ? { replace: true } : {}),
      });
      count = r.keyPackageCount?.count ?? 0;
    }
    return count;
  }

  // ---- groups ----

  /** Makes an encrypted group with you (and your other devices) and, if given, other users. */
  async createGroup(input: { name?: string; userIds?: string[]; avatarUrl?: string; announcement?: string } = {}): Promise<GroupInfo> {
    await this.implReady;
    const { userIds = [], ...rest } = input;
    const g = (await this.client.request('createGroup', { ...rest, encrypted: true })).group!;
    const conv = g.conversationId;
    await this.lock(conv, async () => {
      const own = await this.newKeyPackage();
      const raw = unpack((await this.store.get(`kp/${own.ref}`))!);
      await this.store.delete(`kp/${own.ref}`);
      const priv: PrivateKeyPackage = { initPrivateKey: raw[1]!, hpkePrivateKey: raw[2]!, signaturePrivateKey: raw[3]! };
      const state = await mlsCreateGroup(utf8(conv), own.pub, priv, [], this.impl, this.config);
      // The GROUP_CREATED event (seq 1) needs no processing.
      await this.save(conv, { state, seq: Math.max(1, this.groups.get(conv)?.seq ?? 0) });
    });
    // Your other devices join with the first Commit, together with the others.
    await this.addMembers(conv, userIds, true);
    return g;
  }

  /** An encrypted 1:1 with userId: an encrypted group of the two of you (docs/e2ee.md). */
  createDirect(userId: string, name?: string): Promise<GroupInfo> {
    return this.createGroup({ name, userIds: [userId] });
  }

  /**
   * Adds users (every device that has a KeyPackage) to an encrypted group
   * with one Commit and its Welcome; for users already in it (your own user
   * too), adds their devices that are not in it yet. A Commit that lost its epoch to
   * another is dropped; the newer one is processed and the Commit made again.
   */
  async addMembers(conversationId: string, userIds: string[], withOwnDevices = false): Promise<void> {
    await this.implReady;
    const claimFor = [...new Set([...userIds, ...(withOwnDevices ? [this.client.userId] : [])])];
    if (claimFor.length === 0) return;
    const claimed = (await this.client.request('claimKeyPackages', { userIds: claimFor })).claimedKeyPackages?.keyPackages ?? [];
    const packages: { identity: string; kp: KeyPackage }[] = [];
    for (const c of claimed) {
      const id = mlsIdentity(c.userId, c.deviceId);
      if (id === this.me) continue;
      const m = decodeMlsMessage(c.keyPackage, 0)?.[0];
      if (!m || m.wireformat !== 'mls_key_package') continue;
      // The package must be the device it was claimed for, in our cipher suite.
      if (identityOf(m.keyPackage.leafNode.credential) !== id || m.keyPackage.cipherSuite !== this.impl.name) continue;
      packages.push({ identity: id, kp: m.keyPackage });
    }
    const users = userIds.filter((u) => u !== this.client.userId);
    // Users already in the MLS group get only their devices not in it yet
    // (a new phone), by a Commit that changes no Parley membership.
    let newUsers: string[] = [];
    await this.commit(
      conversationId,
      (state) => {
        const have = new Set(this.members(state));
        const inGroup = new Set([...have].map(userOfIdentity));
        newUsers = users.filter((u) => !inGroup.has(u));
        const missing = newUsers.filter((u) => !packages.some((p) => userOfIdentity(p.identity) === u));
        if (missing.length > 0) throw new E2EEError('NO_KEY_PACKAGES', missing.join(', '));
        return packages.filter((p) => !have.has(p.identity)).map((p): Proposal => ({ proposalType: 'add', add: { keyPackage: p.kp } }));
      },
      async (commit, welcome) => {
        if (newUsers.length > 0) await this.client.request('addMembers', { conversationId, userIds: newUsers, mlsCommit: commit, mlsWelcome: welcome });
        else await this.client.request('mlsCommit', { conversationId, commit, welcome, clientMsgId: rid() });
      },
      false,
    );
  }

  /** Removes a member and all their devices from an encrypted group, with the Commit doing it. */
  async removeMember(conversationId: string, userId: string): Promise<void> {
    await this.commit(
      conversationId,
      (state) => this.leavesOf(state, (id) => userOfIdentity(id) === userId).map((i): Proposal => ({ proposalType: 'remove', remove: { removed: i } })),
      async (commit) => {
        await this.client.request('removeMember', { conversationId, userId, mlsCommit: commit });
      },
      true,
    );
  }

  /** Commits a key update (an empty Commit with a path): post-compromise security; also what two racing devices do in tests. */
  async updateKeys(conversationId: string): Promise<void> {
    await this.commit(
      conversationId,
      () => [],
      async (commit) => {
        await this.client.request('mlsCommit', { conversationId, commit, clientMsgId: rid() });
      },
      true,
    );
  }

  /** The MLS identities (`<userId>/<deviceId>`) in the group, as this device sees it. */
  async memberDevices(conversationId: string): Promise<string[]> {
    const g = await this.group(conversationId);
    return g.state ? this.members(g.state) : [];
  }

  /** The epoch this device is in (-1: not a member). */
  async epoch(conversationId: string): Promise<number> {
    const g = await this.group(conversationId);
    return g.state ? Number(g.state.groupContext.epoch) : -1;
  }

  /** Whether this device holds the group's MLS state. */
  async isMember(conversationId: string): Promise<boolean> {
    const g = await this.group(conversationId);
    return !!g.state && g.state.groupActiveState.kind === 'active';
  }

  private members(state: MlsState): string[] {
    const out: string[] = [];
    state.ratchetTree.forEach((n, i) => {
      if (i % 2 === 0 && n?.nodeType === 'leaf') out.push(identityOf(n.leaf.credential));
    });
    return out;
  }

  private leavesOf(state: MlsState, f: (identity: string) => boolean): number[] {
    const out: number[] = [];
    state.ratchetTree.forEach((n, i) => {
      if (i % 2 === 0 && n?.nodeType === 'leaf' && f(identityOf(n.leaf.credential))) out.push(i / 2);
    });
    return out;
  }

  /**
   * Makes a Commit in the current epoch and sends it; merges it only once
   * the server accepted it. On MLS_STALE_EPOCH: processes the group's newer
   * messages (the winning Commit) and makes it again.
   */
  private async commit(
    conv: string,
    proposals: (state: MlsState) => Proposal[],
    send: (commit: Uint8Array, welcome?: Uint8Array) => Promise<void>,
    emptyOk: boolean,
  ): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      let stale = false;
      await this.lock(conv, async () => {
        const g = await this.group(conv);
        if (!g.state) throw new E2EEError('NOT_A_MEMBER', `this device is not in the MLS group of ${conv}`);
        const props = proposals(g.state);
        if (props.length === 0 && !emptyOk) return;
        const r = await createCommit({ state: g.state, cipherSuite: this.impl }, { extraProposals: props, ratchetTreeExtension: true });
        const welcome = r.welcome ? encodeMlsMessage({ version: 'mls10', wireformat: 'mls_welcome', welcome: r.welcome }) : undefined;
        try {
          await send(encodeMlsMessage(r.commit), welcome);
        } catch (err) {
          if (isCode(err, 'ERROR_CODE_MLS_STALE_EPOCH') && attempt < 10) {
            stale = true;
            return;
          }
          throw err;
        }
        g.state = r.newState;
        await this.save(conv, g);
      });
      if (!stale) return;
      this.emit('staleEpoch', conv);
      await this.sync(conv);
    }
  }

  // ---- sending ----

  /** Encrypts and sends text (or { contentType, payload }) to an encrypted group. */
  async send(conversationId: string, content: string | { contentType: string; payload: Uint8Array | string }, opts: SendOptions = {}): Promise<SendAck> {
    const c = typeof content === 'string' ? { contentType: 'text', payload: content } : content;
    const payload = typeof c.payload === 'string' ? utf8(c.payload) : c.payload;
    const plain = envelope(c.contentType, payload);
    const clientMsgId = opts.clientMsgId ?? rid();
    const ids: string[] = [];
    try {
      for (let attempt = 0; ; attempt++) {
        const bytes = await this.lock(conversationId, async () => {
          const g = await this.group(conversationId);
          if (!g.state) throw new E2EEError('NOT_A_MEMBER', `this device is not in the MLS group of ${conversationId}`);
          const r = await createApplicationMessage(g.state, plain, this.impl);
          g.state = r.newState;
          await this.save(conversationId, g);
          return encodeMlsMessage({ version: 'mls10', wireformat: 'mls_private_message', privateMessage: r.privateMessage });
        });
        const id = attempt ? rid() : clientMsgId;
        ids.push(id);
        this.pending.set(id, plain);
        try {
          const ack = await this.client.send({ ...opts, clientMsgId: id, conversationId, contentType: MLS_CONTENT_TYPE, payload: bytes });
          await this.store.put(`pt/${conversationId}/${ack.seq}`, plain);
          return ack;
        } catch (err) {
          // This device's epoch is too old: catch up and encrypt again.
          if (isCode(err, 'ERROR_CODE_MLS_STALE_EPOCH') && attempt < 5) {
            await this.sync(conversationId);
            continue;
          }
          throw err;
        }
      }
    } finally {
      for (const id of ids) this.pending.delete(id);
    }
  }

  // ---- receiving ----

  /** Processes an entry the client delivered (done for you: the client's `message` events). */
  handle(m: Message): void {
    // A conversation that is not an encrypted group costs no lock, no store read.
    const conv = m.conversationId;
    if (m.contentType !== MLS_CONTENT_TYPE && (!conv.startsWith('g:') || this.plain.has(conv)) && !this.locks.has(conv)) {
      this.emit('message', m);
      return;
    }
    void this.lock(m.conversationId, () => this.ingest(m, true)).catch((err: unknown) => this.emit('error', err instanceof Error ? err : new Error(String(err))));
  }

  /**
   * Fetches and processes a conversation's messages after what this device
   * processed (each handed on as a `message` event): what a device offline
   * across epochs does before it commits or sends.
   */
  async sync(conversationId: string): Promise<void> {
    await this.lock(conversationId, async () => {
      for (;;) {
        const g = await this.group(conversationId);
        const page = await this.client.syncMessages(conversationId, g.seq, 200);
        const msgs = page.messages ?? [];
        for (const m of msgs) await this.ingest(m, true);
        if (!page.hasMore || msgs.length === 0) {
          if ((page.lastSeq ?? 0) > g.seq && g.seq > 0) {
            g.seq = page.lastSeq!; // entries hidden for this user never arrive
            await this.save(conversationId, g);
          }
          return;
        }
      }
    });
  }

  /** history(), decrypted: what this device decrypted before comes from its store. */
  async history(conversationId: string, beforeSeq = 0, limit = 30): Promise<E2EEPage> {
    const page = await this.client.history(conversationId, beforeSeq, limit);
    return this.annotatePage(conversationId, page);
  }

  /** syncMessages(), decrypted (and processed when newer than what this device processed). */
  async syncMessages(conversationId: string, afterSeq = 0, limit?: number): Promise<E2EEPage> {
    const page = await this.client.syncMessages(conversationId, afterSeq, limit);
    return this.annotatePage(conversationId, page);
  }

  private async annotatePage(conv: string, page: MessagePage): Promise<E2EEPage> {
    const msgs = page.messages ?? [];
    // A conversation this device holds nothing of, and no MLS in the page: as it is (nothing handed on).
    if (!this.groups.has(conv) && !msgs.some((m) => m.contentType === MLS_CONTENT_TYPE) && !(await this.store.get(`group/${conv}`))) return page;
    const out = await this.lock(conv, async () => {
      const r: E2EEMessage[] = [];
      for (const m of msgs) r.push(await this.ingest(m, true));
      return r;
    });
    return { ...page, messages: out };
  }

  /** Decrypts one message out of order (a message this device already processed comes from its store). */
  decrypt(m: Message): Promise<E2EEMessage> {
    return this.lock(m.conversationId, () => this.ingest(m, false));
  }

  /**
   * Processes one entry (under the conversation's lock). New entries move
   * the group's state; entries at or before what was processed are
   * answered from the store. emitNew: hand a newly processed entry on.
   */
  private async ingest(m: Message, emitNew: boolean): Promise<E2EEMessage> {
    const conv = m.conversationId;
    const isMls = m.contentType === MLS_CONTENT_TYPE;
    if (!isMls && !this.groups.has(conv) && (this.noRecord.has(conv) || !(await this.store.get(`group/${conv}`)))) {
      this.noRecord.add(conv); // until save() makes one (groups is asked first)
      if (m.kind === 'MESSAGE_KIND_GROUP_CREATED' && m.event?.group && !m.event.group.encrypted) this.plain.add(conv);
      if (emitNew && m.seq > (this.passed.get(conv) ?? 0)) {
        this.passed.set(conv, m.seq);
        this.emit('message', m);
      }
      return m;
    }
    let g = await this.group(conv);
    if (m.seq > g.seq + 1 && emitNew) {
      // Every Commit and Welcome before it must be processed first (a device
      // whose client starts at the server's cursor, or a page of history).
      await this.fill(conv, m.seq - 1);
      g = await this.group(conv);
    }
    const out: E2EEMessage = { ...m, encrypted: true };
    if (m.seq <= g.seq) {
      // Processed before: a duplicate delivery, or a page of history.
      if (isMls && m.kind !== 'MESSAGE_KIND_MLS_COMMIT' && m.kind !== 'MESSAGE_KIND_MEMBERS_ADDED' && m.kind !== 'MESSAGE_KIND_MEMBERS_REMOVED' && !m.recalled) {
        const pt = await this.store.get(`pt/${conv}/${m.seq}`);
        if (pt) setPlain(out, pt);
        else out.e2eeError = new E2EEError('NOT_KEPT', 'not decrypted on this device (sent before it joined, or not kept)');
      }
      return out;
    }
    try {
      await this.process(g, m, out);
    } catch (err) {
      out.e2eeError = err instanceof E2EEError ? err : new E2EEError('INVALID', err instanceof Error ? err.message : String(err));
    }
    g.seq = m.seq;
    await this.save(conv, g);
    if (out.plaintext) await this.store.put(`pt/${conv}/${m.seq}`, envelope(out.plainContentType!, out.plaintext));
    if (m.kind === 'MESSAGE_KIND_RECALL' && m.event?.targetSeq) await this.store.delete(`pt/${conv}/${m.event.targetSeq}`);
    if (emitNew && m.seq > (this.passed.get(conv) ?? 0)) this.emit('message', out);
    return out;
  }

  /** Processes the entries after what this device processed, up to upTo (under the lock). */
  private async fill(conv: string, upTo: number): Promise<void> {
    for (;;) {
      const g = await this.group(conv);
      if (g.seq >= upTo) return;
      const page = await this.client.syncMessages(conv, g.seq, Math.min(200, upTo - g.seq));
      const msgs = (page.messages ?? []).filter((m) => m.seq <= upTo);
      for (const m of msgs) await this.ingest(m, false).then((x) => m.seq > (this.passed.get(conv) ?? 0) && this.emit('message', x));
      if (!page.hasMore || msgs.length === 0 || msgs[msgs.length - 1]!.seq >= upTo) {
        const g2 = await this.group(conv);
        if (g2.seq < upTo) {
          g2.seq = upTo;
          await this.save(conv, g2);
        }
        return;
      }
    }
  }

  private async process(g: Group, m: Message, out: E2EEMessage): Promise<void> {
    const conv = m.conversationId;
    const commitKind = m.kind === 'MESSAGE_KIND_MLS_COMMIT' || m.kind === 'MESSAGE_KIND_MEMBERS_ADDED' || m.kind === 'MESSAGE_KIND_MEMBERS_REMOVED';
    if (m.contentType !== MLS_CONTENT_TYPE || !m.payload || m.recalled) {
      // A plain event (created, renamed, left without a Commit, a recall's tombstone).
      if (m.kind === 'MESSAGE_KIND_MEMBERS_REMOVED' && g.state && !m.payload) {
        const gone = m.event?.userIds ?? [];
        // This user left (or the app removed them): the group's secrets are of no more use here.
        if (gone.includes(this.client.userId)) g.state = undefined;
        else this.commitLeft(conv, gone);
      }
      return;
    }
    if (commitKind && !g.state) {
      if (m.mlsWelcome && (await this.tryJoin(g, m.mlsWelcome))) this.emit('joined', conv);
      return;
    }
    if (!g.state || g.state.groupActiveState.kind !== 'active') {
      if (!commitKind) throw new E2EEError('NOT_A_MEMBER', 'sent while this device was not in the group');
      return;
    }
    const own = m.clientMsgId ? this.pending.get(m.clientMsgId) : undefined;
    if (own && m.from === this.client.userId) {
      setPlain(out, own);
      return;
    }
    const sent = m.from === this.client.userId ? await this.store.get(`pt/${conv}/${m.seq}`) : undefined;
    if (sent) {
      setPlain(out, sent);
      return;
    }
    const msg = decodeMlsMessage(m.payload, 0)?.[0];
    if (!msg || (msg.wireformat !== 'mls_private_message' && msg.wireformat !== 'mls_public_message')) throw new E2EEError('INVALID', 'not an MLS message');
    const epoch = msg.wireformat === 'mls_private_message' ? msg.privateMessage.epoch : msg.publicMessage.content.epoch;
    const mine = g.state.groupContext.epoch;
    if (commitKind && epoch < mine) return; // a Commit this device made and merged when the server accepted it
    if (commitKind && epoch > mine) throw new E2EEError('WRONG_EPOCH', `a Commit of epoch ${epoch}, this device is in ${mine}`);
    const r = await processMessage(msg, g.state, emptyPskIndex, this.checkCommit(g.state, m), this.impl).catch((err: unknown) => {
      throw new E2EEError(epoch < mine ? 'WRONG_EPOCH' : 'INVALID', err instanceof Error ? err.message : String(err));
    });
    if (r.kind === 'newState' && r.actionTaken === 'reject') throw new E2EEError('REFUSED_COMMIT', 'a Commit adding devices of users the event does not add');
    g.state = r.newState;
    if (r.kind === 'applicationMessage') setPlain(out, r.message);
    if (m.kind === 'MESSAGE_KIND_MEMBERS_REMOVED' && (m.event?.userIds ?? []).includes(this.client.userId)) g.state = undefined; // this device is out
  }

  /** A Commit may add only devices of the users the Parley event adds, or of members already in (docs/e2ee.md). */
  private checkCommit(state: MlsState, m: Message): IncomingMessageCallback {
    const allowed = new Set([...this.members(state).map(userOfIdentity), ...(m.kind === 'MESSAGE_KIND_MEMBERS_ADDED' ? (m.event?.userIds ?? []) : [])]);
    return (incoming) => {
      if (incoming.kind !== 'commit') return acceptAll(incoming);
      for (const p of incoming.proposals) {
        if (p.proposal.proposalType === 'add' && !allowed.has(userOfIdentity(identityOf(p.proposal.add.keyPackage.leafNode.credential)))) return 'reject';
      }
      return 'accept';
    };
  }

  /** Joins from a Welcome if it holds a secret for one of this device's KeyPackages. */
  private async tryJoin(g: Group, welcomeBytes: Uint8Array): Promise<boolean> {
    const w = decodeMlsMessage(welcomeBytes, 0)?.[0];
    if (!w || w.wireformat !== 'mls_welcome') return false;
    const lastResort = text(await this.store.get('lastResort'));
    for (const s of w.welcome.secrets) {
      const ref = hex(s.newMember);
      const raw = await this.store.get(`kp/${ref}`);
      if (!raw) continue;
      const [pub, init, hpke, sig] = unpack(raw);
      const kp = decodeKeyPackage(pub!, 0)![0];
      const state = await mlsJoinGroup(w.welcome, kp, { initPrivateKey: init!, hpkePrivateKey: hpke!, signaturePrivateKey: sig! }, emptyPskIndex, this.impl, undefined, undefined, this.config);
      g.state = state;
      if (ref !== lastResort) {
        await this.store.delete(`kp/${ref}`);
        void this.topUp().catch((err: unknown) => this.emit('error', err instanceof Error ? err : new Error(String(err))));
      }
      return true;
    }
    return false;
  }

  /** A member left (or was removed by the app) without a Commit: commit their devices' removal (docs/e2ee.md). */
  private commitLeft(conv: string, userIds: string[]): void {
    const gone = new Set(userIds);
    void (async () => {
      // After the current entry is processed (this runs under the lock).
      await Promise.resolve();
      await this.commit(
        conv,
        (state) => this.leavesOf(state, (id) => gone.has(userOfIdentity(id))).map((i): Proposal => ({ proposalType: 'remove', remove: { removed: i } })),
        async (commit) => {
          await this.client.request('mlsCommit', { conversationId: conv, commit, clientMsgId: rid() });
        },
        false,
      );
    })().catch((err: unknown) => this.emit('error', err instanceof Error ? err : new Error(String(err))));
  }

  // ---- state ----

  private async group(conv: string): Promise<Group> {
    let g = this.groups.get(conv);
    if (g) return g;
    const raw = await this.store.get(`group/${conv}`);
    g = { seq: 0 };
    if (raw) {
      const [seq, st] = unpack(raw);
      g.seq = Number(text(seq));
      if (st && st.length > 0) g.state = { ...decodeGroupState(st, 0)![0], clientConfig: this.config };
    }
    this.groups.set(conv, g);
    return g;
  }

  private async save(conv: string, g: Group): Promise<void> {
    this.groups.set(conv, g);
    await this.store.put(`group/${conv}`, pack([utf8(String(g.seq)), g.state ? encodeGroupState(g.state) : new Uint8Array()]));
  }

  /** Runs f after every earlier task of the conversation (MLS state moves one step at a time). */
  private lock<T>(conv: string, f: () => Promise<T>): Promise<T> {
    const prev = this.locks.get(conv) ?? this.implReady;
    const run = prev.then(f, f);
    const tail = run.then(
      () => undefined,
      () => undefined,
    );
    this.locks.set(conv, tail);
    void tail.then(() => {
      if (this.locks.get(conv) === tail) this.locks.delete(conv);
    });
    return run;
  }
}

/** Compared by code, not instanceof: in a browser this module may be loaded
 *  as its own bundle, beside the SDK's (docs: sdk/typescript/README.md). */
function isCode(err: unknown, code: string): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === code;
}

function setPlain(out: E2EEMessage, plain: Uint8Array): void {
  const e = openEnvelope(plain);
  out.plainContentType = e.contentType;
  out.plaintext = e.payload;
}

function rid(): string {
  const b = new Uint8Array(12);
  crypto.getRandomValues(b);
  return 'e2ee-' + hex(b);
}

/** The text of a decrypted text message ('' for none). */
export function plainText(m: E2EEMessage): string {
  return m.plaintext ? text(m.plaintext) : '';
}

export type { MLSMessage };

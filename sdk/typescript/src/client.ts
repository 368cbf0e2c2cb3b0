// ParleyClient: a connection that survives network failures. It reconnects
// with backoff and jitter across a list of addresses, resends unacknowledged
// sends under their original clientMsgId, catches up on every conversation
// after its cursor, fills sequence gaps before delivering, and hands the app
// each conversation's entries in seq order, each exactly once.
// (The Go SDK's client.Session is the reference for this behaviour.)
import { encodeFrame, utf8 } from './codec.js';
import { Connection, frameTooLarge, utf8Length, type WebSocketConstructor } from './connection.js';
import { Emitter } from './emitter.js';
import { ClosedError, DisconnectError, ParleyError, TimeoutError, badResponse, isTemporary } from './errors.js';
import { webPushKey } from './http.js';
import {
  RESUMABLE_ABOVE,
  resolveFileUrl,
  uploadFile,
  uploadResumable,
  type AutoUploadOptions,
  type ResumableOptions,
  type UploadOptions,
} from './media.js';
import { searchMatch, type SearchOptions, type SearchPage } from './search.js';
import { pushTargetBody, subscribeWithKey, webPushTarget, type PushRegistration, type SubscribeWebPushOptions, type WebPushSubscription } from './push.js';
import type {
  Attachment,
  AttachmentRef,
  AuthOk,
  ClientBodies,
  ClientBodyName,
  Contact,
  ContactList,
  Edit,
  Conversation,
  ConversationEvent,
  ConversationList,
  FileUrlResult,
  GroupInfo,
  GroupRole,
  HiddenEvent,
  Member,
  MemberPage,
  Message,
  MessagePage,
  Presence,
  Push,
  PushTarget,
  ReactionPage,
  ReactionUpdate,
  ReadCount,
  Receipt,
  RoomInfo,
  Search,
  SearchResults,
  Send,
  SendAck,
  ServerFrame,
  StreamChunk,
  StreamOpen,
  TypingEvent,
} from './types.js';

export type ClientState = 'connecting' | 'syncing' | 'ready' | 'closed';

export interface ClientOptions {
  /** WebSocket URLs, e.g. "wss://chat.example.com/ws"; each reconnect moves to the next. */
  urls?: string[];
  /** A single URL (used when urls is empty). */
  url?: string;
  /** The token (from /v1/login, the admin API, or minted by the app). */
  token?: string;
  /** Asked for a token before every connection instead of `token`; a rejected
   *  or revoked token is then renewed rather than fatal. */
  getToken?: () => string | Promise<string>;
  /** Identifies this install (stable across reconnects); default: random per client. */
  deviceId?: string;
  /** Kind of device ("web", "ios", ...); default "web". A second login with
   *  the same type kicks the older session (server policy). */
  deviceType?: string;
  /** The WebSocket implementation; default globalThis.WebSocket (browsers,
   *  Node 22+). In Node 20 pass the `ws` package's WebSocket. */
  WebSocket?: WebSocketConstructor;
  /** Bounds on the wait between failed connection attempts (defaults 200 ms, 10 s);
   *  it doubles per failure, with jitter. */
  minBackoffMs?: number;
  maxBackoffMs?: number;
  /** The highest seq the app already has, per conversation (persisted cursors). */
  cursors?: Record<string, number>;
  /** The reaction version the app's messages are up to date with, per
   *  conversation (persisted with the cursors: `reactionVersions()`). A
   *  conversation without one starts at the server's version when the
   *  client first sees it in the conversation list: messages loaded from
   *  then on carry their current reactions. */
  reactionVersions?: Record<string, number>;
  /** After each (re)connection, bring reactions up to date: for every
   *  conversation whose reaction version is past the one held, call
   *  syncReactions and hand each change to the app as a `reaction` event
   *  (default true). */
  syncReactions?: boolean;
  /** Start a conversation without a local cursor at the server's delivered
   *  cursor (so a fresh install does not download whole histories; the app
   *  pages history on demand). Default false: everything is synced. */
  resumeFromServer?: boolean;
  /** syncMessages page size (default 200). */
  syncPageSize?: number;
  /** Send a cumulative delivered ack for what was handed to the app (default true). */
  autoDeliveredAck?: boolean;
  dialTimeoutMs?: number;
  requestTimeoutMs?: number;
  /** Ping interval override (ms); default: what the server announces. */
  heartbeatMs?: number;
  /** The server's HTTP origin, e.g. "https://chat.example.com", for uploads
   *  and relative file URLs; default: that of the WebSocket URL in use
   *  (ws: → http:, wss: → https:). */
  baseUrl?: string;
  /** The fetch used for HTTP requests (uploads outside browsers); default globalThis.fetch. */
  fetch?: typeof fetch;
}

export interface ClientEvents {
  /** A conversation entry (message or event), in seq order per conversation, once. */
  message: (m: Message) => void;
  /** Another member (or your other device) received / read up to a seq. */
  receipt: (r: Receipt) => void;
  typing: (t: TypingEvent) => void;
  /** A subscribed user's presence (also re-announced after each reconnect). */
  presence: (p: Presence) => void;
  contact: (c: Contact) => void;
  hidden: (h: HiddenEvent) => void;
  conversation: (c: ConversationEvent) => void;
  push: (p: Push) => void;
  /** The conversation list as of each (re)connection, before catch-up. */
  conversations: (list: Conversation[]) => void;
  state: (s: ClientState, err?: Error) => void;
  connected: (ok: AuthOk) => void;
  /** A connection ended (the client will reconnect unless it is closed). */
  disconnected: (err: Error) => void;
  /** The client stopped for good: close(), a kick, or refused credentials. */
  closed: (err: Error) => void;
  /** A send was acknowledged (stored durably). */
  sent: (ack: SendAck) => void;
  /**
   * A message's reaction counts changed: pushed by the server (another
   * member's reaction, or yours from another device: `personal`), or brought
   * by the catch-up after a reconnect (personal). Delivered after the
   * messages pushed before it. Apply with {@link applyReaction}: keep the
   * higher `version`, take `me` only from a personal update.
   */
  reaction: (u: ReactionUpdate) => void;
  /**
   * Text a bot appended to a streamed message, as it comes (members online
   * only; never synced). The stored message follows as a `message` event
   * whose `streamId` names the stream: show it instead of the chunks.
   */
  streamChunk: (c: StreamChunk) => void;
}

export interface SendInput {
  to?: string;
  conversationId?: string;
  contentType?: string;
  /** Bytes, or a string sent as UTF-8. */
  payload?: Uint8Array | string;
  /** Reuse to make a retry idempotent; default: generated. */
  clientMsgId?: string;
  /** Up to 10 files this user uploaded: their ids, or what an upload returned. */
  attachments?: Array<string | AttachmentRef>;
  /** The seq of the message (in the same conversation) this one answers. */
  replyTo?: number;
  /** User ids this message mentions (at most 50, each able to read the conversation). */
  mentions?: string[];
  /** Mentions everyone in a group (the owner and admins; every member when
   *  the group's membersMentionAll is set). */
  mentionAll?: boolean;
  /** The seq of a thread's root message: this message is a reply in that thread. */
  threadRoot?: number;
  /** Plain text (at most 4,096 bytes) the server may search when the payload
   *  is not text it reads (encrypted, JSON). Stored for search only: never
   *  sent back to clients. */
  searchText?: string;
}

/** What sendText takes besides the target and the text. */
export type SendOptions = Omit<SendInput, 'to' | 'conversationId' | 'contentType' | 'payload'>;

/** What openStream takes: the target and what the stored message carries besides its text. */
export interface StreamInput {
  to?: string;
  conversationId?: string;
  /** Default (the server's): "text/plain". */
  contentType?: string;
  replyTo?: number;
  threadRoot?: number;
  mentions?: string[];
  mentionAll?: boolean;
  /** Names the stored message, as a send's; default: generated. */
  clientMsgId?: string;
}

interface OutboxEntry {
  send: Send;
  resolve: (a: SendAck) => void;
  reject: (e: Error) => void;
  inFlight: Connection | null;
}

type Inbound = { msg: Message } | { rcpt: Receipt } | { reaction: ReactionUpdate };

function randomHex(bytes: number): string {
  const b = new Uint8Array(bytes);
  globalThis.crypto.getRandomValues(b);
  let s = '';
  for (const x of b) s += x.toString(16).padStart(2, '0');
  return s;
}

/** A unique client message id (random; usable in insecure browser contexts too). */
export function newClientMsgId(): string {
  return randomHex(12);
}

/** Temporary refusals after which a request is retried on the same link:
 *  no reply in time, or an error the server says is temporary. */
function retryable(err: unknown): boolean {
  return err instanceof TimeoutError || isTemporary(err);
}

export class ParleyClient extends Emitter<ClientEvents> {
  private readonly opts: ClientOptions;
  private readonly urls: string[];
  private readonly WS: WebSocketConstructor;
  private readonly deviceId: string;
  private conn: Connection | null = null;
  private _state: ClientState = 'connecting';
  private _userId = '';
  private closedErr: Error | null = null;
  private cursorsMap = new Map<string, number>();
  private reactionVersionsMap = new Map<string, number>();
  private outbox = new Map<string, OutboxEntry>();
  private inbox: Inbound[] = [];
  private pumping = false;
  private acks = new Map<string, number>();
  private connWaiters: Array<() => void> = [];
  private wakeSleep: (() => void) | null = null;
  private presenceSubs = new Set<string>();
  private rooms = new Set<string>();
  private connectedUrl = '';
  /** The frame limit of the last connection (0 before the first): requests
   *  over it are refused while offline rather than queued. */
  private frameLimit = 0;

  constructor(opts: ClientOptions) {
    super();
    this.opts = opts;
    this.urls = opts.urls?.length ? [...opts.urls] : opts.url ? [opts.url] : [];
    if (this.urls.length === 0) throw new Error('parley: ClientOptions needs urls or url');
    if (!opts.token && !opts.getToken) throw new Error('parley: ClientOptions needs token or getToken');
    const WS = opts.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
    if (!WS) throw new Error('parley: no WebSocket implementation (pass ClientOptions.WebSocket)');
    this.WS = WS;
    this.deviceId = opts.deviceId ?? 'web-' + randomHex(6);
    for (const [k, v] of Object.entries(opts.cursors ?? {})) this.cursorsMap.set(k, v);
    for (const [k, v] of Object.entries(opts.reactionVersions ?? {})) this.reactionVersionsMap.set(k, v);
    queueMicrotask(() => void this.run());
  }

  // ---- state ----

  get state(): ClientState {
    return this._state;
  }

  /** The authenticated user id (empty before the first connection). */
  get userId(): string {
    return this._userId;
  }

  /** Why the client stopped, or null while it runs. */
  /** This install's device id (sent in auth; end-to-end encryption names devices by it). */
  get device(): string {
    return this.deviceId;
  }

  get error(): Error | null {
    return this.closedErr;
  }

  /** The highest seq of a conversation handed to the app. */
  cursor(conversationId: string): number {
    return this.cursorsMap.get(conversationId) ?? 0;
  }

  /** Every conversation's cursor (to persist; seed them back with ClientOptions.cursors). */
  cursors(): Record<string, number> {
    return Object.fromEntries(this.cursorsMap);
  }

  /**
   * Every conversation's reaction version the app is up to date with (to
   * persist with the cursors; seed them back with
   * ClientOptions.reactionVersions). It moves when the catch-up after a
   * (re)connection has brought the changes, not with each live update: a
   * reconnect asks again for what changed since the last catch-up.
   */
  reactionVersions(): Record<string, number> {
    return Object.fromEntries(this.reactionVersionsMap);
  }

  /** Sends waiting for their ack (they are resent after each reconnect). */
  pendingSends(): Send[] {
    return [...this.outbox.values()].map((e) => e.send);
  }

  /** Resolves once connected and caught up (rejects if the client stops first). */
  waitReady(timeoutMs?: number): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this._state === 'ready') return resolve();
      if (this.closedErr) return reject(this.closedErr);
      let timer: ReturnType<typeof setTimeout> | undefined;
      const offState = this.on('state', (s, err) => {
        if (s === 'ready' || s === 'closed') {
          offState();
          if (timer) clearTimeout(timer);
          if (s === 'ready') resolve();
          else reject(err ?? new ClosedError());
        }
      });
      if (timeoutMs !== undefined)
        timer = setTimeout(() => {
          offState();
          reject(new TimeoutError('parley: not ready in time'));
        }, timeoutMs);
    });
  }

  /** Skips the current backoff wait and reconnects now (e.g. on the browser's `online` event). */
  reconnectNow(): void {
    this.wakeSleep?.();
  }

  /** Drops the current connection (the client reconnects); for tests and "network changed" hints. */
  dropConnection(): void {
    this.conn?.close(new ClosedError('parley: connection dropped by the client'));
  }

  /** Stops the client: closes the connection; pending sends fail with ClosedError. */
  close(): void {
    this.stop(new ClosedError('parley: client closed'));
  }

  private stop(err: Error): void {
    if (this.closedErr) return;
    this.closedErr = err;
    this.conn?.close(err);
    this.conn = null;
    for (const e of this.outbox.values()) e.reject(err);
    this.outbox.clear();
    this.wakeConnWaiters();
    this.wakeSleep?.();
    this.setState('closed', err);
    this.emit('closed', err);
  }

  private setState(s: ClientState, err?: Error): void {
    if (this._state === s) return;
    this._state = s;
    this.emit('state', s, err);
  }

  // ---- the connection loop ----

  private async run(): Promise<void> {
    let failures = 0;
    let next = 0;
    const min = this.opts.minBackoffMs ?? 200;
    const max = Math.max(this.opts.maxBackoffMs ?? 10_000, min);
    const backoff = () => {
      failures++;
      return jitter(Math.min(min * 2 ** Math.min(failures - 1, 20), max));
    };
    while (!this.closedErr) {
      const url = this.urls[next++ % this.urls.length]!;
      this.setState('connecting');
      let conn: Connection;
      let closedP!: Promise<Error>;
      try {
        const token = this.opts.getToken ? await this.opts.getToken() : this.opts.token!;
        if (this.closedErr) return;
        let onClose!: (e: Error) => void;
        closedP = new Promise<Error>((r) => (onClose = r));
        conn = await Connection.open(url, {
          token,
          deviceId: this.deviceId,
          deviceType: this.opts.deviceType ?? 'web',
          WebSocket: this.WS,
          dialTimeoutMs: this.opts.dialTimeoutMs,
          requestTimeoutMs: this.opts.requestTimeoutMs,
          heartbeatMs: this.opts.heartbeatMs,
          onPush: (f, c) => this.onPush(c, f),
          onClose,
        });
      } catch (err) {
        if (this.closedErr) return;
        const e = err instanceof Error ? err : new Error(String(err));
        if (this.permanent(e)) return this.stop(e);
        this.emit('disconnected', e);
        await this.sleep(backoff());
        continue;
      }
      if (this.closedErr) {
        conn.close();
        return;
      }
      this.conn = conn;
      this.connectedUrl = url;
      this.frameLimit = conn.maxFrameBytes;
      this._userId = conn.authOk.userId;
      this.setState('syncing');
      this.emit('connected', conn.authOk);
      this.wakeConnWaiters();
      for (const e of this.outbox.values()) this.trySend(e);
      void this.restoreSubscriptions(conn);

      let caughtUp = false;
      let err: Error;
      try {
        await this.catchUp(conn);
        caughtUp = true;
        failures = 0; // only a link that got through catch-up counts as healthy
        if (conn.open) {
          this.setState('ready');
          void this.pump(conn);
        }
        err = await closedP;
      } catch (e) {
        conn.close(e instanceof Error ? e : new Error(String(e)));
        err = conn.error ?? (e as Error);
      }
      if (this.conn === conn) this.conn = null;
      if (this.closedErr) return;
      this.emit('disconnected', err);
      if (err instanceof DisconnectError && this.permanent(err)) return this.stop(err);
      // Reconnect soon after a healthy link drops; back off when links keep
      // failing before they are useful, or when the server asks to wait.
      let wait = caughtUp ? jitter(min) : backoff();
      if (err instanceof DisconnectError && err.reconnectAfterMs > 0)
        wait = Math.max(wait, err.reconnectAfterMs + jitter(err.reconnectAfterMs / 2));
      this.setState('connecting', err);
      await this.sleep(wait);
    }
  }

  /** Errors that reconnecting cannot fix. */
  private permanent(err: Error): boolean {
    const renew = !!this.opts.getToken;
    if (err instanceof DisconnectError) {
      if (err.code === 'DISCONNECT_CODE_KICKED') return true;
      if (err.code === 'DISCONNECT_CODE_AUTH_FAILED' || err.code === 'DISCONNECT_CODE_TOKEN_REVOKED') return !renew;
      return false;
    }
    if (err instanceof ParleyError) {
      if (err.code === 'ERROR_CODE_UNAUTHENTICATED') return !renew;
      return err.code === 'ERROR_CODE_BAD_REQUEST' || err.code === 'ERROR_CODE_PERMISSION_DENIED';
    }
    return false;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(done, ms);
      function done() {
        clearTimeout(t);
        resolve();
      }
      this.wakeSleep = () => {
        this.wakeSleep = null;
        done();
      };
    });
  }

  private wakeConnWaiters(): void {
    const ws = this.connWaiters;
    this.connWaiters = [];
    for (const w of ws) w();
  }

  /** A live connection, waiting for one if needed. */
  private async liveConn(): Promise<Connection> {
    for (;;) {
      if (this.closedErr) throw this.closedErr;
      if (this.conn?.open) return this.conn;
      await new Promise<void>((r) => this.connWaiters.push(r));
    }
  }

  private async restoreSubscriptions(conn: Connection): Promise<void> {
    try {
      if (this.presenceSubs.size > 0) {
        const f = await conn.request('subscribePresence', { userIds: [...this.presenceSubs] });
        for (const p of f.presence?.users ?? []) this.emit('presence', p);
      }
      for (const room of this.rooms) await conn.request('joinRoom', { room });
    } catch {
      /* the next connection tries again */
    }
  }

  // ---- receiving ----

  private onPush(conn: Connection, f: ServerFrame): void {
    if (f.message) this.inbox.push({ msg: f.message });
    else if (f.receipt) this.inbox.push({ rcpt: f.receipt });
    else if (f.reaction) this.inbox.push({ reaction: f.reaction });
    else {
      if (f.streamChunk) this.emit('streamChunk', f.streamChunk);
      else if (f.typing) this.emit('typing', f.typing);
      else if (f.presenceEvent) this.emit('presence', f.presenceEvent.presence);
      else if (f.contactEvent) this.emit('contact', f.contactEvent.contact);
      else if (f.hidden) this.emit('hidden', f.hidden);
      else if (f.conversationEvent) this.emit('conversation', f.conversationEvent);
      else if (f.push) this.emit('push', f.push);
      return;
    }
    if (this._state === 'ready') void this.pump(conn);
  }

  /** Catch-up after (re)connecting: the conversation list, then every
   *  conversation after its cursor, then what was pushed meanwhile. */
  private async catchUp(conn: Connection): Promise<void> {
    const convs = await this.allConversationsOn(conn);
    this.emit('conversations', convs);
    for (const c of convs) {
      const id = c.conversationId;
      let cur = this.cursorsMap.get(id);
      if (cur === undefined && this.opts.resumeFromServer) {
        cur = Math.max(c.deliveredSeq ?? 0, c.clearedSeq ?? 0);
        this.cursorsMap.set(id, cur);
      }
      // A conversation first seen here: the messages the app loads from now
      // on carry their current reactions.
      const held = this.reactionVersionsMap.get(id);
      if (held === undefined) this.reactionVersionsMap.set(id, c.reactionVersion ?? 0);
      const last = c.left ? Math.min(c.lastSeq ?? 0, c.leftSeq ?? c.lastSeq ?? 0) : (c.lastSeq ?? 0);
      if (last > (cur ?? 0)) await this.syncConv(conn, id, 0);
      if (held !== undefined && (c.reactionVersion ?? 0) > held && this.opts.syncReactions !== false) await this.syncReactionsOn(conn, id);
    }
    this.flushAcks(conn);
  }

  /** Hands the app the reaction changes of a conversation after the version it holds, page by page. */
  private async syncReactionsOn(conn: Connection, conv: string): Promise<void> {
    let busy = 0;
    for (;;) {
      const after = this.reactionVersionsMap.get(conv) ?? 0;
      let page: ReactionPage;
      try {
        page = (await conn.request('syncReactions', { conversationId: conv, afterVersion: after, limit: 500 })).reactions!;
      } catch (err) {
        if (err instanceof ParleyError && !retryable(err)) return; // refused (e.g. left the group): skip
        if (err instanceof ParleyError && conn.open && busy < 8) {
          await this.sleep(jitter((this.opts.minBackoffMs ?? 200) * 2 ** Math.min(busy++, 5)));
          continue;
        }
        throw err;
      }
      busy = 0;
      const updates = page.updates ?? [];
      let top = after;
      for (const u of updates) {
        this.emit('reaction', u);
        top = Math.max(top, u.version ?? 0);
      }
      if (!page.hasMore || updates.length === 0) top = Math.max(top, page.version ?? 0);
      this.reactionVersionsMap.set(conv, top);
      if (!page.hasMore || top <= after) return;
    }
  }

  /** Delivers queued pushes one at a time; a gap is filled first. */
  private async pump(conn: Connection): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.inbox.length > 0 && conn.open && this.conn === conn) {
        const ev = this.inbox[0]!;
        if ('msg' in ev) await this.deliverPushed(conn, ev.msg);
        else if ('reaction' in ev) this.emit('reaction', ev.reaction);
        else this.emit('receipt', ev.rcpt);
        this.inbox.shift();
        if (this.inbox.length === 0) this.flushAcks(conn);
      }
    } catch {
      // The connection failed mid-fill: the rest stays queued for the next one.
    } finally {
      this.pumping = false;
    }
    if (this.inbox.length > 0 && this.conn?.open && this._state === 'ready') void this.pump(this.conn);
  }

  private async deliverPushed(conn: Connection, m: Message): Promise<void> {
    const id = m.conversationId;
    let cur = this.cursorsMap.get(id);
    if (cur === undefined && this.opts.resumeFromServer) {
      // A conversation first seen by this push: start at it.
      cur = m.seq - 1;
      this.cursorsMap.set(id, cur);
    }
    cur ??= 0;
    // A conversation that was not in the list at the catch-up: every reaction
    // change in it is new to the app.
    if (!this.reactionVersionsMap.has(id)) this.reactionVersionsMap.set(id, 0);
    if (m.seq <= cur) return; // already delivered (by a sync or an earlier push)
    if (m.seq > cur + 1) await this.syncConv(conn, id, m.seq - 1); // a gap: fetch it first
    if (m.seq > this.cursor(id)) this.deliver(m);
  }

  /** Delivers a conversation's entries after its cursor, page by page, up to upTo (0: the end).
   *  The server bounds pages by bytes, so a page may hold fewer entries than asked: only
   *  hasMore says whether more follow. A busy server's refusal is retried on the same link. */
  private async syncConv(conn: Connection, conv: string, upTo: number): Promise<void> {
    const limit = this.opts.syncPageSize ?? 200;
    let busy = 0;
    for (;;) {
      const cur = this.cursor(conv);
      if (upTo !== 0 && cur >= upTo) return;
      let page: MessagePage;
      try {
        page = (await conn.request('syncMessages', { conversationId: conv, afterSeq: cur, limit })).messages!;
      } catch (err) {
        if (err instanceof ParleyError && !retryable(err)) return; // refused: skip, do not loop
        // Temporarily refused (e.g. TOO_MANY_REQUESTS: the server's read memory is taken):
        // wait and ask again, a few times, before giving the link up.
        if (err instanceof ParleyError && conn.open && busy < 8) {
          await this.sleep(jitter((this.opts.minBackoffMs ?? 200) * 2 ** Math.min(busy++, 5)));
          continue;
        }
        throw err;
      }
      busy = 0;
      const msgs = page.messages ?? [];
      for (const m of msgs) if (m.seq > this.cursor(conv)) this.deliver(m);
      if (!page.hasMore || msgs.length === 0) {
        // Entries hidden for this user (deleteForMe) never arrive: move past them.
        const last = Math.min(page.lastSeq ?? 0, upTo || Infinity);
        if (last > this.cursor(conv)) this.cursorsMap.set(conv, last);
        return;
      }
    }
  }

  private deliver(m: Message): void {
    this.cursorsMap.set(m.conversationId, Math.max(this.cursor(m.conversationId), m.seq));
    if (this.opts.autoDeliveredAck !== false) this.acks.set(m.conversationId, m.seq);
    this.emit('message', m);
  }

  private flushAcks(conn: Connection): void {
    if (!conn.open) return;
    for (const [conversationId, seq] of this.acks) {
      try {
        conn.notify('delivered', { conversationId, seq });
      } catch {
        return; // the next connection's catch-up acks again
      }
    }
    this.acks.clear();
  }

  // ---- sending ----

  /**
   * Sends a message and resolves with its ack once it is stored. While
   * disconnected the send waits; after each reconnect it is resent under the
   * same clientMsgId, so it is stored exactly once. Rejects when the server
   * refuses it for good (ParleyError) or the client is closed. A refusal by
   * the app's moderation is ERROR_CODE_REJECTED, with the text to show the
   * sender in `reason` and the rule in `rejectCode`. A message too large
   * for the server's frame limit (AuthOk.maxFrameBytes; 64 KiB by default)
   * rejects at once with ERROR_CODE_TOO_LARGE: it is never written to the
   * socket (the server would close the connection) nor queued for a resend.
   */
  send(input: SendInput): Promise<SendAck> {
    if (this.closedErr) return Promise.reject(this.closedErr);
    const send = sendBody(input);
    const big = this.oversized('send', send);
    if (big) return Promise.reject(big);
    return new Promise<SendAck>((resolve, reject) => {
      const e: OutboxEntry = { send, resolve, reject, inFlight: null };
      this.outbox.set(send.clientMsgId, e);
      this.trySend(e);
    });
  }

  /**
   * Sends UTF-8 text to a user (1:1) or, with a conversation id ("p:…" or
   * "g:…"), into that conversation. The third argument is a clientMsgId, or
   * options: `{ replyTo, mentions, mentionAll, threadRoot, attachments, clientMsgId }`.
   */
  sendText(target: string, text: string, opts?: string | SendOptions): Promise<SendAck> {
    const isConv = target.startsWith('g:') || target.startsWith('p:');
    const o: SendOptions = typeof opts === 'string' ? { clientMsgId: opts } : (opts ?? {});
    return this.send({
      ...o,
      ...(isConv ? { conversationId: target } : { to: target }),
      contentType: 'text',
      payload: text,
    });
  }

  private trySend(e: OutboxEntry): void {
    const conn = this.conn;
    if (!conn?.open || e.inFlight === conn || !this.outbox.has(e.send.clientMsgId)) return;
    e.inFlight = conn;
    conn.request('send', e.send).then(
      (f) => {
        const ack = f.sendAck!;
        this.outbox.delete(e.send.clientMsgId);
        this.ownSeq(ack);
        this.emit('sent', ack);
        e.resolve(ack);
      },
      (err: unknown) => {
        e.inFlight = null;
        if (err instanceof ClosedError || err instanceof DisconnectError) return; // resent after reconnecting
        if (retryable(err)) {
          setTimeout(() => this.trySend(e), 300 + Math.random() * 700);
          return;
        }
        this.outbox.delete(e.send.clientMsgId);
        e.reject(err instanceof Error ? err : new Error(String(err)));
      },
    );
  }

  /** Moves the cursor past a message this client sent when it directly
   *  follows what the app has, so the app is not handed its own message
   *  back. (After a gap it stays: the sync delivers it in order, and the app
   *  recognises it by clientMsgId.) */
  private ownSeq(ack: SendAck): void {
    if (this.cursor(ack.conversationId) + 1 === ack.seq) this.cursorsMap.set(ack.conversationId, ack.seq);
  }

  // ---- requests ----

  /**
   * Sends any request and resolves with the reply frame. It waits for a
   * connection; with retry it is sent again after a reconnect or a temporary
   * refusal (only for requests that are safe to repeat). A request too
   * large for the server's frame limit fails at once with
   * ERROR_CODE_TOO_LARGE, as a send does.
   */
  async request<K extends ClientBodyName>(name: K, body: ClientBodies[K], retry = false): Promise<ServerFrame> {
    const big = this.oversized(name, body);
    if (big) throw big;
    for (let attempt = 0; ; attempt++) {
      const conn = await this.liveConn();
      try {
        return await conn.request(name, body);
      } catch (err) {
        if (!retry || this.closedErr) throw err;
        if (err instanceof ClosedError || err instanceof DisconnectError) continue;
        if (retryable(err) && attempt < 8) {
          await new Promise((r) => setTimeout(r, 200 * (attempt + 1)));
          continue;
        }
        throw err;
      }
    }
  }

  /**
   * The refusal of a request too large for the server's frame limit, when it
   * is known and the request would wait for a connection (a connection
   * refuses such a frame itself, before writing it). The estimate leaves out
   * the frame's id; the connection's check is exact.
   */
  private oversized<K extends ClientBodyName>(name: K, body: ClientBodies[K]): ParleyError | null {
    if (this.conn?.open || this.frameLimit === 0) return null;
    const data = encodeFrame({ [name]: body });
    const bytes = data.length * 3 <= this.frameLimit ? data.length : utf8Length(data);
    return bytes > this.frameLimit ? frameTooLarge(bytes, this.frameLimit) : null;
  }

  private async ok<K extends ClientBodyName>(name: K, body: ClientBodies[K], retry = false): Promise<void> {
    await this.request(name, body, retry);
  }

  /** One page of the conversation list (most recent first). */
  async syncConversations(limit?: number, pageToken?: string): Promise<ConversationList> {
    return (await this.request('syncConversations', { limit, pageToken }, true)).conversations ?? {};
  }

  /** Every conversation (all pages). */
  async conversations(): Promise<Conversation[]> {
    return this.allConversationsOn(await this.liveConn());
  }

  private async allConversationsOn(conn: Connection): Promise<Conversation[]> {
    const out: Conversation[] = [];
    let pageToken: string | undefined;
    do {
      const l: ConversationList = (await conn.request('syncConversations', { limit: 500, pageToken })).conversations ?? {};
      out.push(...(l.conversations ?? []));
      pageToken = l.nextPageToken;
    } while (pageToken);
    return out;
  }

  /** Entries with seq > afterSeq, ascending (forward paging). */
  async syncMessages(conversationId: string, afterSeq = 0, limit?: number): Promise<MessagePage> {
    return (await this.request('syncMessages', { conversationId, afterSeq, limit }, true)).messages!;
  }

  /** The newest entries with seq < beforeSeq (0: the newest), ascending (backward paging). */
  async history(conversationId: string, beforeSeq = 0, limit = 30): Promise<MessagePage> {
    return (await this.request('history', { conversationId, beforeSeq, limit }, true)).messages!;
  }

  /** Moves the read cursor (unread counts derive from it; the peer gets a receipt). */
  markRead(conversationId: string, seq: number): Promise<void> {
    return this.ok('read', { conversationId, seq }, true);
  }

  /** Says the user is typing (fire and forget; dropped while disconnected). */
  typing(conversationId: string): void {
    try {
      if (this.conn?.open) this.conn.notify('typing', { conversationId });
    } catch {
      /* not connected: nothing to say */
    }
  }

  /** Recalls a message; resolves with the RECALL event's ack (null when a
   *  retry found it already recalled). */
  async recall(conversationId: string, seq: number): Promise<SendAck | null> {
    const clientMsgId = newClientMsgId();
    for (let attempt = 0; ; attempt++) {
      const conn = await this.liveConn();
      try {
        return (await conn.request('recall', { conversationId, seq, clientMsgId })).sendAck!;
      } catch (err) {
        if (attempt > 0 && err instanceof ParleyError && err.code === 'ERROR_CODE_CONFLICT') return null;
        if (err instanceof ClosedError || err instanceof DisconnectError || retryable(err)) {
          if (this.closedErr) throw err;
          continue;
        }
        throw err;
      }
    }
  }

  /** Replaces the content of your own message; resolves with the EDIT event's
   *  ack. `searchText` replaces what the server may search (see SendInput). */
  async edit(conversationId: string, seq: number, payload: Uint8Array | string, contentType = 'text', searchText?: string): Promise<SendAck> {
    const body: Edit = {
      conversationId,
      seq,
      contentType,
      payload: typeof payload === 'string' ? utf8(payload) : payload,
      clientMsgId: newClientMsgId(),
    };
    if (searchText) body.searchText = searchText;
    return (await this.request('edit', body, true)).sendAck!;
  }

  /** Hides messages (or, with all, the whole conversation) for this user's devices. */
  deleteForMe(conversationId: string, seqs: number[] | 'all'): Promise<void> {
    return this.ok('deleteForMe', seqs === 'all' ? { conversationId, all: true } : { conversationId, seqs }, true);
  }

  /** How many members (other than the sender) read each seq, and who. */
  async readCounts(conversationId: string, seqs: number[]): Promise<ReadCount[]> {
    return (await this.request('readCounts', { conversationId, seqs }, true)).readCounts?.counts ?? [];
  }

  /** Subscribes to users' presence (kept across reconnects); returns their presence now. */
  async subscribePresence(userIds: string[]): Promise<Presence[]> {
    for (const u of userIds) this.presenceSubs.add(u);
    return (await this.request('subscribePresence', { userIds }, true)).presence?.users ?? [];
  }

  /** Ends presence subscriptions (none given: all of them). */
  unsubscribePresence(userIds: string[] = []): Promise<void> {
    if (userIds.length === 0) this.presenceSubs.clear();
    for (const u of userIds) this.presenceSubs.delete(u);
    return this.ok('unsubscribePresence', { userIds }, true);
  }

  // Groups

  async createGroup(input: ClientBodies['createGroup']): Promise<GroupInfo> {
    return (await this.request('createGroup', input)).group!;
  }
  async updateGroup(input: ClientBodies['updateGroup']): Promise<GroupInfo> {
    return (await this.request('updateGroup', input, true)).group!;
  }
  addMembers(conversationId: string, userIds: string[]): Promise<void> {
    return this.ok('addMembers', { conversationId, userIds }, true);
  }
  removeMember(conversationId: string, userId: string): Promise<void> {
    return this.ok('removeMember', { conversationId, userId });
  }
  async joinGroup(conversationId: string): Promise<GroupInfo> {
    return (await this.request('joinGroup', { conversationId })).group!;
  }
  leaveGroup(conversationId: string): Promise<void> {
    return this.ok('leaveGroup', { conversationId });
  }
  setRole(conversationId: string, userId: string, role: GroupRole): Promise<void> {
    return this.ok('setRole', { conversationId, userId, role }, true);
  }
  muteMember(conversationId: string, userId: string, durationSeconds: number): Promise<void> {
    return this.ok('muteMember', { conversationId, userId, durationSeconds });
  }
  transferOwnership(conversationId: string, userId: string): Promise<void> {
    return this.ok('transferOwnership', { conversationId, userId });
  }
  dissolveGroup(conversationId: string): Promise<void> {
    return this.ok('dissolveGroup', { conversationId });
  }
  async getGroup(conversationId: string): Promise<GroupInfo> {
    return (await this.request('getGroup', { conversationId }, true)).group!;
  }
  async listMembers(conversationId: string, afterUserId = '', limit?: number): Promise<MemberPage> {
    return (await this.request('listMembers', { conversationId, afterUserId, limit }, true)).members!;
  }
  /** Every current member (all pages). */
  async allMembers(conversationId: string): Promise<Member[]> {
    const out: Member[] = [];
    let after = '';
    do {
      const p = await this.listMembers(conversationId, after, 1000);
      out.push(...(p.members ?? []));
      after = p.nextAfterUserId ?? '';
    } while (after);
    return out;
  }

  // Contacts

  friendRequest(userId: string, note?: string): Promise<void> {
    return this.ok('friendRequest', { userId, note }, true);
  }
  respondFriend(userId: string, accept: boolean): Promise<void> {
    return this.ok('respondFriend', { userId, accept }, true);
  }
  removeFriend(userId: string): Promise<void> {
    return this.ok('removeFriend', { userId }, true);
  }
  async listContacts(): Promise<ContactList> {
    return (await this.request('listContacts', {}, true)).contacts ?? {};
  }
  block(userId: string): Promise<void> {
    return this.ok('block', { userId }, true);
  }
  unblock(userId: string): Promise<void> {
    return this.ok('unblock', { userId }, true);
  }

  /** Pins or mutes a conversation for this user. */
  setConversation(conversationId: string, settings: { pinned?: boolean; muted?: boolean }): Promise<void> {
    return this.ok('setConversation', { conversationId, ...settings }, true);
  }

  // Moderation

  /**
   * Reports message seq of a conversation this user can read to the app's
   * moderators, with a reason code (1-32 bytes of a-z, 0-9 and "_": "spam",
   * "abuse", "other") and an optional note (at most 1000 bytes). The report
   * keeps the message as it is now. Reporting it again changes nothing, so
   * it is retried across reconnects. A bad reason, a note too long or one's
   * own message is ERROR_CODE_BAD_REQUEST; a message the user cannot read
   * ERROR_CODE_PERMISSION_DENIED.
   */
  reportMessage(conversationId: string, seq: number, reason: string, note?: string): Promise<void> {
    return this.ok('reportMessage', note ? { conversationId, seq, reason, note } : { conversationId, seq, reason }, true);
  }

  // Rich messages: reactions, pins, threads, streams (replies and mentions are send options)

  /**
   * Adds this user's emoji reaction to message seq (1-32 bytes, no spaces;
   * at most 20 distinct emojis per message: ERROR_CODE_TOO_LARGE). Resolves
   * with the message's counts, personal (`me` set for this user); the other
   * members' devices get a `reaction` event. Adding one already there
   * changes nothing, so it is retried across reconnects.
   */
  async react(conversationId: string, seq: number, emoji: string): Promise<ReactionUpdate> {
    return (await this.request('react', { conversationId, seq, emoji }, true)).reaction!;
  }

  /** Takes back this user's emoji reaction (none there: nothing changes); as react. */
  async unreact(conversationId: string, seq: number, emoji: string): Promise<ReactionUpdate> {
    return (await this.request('react', { conversationId, seq, emoji, remove: true }, true)).reaction!;
  }

  /**
   * One page of the messages whose reactions changed after afterVersion,
   * oldest change first (personal updates). The client calls it itself after
   * each reconnect (ClientOptions.syncReactions); this is for apps that
   * keep their own versions.
   */
  async syncReactions(conversationId: string, afterVersion = 0, limit?: number): Promise<ReactionPage> {
    return (await this.request('syncReactions', { conversationId, afterVersion, limit }, true)).reactions!;
  }

  /**
   * Pins message seq (a group's owner and admins, either side of a 1:1; at
   * most 50 per conversation). Resolves with the ack of the PINNED event the
   * other members (and your other devices) get as a message; this session
   * does not get it back. Pinning a pinned message is ERROR_CODE_CONFLICT;
   * a retry across a reconnect that finds it pinned resolves null.
   */
  pin(conversationId: string, seq: number): Promise<SendAck | null> {
    return this.pinRequest(conversationId, seq, false);
  }

  /** Unpins message seq; as pin (the UNPINNED event; a message not pinned is ERROR_CODE_CONFLICT). */
  unpin(conversationId: string, seq: number): Promise<SendAck | null> {
    return this.pinRequest(conversationId, seq, true);
  }

  /**
   * Sets the conversation's disappearing-messages timer in seconds (0: off;
   * else one of DISAPPEARING_TIMERS, others are ERROR_CODE_BAD_REQUEST):
   * either side of a 1:1, a group's owner or admins. Resolves with the ack of
   * the DISAPPEARING_SET event; messages sent after it carry `expiresAt`.
   */
  async setDisappearing(conversationId: string, seconds: number): Promise<SendAck> {
    const body: ClientBodies['setDisappearing'] = { conversationId, seconds, clientMsgId: newClientMsgId() };
    for (;;) {
      const conn = await this.liveConn();
      try {
        return (await conn.request('setDisappearing', body)).sendAck!;
      } catch (err) {
        // The client message id makes a retry across a reconnect idempotent.
        if (err instanceof ClosedError || err instanceof DisconnectError || retryable(err)) {
          if (this.closedErr) throw err;
          continue;
        }
        throw err;
      }
    }
  }

  private async pinRequest(conversationId: string, seq: number, unpin: boolean): Promise<SendAck | null> {
    const body: ClientBodies['pin'] = { conversationId, seq, clientMsgId: newClientMsgId() };
    if (unpin) body.unpin = true;
    for (let attempt = 0; ; attempt++) {
      const conn = await this.liveConn();
      try {
        return (await conn.request('pin', body)).sendAck!;
      } catch (err) {
        if (attempt > 0 && err instanceof ParleyError && err.code === 'ERROR_CODE_CONFLICT') return null;
        if (err instanceof ClosedError || err instanceof DisconnectError || retryable(err)) {
          if (this.closedErr) throw err;
          continue;
        }
        throw err;
      }
    }
  }

  /**
   * The newest replies in the thread under rootSeq with seq < beforeSeq (0:
   * the newest), ascending. Replies are delivered live like any message
   * (with `threadRoot` set); this pages a thread's history.
   */
  async threadHistory(conversationId: string, rootSeq: number, beforeSeq = 0, limit = 30): Promise<MessagePage> {
    return (await this.request('threadHistory', { conversationId, rootSeq, beforeSeq, limit }, true)).messages!;
  }

  /** The replies in the thread under rootSeq with seq > afterSeq, ascending (forward paging). */
  async syncThread(conversationId: string, rootSeq: number, afterSeq = 0, limit?: number): Promise<MessagePage> {
    return (await this.request('threadHistory', { conversationId, rootSeq, afterSeq, limit }, true)).messages!;
  }

  /**
   * Starts a streamed message (users with the bot role only; others get
   * ERROR_CODE_PERMISSION_DENIED): text appended with `append` reaches the
   * members online as `streamChunk` events, and `finish` stores it as one
   * message. A stream belongs to its user on the server node that opened it
   * (it outlives a dropped connection to the same node); its calls go on
   * the client's current connection and are not retried (a repeated append
   * would add the text twice): a call cut by a dropped link fails with
   * ClosedError, and one that reaches another node, or comes after the
   * server ended the stream, with ERROR_CODE_BAD_REQUEST. The server stores
   * a stream that went quiet (`stream_idle_timeout`, 30 s by default) as it
   * is, marked incomplete.
   */
  async openStream(input: StreamInput): Promise<MessageStream> {
    const body: StreamOpen = { clientMsgId: input.clientMsgId ?? newClientMsgId() };
    if (input.to) body.to = input.to;
    if (input.conversationId) body.conversationId = input.conversationId;
    if (input.contentType) body.contentType = input.contentType;
    if (input.replyTo) body.replyTo = input.replyTo;
    if (input.threadRoot) body.threadRoot = input.threadRoot;
    if (input.mentions?.length) body.mentions = [...input.mentions];
    if (input.mentionAll) body.mentionAll = true;
    const f = await this.request('streamOpen', body);
    const send = <K extends 'streamAppend' | 'streamFinish'>(name: K, b: ClientBodies[K]) => this.request(name, b);
    if (f.sendAck) return new MessageStream(send, body.clientMsgId!, f.sendAck.conversationId, '', f.sendAck);
    const o = f.streamOpened!;
    return new MessageStream(send, body.clientMsgId!, o.conversationId, o.streamId, null);
  }

  // Search (docs/search.md)

  /**
   * Finds messages this user may read, newest first: every word of query
   * in any order (case and accents do not matter; in Chinese, Japanese,
   * Korean and Thai a query also matches inside longer runs of
   * characters), or with `phrase` the words in this order. opts filter
   * (`conversationId`, `from`, `contentType`, `hasAttachment`, `since` and
   * `until` in unix ms) and page: pass the page's `next` as `before` for
   * the following one (absent at the end); `limit` is at most 100
   * (default 20). Each hit's `highlights` index its `snippet` string
   * directly (UTF-16 code units; the server's UTF-8 byte ranges are
   * converted). Retried across reconnects and, a few times, when the node
   * runs as many searches as it allows (ERROR_CODE_TOO_MANY_REQUESTS,
   * thrown if it lasts). ERROR_CODE_UNAVAILABLE, thrown at once: search
   * is off on this server, its index failed, or the search ran too long;
   * ERROR_CODE_BAD_REQUEST: an empty or overlong query (over 256 bytes or
   * 32 words), a limit over 100, since after until;
   * ERROR_CODE_PERMISSION_DENIED: a conversation filter the user does not
   * read. A page may hold fewer hits than the limit, even none, and still
   * have a `next`: the server bounds the work of each search. On a single
   * node, newly sent messages are found a moment after they are stored (the
   * index follows the store).
   */
  async search(query: string, opts: SearchOptions = {}): Promise<SearchPage> {
    const body: Search = { ...opts, query };
    const big = this.oversized('search', body);
    if (big) throw big;
    // Not request(.., retry): it would also retry UNAVAILABLE, which here
    // mostly means search is off, and the app should say so at once.
    for (let again = 0; ; ) {
      const conn = await this.liveConn();
      let r: SearchResults;
      try {
        r = (await conn.request('search', body)).searchResults ?? {};
      } catch (err) {
        if (this.closedErr) throw err;
        if (err instanceof ClosedError || err instanceof DisconnectError) continue;
        const busy = err instanceof ParleyError && err.code === 'ERROR_CODE_TOO_MANY_REQUESTS';
        if ((busy || err instanceof TimeoutError) && again < 4) {
          await new Promise((w) => setTimeout(w, jitter(250 * 2 ** again++)));
          continue;
        }
        throw err;
      }
      const page: SearchPage = { hits: (r.hits ?? []).map(searchMatch) };
      if (r.next) page.next = r.next;
      return page;
    }
  }

  /**
   * Every page of a search, one at a time (opts as for {@link search},
   * `before` where to start): `for await (const page of
   * client.searchPages('lantern')) ...`; stop early with `break`.
   */
  async *searchPages(query: string, opts: SearchOptions = {}): AsyncGenerator<SearchPage, void, undefined> {
    let before = opts.before;
    for (;;) {
      const page = await this.search(query, { ...opts, before });
      yield page;
      if (!page.next) return;
      before = page.next;
    }
  }

  // Rooms (not stored: a push reaches the sessions in the room at that moment)

  /** Joins a room (rejoined after every reconnect). */
  async joinRoom(room: string): Promise<RoomInfo> {
    this.rooms.add(room);
    return (await this.request('joinRoom', { room }, true)).room!;
  }
  leaveRoom(room: string): Promise<void> {
    this.rooms.delete(room);
    return this.ok('leaveRoom', { room }, true);
  }
  roomSend(room: string, op: number, body: Uint8Array | string): Promise<void> {
    return this.ok('roomSend', { room, op, body: typeof body === 'string' ? utf8(body) : body });
  }

  // Offline push notifications

  /**
   * Sets where this device gets notifications while it is offline (or does
   * not acknowledge a message in time), replacing any target it had: APNs,
   * FCM or Web Push. deviceId: empty for this session's device (the only one
   * a socket may name). Safe to repeat; retried across reconnects. Invalid
   * targets fail with ParleyError ERROR_CODE_BAD_REQUEST; a target naming no
   * platform or several with TypeError.
   */
  registerPush(target: PushTarget, deviceId?: string): Promise<void> {
    let body: PushTarget;
    try {
      body = pushTargetBody(target);
    } catch (err) {
      return Promise.reject(err as Error);
    }
    return this.ok('registerPush', deviceId ? { deviceId, ...body } : body, true);
  }

  /** Removes this device's push target (also fine when it has none). */
  unregisterPush(deviceId?: string): Promise<void> {
    return this.ok('unregisterPush', deviceId ? { deviceId } : {}, true);
  }

  /**
   * Turns on Web Push for this browser: asks the server for its VAPID key,
   * subscribes the service worker's registration with it
   * (`pushManager.subscribe({userVisibleOnly: true, applicationServerKey})`,
   * reusing an existing subscription made with the same key), and registers
   * the subscription as this device's push target. Resolves with the
   * PushSubscription. Call it after Notification.requestPermission() is
   * granted; the browser refuses (NotAllowedError) otherwise.
   */
  async subscribeWebPush<S extends WebPushSubscription>(registration: PushRegistration<S>, opts: SubscribeWebPushOptions = {}): Promise<S> {
    const publicKey = opts.publicKey ?? (await webPushKey({ baseUrl: opts.baseUrl ?? this.httpOrigin(), fetch: opts.fetch }));
    const sub = await subscribeWithKey(registration, publicKey);
    await this.registerPush({ webpush: webPushTarget(sub) }, opts.deviceId);
    return sub;
  }

  /**
   * Turns Web Push off for this browser: unregisters the device's target on
   * the server and ends the registration's push subscription (both are
   * attempted; the first failure is thrown after). Resolves with whether a
   * subscription was ended. The server request waits for a connection:
   * bound it with a timeout where that matters (e.g. on sign-out, which
   * removes the target on the server anyway).
   */
  async unsubscribeWebPush(registration: PushRegistration, deviceId?: string): Promise<boolean> {
    const sub = await registration.pushManager.getSubscription();
    const [server, local] = await Promise.allSettled([this.unregisterPush(deviceId), sub ? sub.unsubscribe() : Promise.resolve(false)]);
    if (server.status === 'rejected') throw server.reason;
    if (local.status === 'rejected') throw local.reason;
    return local.value;
  }

  // Files (docs/media.md)

  /**
   * A short-lived URL of a file: one carried by message (conversationId,
   * seq), or, without a conversation, one this user uploaded. thumbnail
   * asks for its thumbnail (Attachment.thumbnail). The URL is absolute (a
   * path the server gives is resolved against its HTTP origin) and works
   * without a token until expiresAt (unix ms; 10 minutes by default): ask
   * again for a new one rather than keeping it. Anything the user may not
   * read is ERROR_CODE_PERMISSION_DENIED.
   */
  async fileUrl(fileId: string, conversationId?: string, seq?: number, thumbnail?: boolean): Promise<FileUrlResult> {
    const body: ClientBodies['fileUrl'] = { fileId };
    if (conversationId) {
      body.conversationId = conversationId;
      body.seq = seq;
    }
    if (thumbnail) body.thumbnail = true;
    const r = (await this.request('fileUrl', body, true)).fileUrl;
    if (!r?.url) throw badResponse('no url in the answer');
    return { ...r, url: resolveFileUrl(this.httpBase(), r.url) };
  }

  /**
   * Uploads a file in one request (POST /v1/files) with this client's token
   * and returns it as the server describes it, to pass in `send`'s
   * attachments. name defaults to the File's name. In browsers onProgress
   * follows the bytes sent (XMLHttpRequest). Refusals reject with a
   * ParleyError of the server's code (ERROR_CODE_TOO_LARGE,
   * ERROR_CODE_UNSUPPORTED_MEDIA_TYPE, ERROR_CODE_QUOTA_EXCEEDED; the HTTP
   * answer's own code in `apiCode`); signal cancels (an AbortError).
   */
  uploadFile(file: Blob, name?: string, opts?: UploadOptions): Promise<Attachment> {
    return uploadFile(this.httpOptions(), () => this.currentToken(), file, name, opts);
  }

  /**
   * Uploads a file resumably (tus 1.0.0 at /v1/uploads/): in chunks, a
   * failed request resumed from what the server holds. Resolves with the
   * file's id, name and size; the message that carries it has the server's
   * full description. With keepOnAbort and onCreated, an aborted upload can
   * be continued later by passing its URL as uploadUrl.
   */
  uploadResumable(file: Blob, name?: string, opts?: ResumableOptions): Promise<Attachment> {
    return uploadResumable(this.httpOptions(), () => this.currentToken(), file, name, opts);
  }

  /** Uploads with uploadFile, or uploadResumable for files over `resumableAbove` (default 4 MiB). */
  upload(file: Blob, name?: string, opts: AutoUploadOptions = {}): Promise<Attachment> {
    return file.size > (opts.resumableAbove ?? RESUMABLE_ABOVE) ? this.uploadResumable(file, name, opts) : this.uploadFile(file, name, opts);
  }

  private currentToken(): string | Promise<string> {
    return this.opts.getToken ? this.opts.getToken() : this.opts.token!;
  }

  private httpOptions(): { baseUrl: string; fetch?: typeof fetch } {
    return { baseUrl: this.httpBase(), fetch: this.opts.fetch };
  }

  /** The server's HTTP base: baseUrl, else the origin of the WebSocket URL in use. */
  private httpBase(): string {
    return (this.opts.baseUrl ?? this.httpOrigin()).replace(/\/$/, '');
  }

  /** The HTTP origin of the server: that of the WebSocket URL in use (ws: → http:, wss: → https:). */
  private httpOrigin(): string {
    return new URL((this.connectedUrl || this.urls[0]!).replace(/^ws/i, 'http')).origin;
  }
}

type StreamRequest = <K extends 'streamAppend' | 'streamFinish'>(name: K, body: ClientBodies[K]) => Promise<ServerFrame>;

/**
 * A streamed message being written (ParleyClient.openStream). Calls are sent
 * in order, each once, on the client's connection.
 */
export class MessageStream {
  private done: Promise<SendAck> | null;
  private sent = 0;
  /** @internal */
  constructor(
    private readonly call: StreamRequest,
    /** The clientMsgId of the message the stream becomes. */
    readonly clientMsgId: string,
    readonly conversationId: string,
    /** The stream's id: StreamChunk.streamId and, once stored, Message.streamId. */
    readonly streamId: string,
    finished: SendAck | null,
  ) {
    this.done = finished ? Promise.resolve(finished) : null;
  }

  /** UTF-8 bytes appended so far (the next chunk's offset). */
  get length(): number {
    return this.sent;
  }

  /** Whether finish or abandon was called (or the stream was already stored when opened). */
  get finished(): boolean {
    return this.done !== null;
  }

  /** Adds text; members online get it as a streamChunk. Resolves once the server took it. */
  async append(text: string): Promise<void> {
    if (this.done) throw new Error('parley: the stream is finished');
    if (!text) return;
    const n = utf8(text).length;
    this.sent += n;
    try {
      await this.call('streamAppend', { streamId: this.streamId, text });
    } catch (err) {
      if (err instanceof ParleyError) this.sent -= n; // refused: not appended
      throw err;
    }
  }

  /** Stores what was appended as one message; resolves with its ack. Calling it again returns the same ack. */
  finish(): Promise<SendAck> {
    return (this.done ??= this.call('streamFinish', { streamId: this.streamId }).then((f) => f.sendAck!));
  }

  /** Stores what was appended marked incomplete (the sender gave up). */
  abandon(): Promise<SendAck> {
    return (this.done ??= this.call('streamFinish', { streamId: this.streamId, abandon: true }).then((f) => f.sendAck!));
  }
}

/** The send frame of a SendInput. */
function sendBody(input: SendInput): Send {
  const send: Send = {
    clientMsgId: input.clientMsgId ?? newClientMsgId(),
    contentType: input.contentType ?? 'text',
    payload: typeof input.payload === 'string' ? utf8(input.payload) : input.payload,
  };
  if (input.to) send.to = input.to;
  if (input.conversationId) send.conversationId = input.conversationId;
  if (input.attachments?.length) send.attachments = input.attachments.map((a) => ({ id: typeof a === 'string' ? a : a.id }));
  if (input.replyTo) send.replyTo = input.replyTo;
  if (input.mentions?.length) send.mentions = [...input.mentions];
  if (input.mentionAll) send.mentionAll = true;
  if (input.threadRoot) send.threadRoot = input.threadRoot;
  if (input.searchText) send.searchText = input.searchText;
  return send;
}

/** d/2 + a random part of d/2: many clients do not reconnect in step. */
function jitter(ms: number): number {
  return ms / 2 + Math.random() * (ms / 2);
}

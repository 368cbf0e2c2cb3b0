// An in-process stand-in for a Parley server, for unit tests: it speaks the
// JSON protocol over a fake WebSocket and lets a test script every reply.
import { toBase64 } from '../../src/codec.js';
import type { WebSocketLike } from '../../src/connection.js';
import type { ClientFrame, Conversation, Message, ServerFrame } from '../../src/types.js';

const INT64 = new Set([
  'id',
  'seq',
  'lastSeq',
  'deliveredSeq',
  'readSeq',
  'serverTime',
  'targetSeq',
  'unreadCount',
  'messageId',
  'size',
  'durationMs',
  'expiresAt',
  'replyTo',
  'threadRoot',
  'lastReplySeq',
  'lastReplyAt',
  'reactionVersion',
  'version',
  'pinnedAt',
]);

/** Encodes a server frame the way the real server does: 64-bit integers as strings, bytes as base64. */
export function wire(f: ServerFrame): string {
  return JSON.stringify(f, (k, v: unknown) => {
    if (v instanceof Uint8Array) return toBase64(v);
    if (typeof v === 'number' && INT64.has(k)) return String(v);
    return v;
  });
}

export class FakeSocket implements WebSocketLike {
  readyState = 0;
  onopen: ((ev: unknown) => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code?: number; reason?: string }) => void) | null = null;
  onerror: ((ev: unknown) => void) | null = null;
  userId = '';
  constructor(
    readonly server: FakeServer,
    readonly url: string,
  ) {}
  send(data: string): void {
    if (this.readyState !== 1) throw new Error('not open');
    const f = JSON.parse(data) as ClientFrame;
    this.server.frames.push(f);
    queueMicrotask(() => this.server.handle(this, f));
  }
  close(code = 1000): void {
    if (this.readyState >= 2) return;
    this.readyState = 3;
    setTimeout(() => this.onclose?.({ code }), 0);
  }
  /** Sends a frame to the client. */
  push(f: ServerFrame): void {
    if (this.readyState === 1) this.onmessage?.({ data: wire(f) });
  }
}

export interface StoredMsg extends Message {
  clientMsgId: string;
}

export class FakeServer {
  /** Every frame received, in order. */
  frames: ClientFrame[] = [];
  /** URLs of every connection attempt. */
  attempts: string[] = [];
  sockets: FakeSocket[] = [];
  convs = new Map<string, StoredMsg[]>();
  /** Fields added to a conversation's entry in the conversation list (reactionVersion, pins, ...). */
  convExtra = new Map<string, Partial<Conversation>>();
  /** When false, new connections are refused (closed before opening). */
  accepting = true;
  /** Reply to the next N sends with nothing (the message is still stored). */
  swallowAcks = 0;
  /** Answer pings (false simulates a dead link that the socket does not notice). */
  answerPings = true;
  /** Test hook: return true when the frame was handled. */
  hook: ((s: FakeSocket, f: ClientFrame) => boolean) | null = null;

  readonly WebSocket: new (url: string) => FakeSocket;

  constructor() {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const server = this;
    this.WebSocket = class extends FakeSocket {
      constructor(url: string) {
        super(server, url);
        server.attempts.push(url);
        const sock = this;
        setTimeout(() => {
          if (!server.accepting || url.includes('dead')) {
            sock.readyState = 3;
            sock.onclose?.({ code: 1006 });
            return;
          }
          sock.readyState = 1;
          server.sockets.push(sock);
          sock.onopen?.({});
        }, 1);
      }
    };
  }

  get live(): FakeSocket[] {
    return this.sockets.filter((s) => s.readyState === 1);
  }

  /** Stores a message from `from` and returns it (not pushed). */
  store(conv: string, from: string, text: string, clientMsgId = 'srv-' + Math.random()): StoredMsg {
    const list = this.convs.get(conv) ?? [];
    this.convs.set(conv, list);
    const m: StoredMsg = {
      conversationId: conv,
      seq: list.length + 1,
      messageId: String(1000 + list.length),
      from,
      clientMsgId,
      contentType: 'text',
      payload: new TextEncoder().encode(text),
      kind: 'MESSAGE_KIND_NORMAL',
    };
    list.push(m);
    return m;
  }

  /** Drops every connection (as a network failure would). */
  dropAll(): void {
    for (const s of this.live) s.close(1006);
  }

  handle(s: FakeSocket, f: ClientFrame): void {
    if (this.hook?.(s, f)) return;
    const id = f.id;
    if (f.auth) {
      if (f.auth.token === 'bad') {
        s.push({ id, error: { code: 'ERROR_CODE_UNAUTHENTICATED' } });
        s.push({ disconnect: { code: 'DISCONNECT_CODE_AUTH_FAILED' } });
        s.close();
        return;
      }
      s.userId = f.auth.token;
      s.push({ id, authOk: { userId: f.auth.token, sessionId: 's' + this.sockets.length, heartbeatSeconds: 30 } });
    } else if (f.ping) {
      if (this.answerPings) s.push({ id, pong: {} });
    } else if (f.send) {
      const conv = f.send.conversationId ?? [s.userId, f.send.to!].sort().join(':').replace(/^/, 'p:');
      const list = this.convs.get(conv) ?? [];
      const dup = list.find((m) => m.from === s.userId && m.clientMsgId === f.send!.clientMsgId);
      const m = dup ?? this.store(conv, s.userId, '', f.send.clientMsgId);
      if (this.swallowAcks > 0) {
        this.swallowAcks--;
        return;
      }
      s.push({ id, sendAck: { clientMsgId: m.clientMsgId, conversationId: conv, seq: m.seq, messageId: m.messageId!, duplicate: !!dup } });
    } else if (f.syncConversations) {
      const conversations = [...this.convs.entries()].map(([conversationId, l]) => ({ ...this.convExtra.get(conversationId), conversationId, lastSeq: l.length }));
      s.push({ id, conversations: { conversations } });
    } else if (f.syncMessages) {
      const list = this.convs.get(f.syncMessages.conversationId) ?? [];
      const after = f.syncMessages.afterSeq ?? 0;
      const limit = f.syncMessages.limit ?? 100;
      const page = list.filter((m) => m.seq > after).slice(0, limit);
      const last = page.length ? page[page.length - 1]!.seq : after;
      s.push({ id, messages: { conversationId: f.syncMessages.conversationId, messages: page, hasMore: last < list.length, lastSeq: list.length } });
    } else if (id) {
      s.push({ id, ok: {} });
    }
  }
}

// One authenticated WebSocket connection: requests matched to replies by id,
// pushed frames handed to a callback in arrival order, heartbeats.
import { decodeFrame, encodeFrame, text } from './codec.js';
import { ClosedError, DisconnectError, ParleyError, TimeoutError } from './errors.js';
import type { AuthOk, ClientBodies, ClientBodyName, ClientFrame, ServerFrame } from './types.js';

/**
 * An event handler property of {@link WebSocketLike}. Written as a method's
 * type so that its parameter is compared both ways: the browser's WebSocket
 * and the `ws` package's declare their handlers with their own, richer event
 * types (`MessageEvent`, `CloseEvent`), which a plain function type here would
 * refuse.
 */
export type WebSocketHandler<E> = { handle(ev: E): unknown }['handle'];

/** The part of the WebSocket API the SDK uses (the browser's, or the `ws` package's). */
export interface WebSocketLike {
  readonly readyState: number;
  onopen: WebSocketHandler<unknown> | null;
  onmessage: WebSocketHandler<{ data: unknown }> | null;
  onclose: WebSocketHandler<{ code?: number; reason?: string }> | null;
  onerror: WebSocketHandler<unknown> | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

/** A WebSocket class: `globalThis.WebSocket` in browsers and Node 22+, or `WebSocket` from the `ws` package. */
export type WebSocketConstructor = new (url: string) => WebSocketLike;

export interface ConnectionOptions {
  token: string;
  deviceId: string;
  deviceType: string;
  WebSocket: WebSocketConstructor;
  /** Bounds connect + auth, ms (default 10,000). */
  dialTimeoutMs?: number;
  /** Bounds the wait for each reply, ms (default 10,000). */
  requestTimeoutMs?: number;
  /** Ping interval override, ms; default: the server's heartbeatSeconds. */
  heartbeatMs?: number;
  /** Frames the server pushes (id 0): message, receipt, typing, ... */
  onPush?: (f: ServerFrame, c: Connection) => void;
  /** Called once when the connection ends, with why. */
  onClose?: (err: Error) => void;
}

const OPEN = 1;

/** The frame limit assumed when the server's authOk does not give one (the server's default). */
export const DEFAULT_MAX_FRAME_BYTES = 65_536;

/** Bytes of s in UTF-8, as the WebSocket sends it (a lone surrogate as U+FFFD). */
export function utf8Length(s: string): number {
  let n = s.length;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) continue;
    if (c < 0x800) {
      n += 1;
      continue;
    }
    n += 2; // 3 bytes; a surrogate pair is 4 bytes for its 2 units
    const next = s.charCodeAt(i + 1);
    if (c >= 0xd800 && c <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) i++;
  }
  return n;
}

/** The refusal of a frame over the server's limit, answered without sending it. */
export function frameTooLarge(bytes: number, limit: number): ParleyError {
  return new ParleyError('ERROR_CODE_TOO_LARGE', `the request is ${bytes} bytes, over the server's frame limit of ${limit}`, false);
}

interface Pending {
  resolve: (f: ServerFrame) => void;
  reject: (e: Error) => void;
  timer: ReturnType<typeof setTimeout>;
  /** The size of the request's frame in bytes (0 until written; exact for frames near the limit). */
  bytes: number;
}

export class Connection {
  readonly url: string;
  authOk!: AuthOk;
  /**
   * The largest frame the server accepts (AuthOk.maxFrameBytes). A request
   * over it fails with ParleyError ERROR_CODE_TOO_LARGE without being sent:
   * the server would close the connection for it.
   */
  maxFrameBytes = DEFAULT_MAX_FRAME_BYTES;
  private ws: WebSocketLike;
  private opts: ConnectionOptions;
  private nextId = 1;
  private pending = new Map<number, Pending>();
  private closedErr: Error | null = null;
  private disc: DisconnectError | null = null;
  private lastWrite = Date.now();
  private lastRead = Date.now();
  private hbTimer: ReturnType<typeof setInterval> | null = null;

  private constructor(url: string, ws: WebSocketLike, opts: ConnectionOptions) {
    this.url = url;
    this.ws = ws;
    this.opts = opts;
  }

  /** Opens a WebSocket to url, authenticates, and resolves once the server accepted the token. */
  static open(url: string, opts: ConnectionOptions): Promise<Connection> {
    return new Promise((resolve, reject) => {
      let ws: WebSocketLike;
      try {
        ws = new opts.WebSocket(url);
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      const c = new Connection(url, ws, opts);
      let settled = false;
      const timer = setTimeout(() => fail(new TimeoutError('parley: connect timed out')), opts.dialTimeoutMs ?? 10_000);
      const fail = (err: Error) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        c.shutdown(err);
        reject(err);
      };
      ws.onerror = () => {}; // onclose follows and says it
      ws.onclose = (ev) => {
        const err = c.disc ?? new ClosedError(`parley: connection closed (${ev?.code ?? 'no code'})`);
        if (!settled) fail(err);
        else c.shutdown(err);
      };
      ws.onmessage = (ev) => c.receive(ev.data);
      ws.onopen = () => {
        c.request('auth', { token: opts.token, deviceId: opts.deviceId, deviceType: opts.deviceType }).then(
          (f) => {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            c.authOk = f.authOk!;
            c.maxFrameBytes = c.authOk.maxFrameBytes || DEFAULT_MAX_FRAME_BYTES;
            c.startHeartbeat();
            resolve(c);
          },
          (err: Error) => fail(c.disc ?? err),
        );
      };
    });
  }

  /** Why the connection ended, or null while it is open. */
  get error(): Error | null {
    return this.closedErr;
  }

  get open(): boolean {
    return this.closedErr === null;
  }

  /** Sends a request and resolves with the reply frame; an `error` reply rejects with ParleyError. */
  request<K extends ClientBodyName>(name: K, body: ClientBodies[K], timeoutMs?: number): Promise<ServerFrame> {
    if (this.closedErr) return Promise.reject(this.closedErr);
    const id = this.nextId++;
    return new Promise<ServerFrame>((resolve, reject) => {
      const ms = timeoutMs ?? this.opts.requestTimeoutMs ?? 10_000;
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new TimeoutError());
      }, ms);
      const p: Pending = { resolve, reject, timer, bytes: 0 };
      this.pending.set(id, p);
      try {
        p.bytes = this.write({ id, [name]: body } as ClientFrame);
      } catch (err) {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(err);
      }
    });
  }

  /** Sends a frame that wants no reply (id 0): delivered acks, typing. */
  notify<K extends ClientBodyName>(name: K, body: ClientBodies[K]): void {
    this.write({ [name]: body } as ClientFrame);
  }

  /** Closes the connection; pending requests fail with ClosedError. */
  close(err: Error = new ClosedError('parley: closed by the client')): void {
    this.shutdown(err);
  }

  /** Sends f; returns its size in bytes. */
  private write(f: ClientFrame): number {
    if (this.closedErr) throw this.closedErr;
    if (this.ws.readyState !== OPEN) throw new ClosedError();
    const data = encodeFrame(f);
    // At most 3 bytes per UTF-16 unit: most frames need no count.
    const bytes = data.length * 3 <= this.maxFrameBytes ? data.length : utf8Length(data);
    if (bytes > this.maxFrameBytes) throw frameTooLarge(bytes, this.maxFrameBytes);
    this.ws.send(data);
    this.lastWrite = Date.now();
    return bytes;
  }

  /**
   * The server refused a frame as too large (and is closing the connection).
   * Its error carries no id, so the request to fail is the largest one
   * awaiting a reply: whichever frame was over the limit, that one is at
   * least as large. Failing it (instead of the ClosedError every other
   * pending request gets) keeps it from being resent on the next connection.
   */
  private failOversized(): void {
    let worst: [number, Pending] | null = null;
    for (const e of this.pending) if (!worst || e[1].bytes > worst[1].bytes) worst = e;
    if (!worst) return;
    const [id, p] = worst;
    this.pending.delete(id);
    clearTimeout(p.timer);
    p.reject(new ParleyError('ERROR_CODE_TOO_LARGE', `the server refused the request's frame (${p.bytes} bytes) as over its limit`, false));
  }

  private receive(data: unknown): void {
    this.lastRead = Date.now();
    let f: ServerFrame;
    try {
      f = decodeFrame(typeof data === 'string' ? data : text(data instanceof Uint8Array ? data : new Uint8Array(data as ArrayBuffer)));
    } catch {
      this.shutdown(new Error('parley: undecodable frame from the server'));
      return;
    }
    if (f.disconnect) {
      const d = f.disconnect;
      this.disc = new DisconnectError(d.code, d.reason, d.reconnectAfterMs ?? 0);
      return; // the close follows
    }
    if (f.id) {
      const p = this.pending.get(f.id);
      if (!p) return; // a reply that timed out
      this.pending.delete(f.id);
      clearTimeout(p.timer);
      const e = f.error;
      if (e) p.reject(new ParleyError(e.code, e.message, e.temporary, undefined, { reason: e.reason, rejectCode: e.rejectCode }));
      else p.resolve(f);
      return;
    }
    // An error without id precedes a disconnect.
    if (f.error) {
      if (f.error.code === 'ERROR_CODE_FRAME_TOO_LARGE') this.failOversized();
      return;
    }
    this.opts.onPush?.(f, this);
  }

  private startHeartbeat(): void {
    const hb = this.opts.heartbeatMs ?? (this.authOk.heartbeatSeconds || 30) * 1000;
    if (hb <= 0) return;
    this.hbTimer = setInterval(() => {
      const now = Date.now();
      if (now - this.lastRead > 2.5 * hb) {
        // Nothing, not even a pong, for 2.5 heartbeats: the link is dead
        // even if the socket has not noticed.
        this.shutdown(new ClosedError('parley: no answer from the server (heartbeat)'));
        try {
          this.ws.close();
        } catch {
          /* already closing */
        }
        return;
      }
      if (now - this.lastWrite >= hb) this.request('ping', {}, hb).catch(() => {});
    }, Math.max(10, Math.floor(hb / 4)));
  }

  private shutdown(err: Error): void {
    if (this.closedErr) return;
    this.closedErr = err;
    if (this.hbTimer) clearInterval(this.hbTimer);
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.pending.clear();
    try {
      if (this.ws.readyState <= OPEN) this.ws.close(1000);
    } catch {
      /* ignore */
    }
    this.opts.onClose?.(err);
  }
}

// Parley TypeScript SDK, bundled for browsers. Generated from sdk/typescript/src
// by `npm run bundle` in sdk/typescript; do not edit.
var __defProp = Object.defineProperty;
var __defNormalProp = (obj, key, value) => key in obj ? __defProp(obj, key, { enumerable: true, configurable: true, writable: true, value }) : obj[key] = value;
var __publicField = (obj, key, value) => __defNormalProp(obj, typeof key !== "symbol" ? key + "" : key, value);

// src/codec.ts
var NUMERIC = /* @__PURE__ */ new Set([
  "id",
  "seq",
  "lastSeq",
  "deliveredSeq",
  "readSeq",
  "unreadCount",
  "peerDeliveredSeq",
  "peerReadSeq",
  "clearedSeq",
  "leftSeq",
  "targetSeq",
  "serverTime",
  "editedAt",
  "mutedUntil",
  "createdAt",
  "joinedAt",
  "lastSeen",
  "updatedAt"
]);
var BYTES = /* @__PURE__ */ new Set(["payload", "body"]);
var B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
var B64_INDEX = (() => {
  const t = new Int16Array(128).fill(-1);
  for (let i = 0; i < B64.length; i++) t[B64.charCodeAt(i)] = i;
  t["-".charCodeAt(0)] = 62;
  t["_".charCodeAt(0)] = 63;
  return t;
})();
function toBase64(b) {
  let out = "";
  let i = 0;
  for (; i + 2 < b.length; i += 3) {
    const n = b[i] << 16 | b[i + 1] << 8 | b[i + 2];
    out += B64[n >> 18] + B64[n >> 12 & 63] + B64[n >> 6 & 63] + B64[n & 63];
  }
  if (i < b.length) {
    const n = b[i] << 16 | (i + 1 < b.length ? b[i + 1] : 0) << 8;
    out += B64[n >> 18] + B64[n >> 12 & 63] + (i + 1 < b.length ? B64[n >> 6 & 63] : "=") + "=";
  }
  return out;
}
function toBase64Url(b) {
  return toBase64(b).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}
function fromBase64(s) {
  let len = s.length;
  while (len > 0 && s.charCodeAt(len - 1) === 61) len--;
  const out = new Uint8Array(Math.floor(len * 3 / 4));
  let bits = 0;
  let acc = 0;
  let o = 0;
  for (let i = 0; i < len; i++) {
    const c = s.charCodeAt(i);
    const v = c < 128 ? B64_INDEX[c] : -1;
    if (v < 0) throw new Error("parley: invalid base64");
    acc = acc << 6 | v;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = acc >> bits & 255;
    }
  }
  return out.subarray(0, o);
}
var enc = new TextEncoder();
var dec = new TextDecoder();
function utf8(s) {
  return enc.encode(s);
}
function text(b) {
  return b ? dec.decode(b) : "";
}
function encodeFrame(f) {
  return JSON.stringify(f, (_k, v) => v instanceof Uint8Array ? toBase64(v) : v);
}
function decodeFrame(data) {
  return JSON.parse(data, (k, v) => {
    if (typeof v === "string") {
      if (NUMERIC.has(k)) return Number(v);
      if (BYTES.has(k)) return fromBase64(v);
    } else if (k === "seqs" && Array.isArray(v)) {
      return v.map(Number);
    }
    return v;
  });
}

// src/errors.ts
var ParleyError = class extends Error {
  constructor(code, message, temporary) {
    super(`parley: ${code}${message ? ": " + message : ""}`);
    __publicField(this, "code");
    /**
     * Whether the same request may succeed later, as the server said
     * (`temporary` in the frame or body); undefined from servers that do not
     * send it. {@link isTemporary} falls back to the code then.
     */
    __publicField(this, "temporary");
    this.name = "ParleyError";
    this.code = code;
    this.temporary = temporary;
  }
};
var temporaryCodes = /* @__PURE__ */ new Set([
  "ERROR_CODE_UNAVAILABLE",
  "ERROR_CODE_TOO_MANY_REQUESTS",
  "unavailable",
  "too_many_requests"
]);
function isTemporary(err) {
  if (!(err instanceof ParleyError)) return false;
  return err.temporary ?? temporaryCodes.has(err.code);
}
var DisconnectError = class extends Error {
  constructor(code, reason = "", reconnectAfterMs = 0) {
    super(`parley: disconnected: ${code}${reason ? " (" + reason + ")" : ""}`);
    __publicField(this, "code");
    __publicField(this, "reason");
    __publicField(this, "reconnectAfterMs");
    this.name = "DisconnectError";
    this.code = code;
    this.reason = reason;
    this.reconnectAfterMs = reconnectAfterMs;
  }
};
var ClosedError = class extends Error {
  constructor(message = "parley: connection closed") {
    super(message);
    this.name = "ClosedError";
  }
};
var TimeoutError = class extends Error {
  constructor(message = "parley: request timed out") {
    super(message);
    this.name = "TimeoutError";
  }
};
function isCode(err, code) {
  return err instanceof ParleyError && err.code === code;
}

// src/connection.ts
var OPEN = 1;
var Connection = class _Connection {
  constructor(url, ws, opts) {
    __publicField(this, "url");
    __publicField(this, "authOk");
    __publicField(this, "ws");
    __publicField(this, "opts");
    __publicField(this, "nextId", 1);
    __publicField(this, "pending", /* @__PURE__ */ new Map());
    __publicField(this, "closedErr", null);
    __publicField(this, "disc", null);
    __publicField(this, "lastWrite", Date.now());
    __publicField(this, "lastRead", Date.now());
    __publicField(this, "hbTimer", null);
    this.url = url;
    this.ws = ws;
    this.opts = opts;
  }
  /** Opens a WebSocket to url, authenticates, and resolves once the server accepted the token. */
  static open(url, opts) {
    return new Promise((resolve, reject) => {
      let ws;
      try {
        ws = new opts.WebSocket(url);
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      const c = new _Connection(url, ws, opts);
      let settled = false;
      const timer = setTimeout(() => fail(new TimeoutError("parley: connect timed out")), opts.dialTimeoutMs ?? 1e4);
      const fail = (err) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        c.shutdown(err);
        reject(err);
      };
      ws.onerror = () => {
      };
      ws.onclose = (ev) => {
        const err = c.disc ?? new ClosedError(`parley: connection closed (${ev?.code ?? "no code"})`);
        if (!settled) fail(err);
        else c.shutdown(err);
      };
      ws.onmessage = (ev) => c.receive(ev.data);
      ws.onopen = () => {
        c.request("auth", { token: opts.token, deviceId: opts.deviceId, deviceType: opts.deviceType }).then(
          (f) => {
            if (settled) return;
            settled = true;
            clearTimeout(timer);
            c.authOk = f.authOk;
            c.startHeartbeat();
            resolve(c);
          },
          (err) => fail(c.disc ?? err)
        );
      };
    });
  }
  /** Why the connection ended, or null while it is open. */
  get error() {
    return this.closedErr;
  }
  get open() {
    return this.closedErr === null;
  }
  /** Sends a request and resolves with the reply frame; an `error` reply rejects with ParleyError. */
  request(name, body, timeoutMs) {
    if (this.closedErr) return Promise.reject(this.closedErr);
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      const ms = timeoutMs ?? this.opts.requestTimeoutMs ?? 1e4;
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new TimeoutError());
      }, ms);
      this.pending.set(id, { resolve, reject, timer });
      try {
        this.write({ id, [name]: body });
      } catch (err) {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(err);
      }
    });
  }
  /** Sends a frame that wants no reply (id 0): delivered acks, typing. */
  notify(name, body) {
    this.write({ [name]: body });
  }
  /** Closes the connection; pending requests fail with ClosedError. */
  close(err = new ClosedError("parley: closed by the client")) {
    this.shutdown(err);
  }
  write(f) {
    if (this.closedErr) throw this.closedErr;
    if (this.ws.readyState !== OPEN) throw new ClosedError();
    this.ws.send(encodeFrame(f));
    this.lastWrite = Date.now();
  }
  receive(data) {
    this.lastRead = Date.now();
    let f;
    try {
      f = decodeFrame(typeof data === "string" ? data : new TextDecoder().decode(data));
    } catch {
      this.shutdown(new Error("parley: undecodable frame from the server"));
      return;
    }
    if (f.disconnect) {
      const d = f.disconnect;
      this.disc = new DisconnectError(d.code, d.reason, d.reconnectAfterMs ?? 0);
      return;
    }
    if (f.id) {
      const p = this.pending.get(f.id);
      if (!p) return;
      this.pending.delete(f.id);
      clearTimeout(p.timer);
      if (f.error) p.reject(new ParleyError(f.error.code, f.error.message, f.error.temporary));
      else p.resolve(f);
      return;
    }
    if (f.error) return;
    this.opts.onPush?.(f, this);
  }
  startHeartbeat() {
    const hb = this.opts.heartbeatMs ?? (this.authOk.heartbeatSeconds || 30) * 1e3;
    if (hb <= 0) return;
    this.hbTimer = setInterval(() => {
      const now = Date.now();
      if (now - this.lastRead > 2.5 * hb) {
        this.shutdown(new ClosedError("parley: no answer from the server (heartbeat)"));
        try {
          this.ws.close();
        } catch {
        }
        return;
      }
      if (now - this.lastWrite >= hb) this.request("ping", {}, hb).catch(() => {
      });
    }, Math.max(10, Math.floor(hb / 4)));
  }
  shutdown(err) {
    if (this.closedErr) return;
    this.closedErr = err;
    if (this.hbTimer) clearInterval(this.hbTimer);
    for (const p of this.pending.values()) {
      clearTimeout(p.timer);
      p.reject(err);
    }
    this.pending.clear();
    try {
      if (this.ws.readyState <= OPEN) this.ws.close(1e3);
    } catch {
    }
    this.opts.onClose?.(err);
  }
};

// src/emitter.ts
var Emitter = class {
  constructor() {
    __publicField(this, "handlers", /* @__PURE__ */ new Map());
  }
  /** Adds a listener; returns a function that removes it. */
  on(event, fn) {
    let set = this.handlers.get(event);
    if (!set) this.handlers.set(event, set = /* @__PURE__ */ new Set());
    set.add(fn);
    return () => this.off(event, fn);
  }
  off(event, fn) {
    this.handlers.get(event)?.delete(fn);
  }
  emit(event, ...args) {
    const set = this.handlers.get(event);
    if (!set) return;
    for (const fn of [...set]) {
      try {
        fn(...args);
      } catch (err) {
        setTimeout(() => {
          throw err;
        });
      }
    }
  }
};

// src/http.ts
async function call(o, path, init) {
  const f = o.fetch ?? globalThis.fetch;
  const res = await f((o.baseUrl ?? "").replace(/\/$/, "") + path, init);
  if (!res.ok) {
    let code = `http_${res.status}`;
    let message = res.statusText;
    let temporary;
    try {
      const body = await res.json();
      if (body.error?.code) code = body.error.code;
      if (body.error?.message) message = body.error.message;
      if (typeof body.error?.temporary === "boolean") temporary = body.error.temporary;
    } catch {
    }
    throw new ParleyError(code, message, temporary);
  }
  return res;
}
function json(body, token) {
  const headers = { "Content-Type": "application/json" };
  if (token) headers.Authorization = "Bearer " + token;
  return { method: "POST", headers, body: body === void 0 ? void 0 : JSON.stringify(body) };
}
async function register(o, username, password) {
  return (await call(o, "/v1/register", json({ username, password }))).json();
}
async function login(o, username, password) {
  return (await call(o, "/v1/login", json({ username, password }))).json();
}
async function logout(o, token) {
  await call(o, "/v1/logout", json(void 0, token));
}
async function changePassword(o, token, oldPassword, newPassword) {
  const body = { old_password: oldPassword, new_password: newPassword };
  return (await call(o, "/v1/password", json(body, token))).json();
}
async function rpc(o, token, name, body) {
  const res = await call(o, "/v1/rpc", {
    ...json(void 0, token),
    body: encodeFrame({ [name]: body })
  });
  return decodeFrame(await res.text());
}
async function webPushKey(o = {}) {
  const body = await (await call(o, "/v1/push/webpush-key", { method: "GET" })).json();
  if (typeof body.publicKey !== "string" || body.publicKey === "") throw new ParleyError("bad_response", "no publicKey in the answer");
  return body.publicKey;
}

// src/push.ts
function pushTargetBody(t) {
  const kinds = ["apns", "fcm", "webpush"].filter((k) => t?.[k] != null);
  if (kinds.length !== 1) throw new TypeError("parley: a push target has exactly one of apns, fcm or webpush");
  const s = (v) => typeof v === "string" ? v : "";
  if (t.apns) {
    const { deviceToken, topic, sandbox } = t.apns;
    return { apns: sandbox ? { deviceToken: s(deviceToken), topic: s(topic), sandbox: true } : { deviceToken: s(deviceToken), topic: s(topic) } };
  }
  if (t.fcm) return { fcm: { token: s(t.fcm.token) } };
  const w = t.webpush;
  return { webpush: { endpoint: s(w.endpoint), p256dh: s(w.p256dh), auth: s(w.auth) } };
}
function webPushTarget(sub) {
  const p256dh = sub.getKey("p256dh");
  const auth = sub.getKey("auth");
  if (!p256dh || !auth) throw new Error("parley: the push subscription has no p256dh and auth keys");
  return { endpoint: sub.endpoint, p256dh: toBase64Url(new Uint8Array(p256dh)), auth: toBase64Url(new Uint8Array(auth)) };
}
async function subscribeWithKey(registration, publicKey) {
  const key = new Uint8Array(fromBase64(publicKey));
  const pm = registration.pushManager;
  const old = await pm.getSubscription();
  if (old) {
    if (sameBytes(old.options?.applicationServerKey ?? null, key)) return old;
    await old.unsubscribe();
  }
  return pm.subscribe({ userVisibleOnly: true, applicationServerKey: key });
}
function sameBytes(a, b) {
  if (!a || a.byteLength !== b.length) return false;
  const x = new Uint8Array(a);
  for (let i = 0; i < b.length; i++) if (x[i] !== b[i]) return false;
  return true;
}

// src/client.ts
function randomHex(bytes) {
  const b = new Uint8Array(bytes);
  globalThis.crypto.getRandomValues(b);
  let s = "";
  for (const x of b) s += x.toString(16).padStart(2, "0");
  return s;
}
function newClientMsgId() {
  return randomHex(12);
}
function retryable(err) {
  return err instanceof TimeoutError || isTemporary(err);
}
var ParleyClient = class extends Emitter {
  constructor(opts) {
    super();
    __publicField(this, "opts");
    __publicField(this, "urls");
    __publicField(this, "WS");
    __publicField(this, "deviceId");
    __publicField(this, "conn", null);
    __publicField(this, "_state", "connecting");
    __publicField(this, "_userId", "");
    __publicField(this, "closedErr", null);
    __publicField(this, "cursorsMap", /* @__PURE__ */ new Map());
    __publicField(this, "outbox", /* @__PURE__ */ new Map());
    __publicField(this, "inbox", []);
    __publicField(this, "pumping", false);
    __publicField(this, "acks", /* @__PURE__ */ new Map());
    __publicField(this, "connWaiters", []);
    __publicField(this, "wakeSleep", null);
    __publicField(this, "presenceSubs", /* @__PURE__ */ new Set());
    __publicField(this, "rooms", /* @__PURE__ */ new Set());
    __publicField(this, "connectedUrl", "");
    this.opts = opts;
    this.urls = opts.urls?.length ? [...opts.urls] : opts.url ? [opts.url] : [];
    if (this.urls.length === 0) throw new Error("parley: ClientOptions needs urls or url");
    if (!opts.token && !opts.getToken) throw new Error("parley: ClientOptions needs token or getToken");
    const WS = opts.WebSocket ?? globalThis.WebSocket;
    if (!WS) throw new Error("parley: no WebSocket implementation (pass ClientOptions.WebSocket)");
    this.WS = WS;
    this.deviceId = opts.deviceId ?? "web-" + randomHex(6);
    for (const [k, v] of Object.entries(opts.cursors ?? {})) this.cursorsMap.set(k, v);
    queueMicrotask(() => void this.run());
  }
  // ---- state ----
  get state() {
    return this._state;
  }
  /** The authenticated user id (empty before the first connection). */
  get userId() {
    return this._userId;
  }
  /** Why the client stopped, or null while it runs. */
  get error() {
    return this.closedErr;
  }
  /** The highest seq of a conversation handed to the app. */
  cursor(conversationId) {
    return this.cursorsMap.get(conversationId) ?? 0;
  }
  /** Every conversation's cursor (to persist; seed them back with ClientOptions.cursors). */
  cursors() {
    return Object.fromEntries(this.cursorsMap);
  }
  /** Sends waiting for their ack (they are resent after each reconnect). */
  pendingSends() {
    return [...this.outbox.values()].map((e) => e.send);
  }
  /** Resolves once connected and caught up (rejects if the client stops first). */
  waitReady(timeoutMs) {
    return new Promise((resolve, reject) => {
      if (this._state === "ready") return resolve();
      if (this.closedErr) return reject(this.closedErr);
      let timer;
      const offState = this.on("state", (s, err) => {
        if (s === "ready" || s === "closed") {
          offState();
          if (timer) clearTimeout(timer);
          if (s === "ready") resolve();
          else reject(err ?? new ClosedError());
        }
      });
      if (timeoutMs !== void 0)
        timer = setTimeout(() => {
          offState();
          reject(new TimeoutError("parley: not ready in time"));
        }, timeoutMs);
    });
  }
  /** Skips the current backoff wait and reconnects now (e.g. on the browser's `online` event). */
  reconnectNow() {
    this.wakeSleep?.();
  }
  /** Drops the current connection (the client reconnects); for tests and "network changed" hints. */
  dropConnection() {
    this.conn?.close(new ClosedError("parley: connection dropped by the client"));
  }
  /** Stops the client: closes the connection; pending sends fail with ClosedError. */
  close() {
    this.stop(new ClosedError("parley: client closed"));
  }
  stop(err) {
    if (this.closedErr) return;
    this.closedErr = err;
    this.conn?.close(err);
    this.conn = null;
    for (const e of this.outbox.values()) e.reject(err);
    this.outbox.clear();
    this.wakeConnWaiters();
    this.wakeSleep?.();
    this.setState("closed", err);
    this.emit("closed", err);
  }
  setState(s, err) {
    if (this._state === s) return;
    this._state = s;
    this.emit("state", s, err);
  }
  // ---- the connection loop ----
  async run() {
    let failures = 0;
    let next = 0;
    const min = this.opts.minBackoffMs ?? 200;
    const max = Math.max(this.opts.maxBackoffMs ?? 1e4, min);
    const backoff = () => {
      failures++;
      return jitter(Math.min(min * 2 ** Math.min(failures - 1, 20), max));
    };
    while (!this.closedErr) {
      const url = this.urls[next++ % this.urls.length];
      this.setState("connecting");
      let conn;
      let closedP;
      try {
        const token = this.opts.getToken ? await this.opts.getToken() : this.opts.token;
        if (this.closedErr) return;
        let onClose;
        closedP = new Promise((r) => onClose = r);
        conn = await Connection.open(url, {
          token,
          deviceId: this.deviceId,
          deviceType: this.opts.deviceType ?? "web",
          WebSocket: this.WS,
          dialTimeoutMs: this.opts.dialTimeoutMs,
          requestTimeoutMs: this.opts.requestTimeoutMs,
          heartbeatMs: this.opts.heartbeatMs,
          onPush: (f, c) => this.onPush(c, f),
          onClose
        });
      } catch (err2) {
        if (this.closedErr) return;
        const e = err2 instanceof Error ? err2 : new Error(String(err2));
        if (this.permanent(e)) return this.stop(e);
        this.emit("disconnected", e);
        await this.sleep(backoff());
        continue;
      }
      if (this.closedErr) {
        conn.close();
        return;
      }
      this.conn = conn;
      this.connectedUrl = url;
      this._userId = conn.authOk.userId;
      this.setState("syncing");
      this.emit("connected", conn.authOk);
      this.wakeConnWaiters();
      for (const e of this.outbox.values()) this.trySend(e);
      void this.restoreSubscriptions(conn);
      let caughtUp = false;
      let err;
      try {
        await this.catchUp(conn);
        caughtUp = true;
        failures = 0;
        if (conn.open) {
          this.setState("ready");
          void this.pump(conn);
        }
        err = await closedP;
      } catch (e) {
        conn.close(e instanceof Error ? e : new Error(String(e)));
        err = conn.error ?? e;
      }
      if (this.conn === conn) this.conn = null;
      if (this.closedErr) return;
      this.emit("disconnected", err);
      if (err instanceof DisconnectError && this.permanent(err)) return this.stop(err);
      let wait = caughtUp ? jitter(min) : backoff();
      if (err instanceof DisconnectError && err.reconnectAfterMs > 0)
        wait = Math.max(wait, err.reconnectAfterMs + jitter(err.reconnectAfterMs / 2));
      this.setState("connecting", err);
      await this.sleep(wait);
    }
  }
  /** Errors that reconnecting cannot fix. */
  permanent(err) {
    const renew = !!this.opts.getToken;
    if (err instanceof DisconnectError) {
      if (err.code === "DISCONNECT_CODE_KICKED") return true;
      if (err.code === "DISCONNECT_CODE_AUTH_FAILED" || err.code === "DISCONNECT_CODE_TOKEN_REVOKED") return !renew;
      return false;
    }
    if (err instanceof ParleyError) {
      if (err.code === "ERROR_CODE_UNAUTHENTICATED") return !renew;
      return err.code === "ERROR_CODE_BAD_REQUEST" || err.code === "ERROR_CODE_PERMISSION_DENIED";
    }
    return false;
  }
  sleep(ms) {
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
  wakeConnWaiters() {
    const ws = this.connWaiters;
    this.connWaiters = [];
    for (const w of ws) w();
  }
  /** A live connection, waiting for one if needed. */
  async liveConn() {
    for (; ; ) {
      if (this.closedErr) throw this.closedErr;
      if (this.conn?.open) return this.conn;
      await new Promise((r) => this.connWaiters.push(r));
    }
  }
  async restoreSubscriptions(conn) {
    try {
      if (this.presenceSubs.size > 0) {
        const f = await conn.request("subscribePresence", { userIds: [...this.presenceSubs] });
        for (const p of f.presence?.users ?? []) this.emit("presence", p);
      }
      for (const room of this.rooms) await conn.request("joinRoom", { room });
    } catch {
    }
  }
  // ---- receiving ----
  onPush(conn, f) {
    if (f.message) this.inbox.push({ msg: f.message });
    else if (f.receipt) this.inbox.push({ rcpt: f.receipt });
    else {
      if (f.typing) this.emit("typing", f.typing);
      else if (f.presenceEvent) this.emit("presence", f.presenceEvent.presence);
      else if (f.contactEvent) this.emit("contact", f.contactEvent.contact);
      else if (f.hidden) this.emit("hidden", f.hidden);
      else if (f.conversationEvent) this.emit("conversation", f.conversationEvent);
      else if (f.push) this.emit("push", f.push);
      return;
    }
    if (this._state === "ready") void this.pump(conn);
  }
  /** Catch-up after (re)connecting: the conversation list, then every
   *  conversation after its cursor, then what was pushed meanwhile. */
  async catchUp(conn) {
    const convs = await this.allConversationsOn(conn);
    this.emit("conversations", convs);
    for (const c of convs) {
      const id = c.conversationId;
      let cur = this.cursorsMap.get(id);
      if (cur === void 0 && this.opts.resumeFromServer) {
        cur = Math.max(c.deliveredSeq ?? 0, c.clearedSeq ?? 0);
        this.cursorsMap.set(id, cur);
      }
      const last = c.left ? Math.min(c.lastSeq ?? 0, c.leftSeq ?? c.lastSeq ?? 0) : c.lastSeq ?? 0;
      if (last > (cur ?? 0)) await this.syncConv(conn, id, 0);
    }
    this.flushAcks(conn);
  }
  /** Delivers queued pushes one at a time; a gap is filled first. */
  async pump(conn) {
    if (this.pumping) return;
    this.pumping = true;
    try {
      while (this.inbox.length > 0 && conn.open && this.conn === conn) {
        const ev = this.inbox[0];
        if ("msg" in ev) await this.deliverPushed(conn, ev.msg);
        else this.emit("receipt", ev.rcpt);
        this.inbox.shift();
        if (this.inbox.length === 0) this.flushAcks(conn);
      }
    } catch {
    } finally {
      this.pumping = false;
    }
    if (this.inbox.length > 0 && this.conn?.open && this._state === "ready") void this.pump(this.conn);
  }
  async deliverPushed(conn, m) {
    const id = m.conversationId;
    let cur = this.cursorsMap.get(id);
    if (cur === void 0 && this.opts.resumeFromServer) {
      cur = m.seq - 1;
      this.cursorsMap.set(id, cur);
    }
    cur ?? (cur = 0);
    if (m.seq <= cur) return;
    if (m.seq > cur + 1) await this.syncConv(conn, id, m.seq - 1);
    if (m.seq > this.cursor(id)) this.deliver(m);
  }
  /** Delivers a conversation's entries after its cursor, page by page, up to upTo (0: the end).
   *  The server bounds pages by bytes, so a page may hold fewer entries than asked: only
   *  hasMore says whether more follow. A busy server's refusal is retried on the same link. */
  async syncConv(conn, conv, upTo) {
    const limit = this.opts.syncPageSize ?? 200;
    let busy = 0;
    for (; ; ) {
      const cur = this.cursor(conv);
      if (upTo !== 0 && cur >= upTo) return;
      let page;
      try {
        page = (await conn.request("syncMessages", { conversationId: conv, afterSeq: cur, limit })).messages;
      } catch (err) {
        if (err instanceof ParleyError && !retryable(err)) return;
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
        const last = Math.min(page.lastSeq ?? 0, upTo || Infinity);
        if (last > this.cursor(conv)) this.cursorsMap.set(conv, last);
        return;
      }
    }
  }
  deliver(m) {
    this.cursorsMap.set(m.conversationId, Math.max(this.cursor(m.conversationId), m.seq));
    if (this.opts.autoDeliveredAck !== false) this.acks.set(m.conversationId, m.seq);
    this.emit("message", m);
  }
  flushAcks(conn) {
    if (!conn.open) return;
    for (const [conversationId, seq] of this.acks) {
      try {
        conn.notify("delivered", { conversationId, seq });
      } catch {
        return;
      }
    }
    this.acks.clear();
  }
  // ---- sending ----
  /**
   * Sends a message and resolves with its ack once it is stored. While
   * disconnected the send waits; after each reconnect it is resent under the
   * same clientMsgId, so it is stored exactly once. Rejects when the server
   * refuses it for good (ParleyError) or the client is closed.
   */
  send(input) {
    if (this.closedErr) return Promise.reject(this.closedErr);
    const send = {
      clientMsgId: input.clientMsgId ?? newClientMsgId(),
      contentType: input.contentType ?? "text",
      payload: typeof input.payload === "string" ? utf8(input.payload) : input.payload
    };
    if (input.to) send.to = input.to;
    if (input.conversationId) send.conversationId = input.conversationId;
    return new Promise((resolve, reject) => {
      const e = { send, resolve, reject, inFlight: null };
      this.outbox.set(send.clientMsgId, e);
      this.trySend(e);
    });
  }
  /** Sends UTF-8 text to a user (1:1) or, with a conversation id ("p:…" or "g:…"), into that conversation. */
  sendText(target, text2, clientMsgId) {
    const isConv = target.startsWith("g:") || target.startsWith("p:");
    return this.send({
      ...isConv ? { conversationId: target } : { to: target },
      contentType: "text",
      payload: text2,
      clientMsgId
    });
  }
  trySend(e) {
    const conn = this.conn;
    if (!conn?.open || e.inFlight === conn || !this.outbox.has(e.send.clientMsgId)) return;
    e.inFlight = conn;
    conn.request("send", e.send).then(
      (f) => {
        const ack = f.sendAck;
        this.outbox.delete(e.send.clientMsgId);
        this.ownSeq(ack);
        this.emit("sent", ack);
        e.resolve(ack);
      },
      (err) => {
        e.inFlight = null;
        if (err instanceof ClosedError || err instanceof DisconnectError) return;
        if (retryable(err)) {
          setTimeout(() => this.trySend(e), 300 + Math.random() * 700);
          return;
        }
        this.outbox.delete(e.send.clientMsgId);
        e.reject(err instanceof Error ? err : new Error(String(err)));
      }
    );
  }
  /** Moves the cursor past a message this client sent when it directly
   *  follows what the app has, so the app is not handed its own message
   *  back. (After a gap it stays: the sync delivers it in order, and the app
   *  recognises it by clientMsgId.) */
  ownSeq(ack) {
    if (this.cursor(ack.conversationId) + 1 === ack.seq) this.cursorsMap.set(ack.conversationId, ack.seq);
  }
  // ---- requests ----
  /**
   * Sends any request and resolves with the reply frame. It waits for a
   * connection; with retry it is sent again after a reconnect or a temporary
   * refusal (only for requests that are safe to repeat).
   */
  async request(name, body, retry = false) {
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
  async ok(name, body, retry = false) {
    await this.request(name, body, retry);
  }
  /** One page of the conversation list (most recent first). */
  async syncConversations(limit, pageToken) {
    return (await this.request("syncConversations", { limit, pageToken }, true)).conversations ?? {};
  }
  /** Every conversation (all pages). */
  async conversations() {
    return this.allConversationsOn(await this.liveConn());
  }
  async allConversationsOn(conn) {
    const out = [];
    let pageToken;
    do {
      const l = (await conn.request("syncConversations", { limit: 500, pageToken })).conversations ?? {};
      out.push(...l.conversations ?? []);
      pageToken = l.nextPageToken;
    } while (pageToken);
    return out;
  }
  /** Entries with seq > afterSeq, ascending (forward paging). */
  async syncMessages(conversationId, afterSeq = 0, limit) {
    return (await this.request("syncMessages", { conversationId, afterSeq, limit }, true)).messages;
  }
  /** The newest entries with seq < beforeSeq (0: the newest), ascending (backward paging). */
  async history(conversationId, beforeSeq = 0, limit = 30) {
    return (await this.request("history", { conversationId, beforeSeq, limit }, true)).messages;
  }
  /** Moves the read cursor (unread counts derive from it; the peer gets a receipt). */
  markRead(conversationId, seq) {
    return this.ok("read", { conversationId, seq }, true);
  }
  /** Says the user is typing (fire and forget; dropped while disconnected). */
  typing(conversationId) {
    try {
      if (this.conn?.open) this.conn.notify("typing", { conversationId });
    } catch {
    }
  }
  /** Recalls a message; resolves with the RECALL event's ack (null when a
   *  retry found it already recalled). */
  async recall(conversationId, seq) {
    const clientMsgId = newClientMsgId();
    for (let attempt = 0; ; attempt++) {
      const conn = await this.liveConn();
      try {
        return (await conn.request("recall", { conversationId, seq, clientMsgId })).sendAck;
      } catch (err) {
        if (attempt > 0 && err instanceof ParleyError && err.code === "ERROR_CODE_CONFLICT") return null;
        if (err instanceof ClosedError || err instanceof DisconnectError || retryable(err)) {
          if (this.closedErr) throw err;
          continue;
        }
        throw err;
      }
    }
  }
  /** Replaces the content of your own message; resolves with the EDIT event's ack. */
  async edit(conversationId, seq, payload, contentType = "text") {
    const body = {
      conversationId,
      seq,
      contentType,
      payload: typeof payload === "string" ? utf8(payload) : payload,
      clientMsgId: newClientMsgId()
    };
    return (await this.request("edit", body, true)).sendAck;
  }
  /** Hides messages (or, with all, the whole conversation) for this user's devices. */
  deleteForMe(conversationId, seqs) {
    return this.ok("deleteForMe", seqs === "all" ? { conversationId, all: true } : { conversationId, seqs }, true);
  }
  /** How many members (other than the sender) read each seq, and who. */
  async readCounts(conversationId, seqs) {
    return (await this.request("readCounts", { conversationId, seqs }, true)).readCounts?.counts ?? [];
  }
  /** Subscribes to users' presence (kept across reconnects); returns their presence now. */
  async subscribePresence(userIds) {
    for (const u of userIds) this.presenceSubs.add(u);
    return (await this.request("subscribePresence", { userIds }, true)).presence?.users ?? [];
  }
  /** Ends presence subscriptions (none given: all of them). */
  unsubscribePresence(userIds = []) {
    if (userIds.length === 0) this.presenceSubs.clear();
    for (const u of userIds) this.presenceSubs.delete(u);
    return this.ok("unsubscribePresence", { userIds }, true);
  }
  // Groups
  async createGroup(input) {
    return (await this.request("createGroup", input)).group;
  }
  async updateGroup(input) {
    return (await this.request("updateGroup", input, true)).group;
  }
  addMembers(conversationId, userIds) {
    return this.ok("addMembers", { conversationId, userIds }, true);
  }
  removeMember(conversationId, userId) {
    return this.ok("removeMember", { conversationId, userId });
  }
  async joinGroup(conversationId) {
    return (await this.request("joinGroup", { conversationId })).group;
  }
  leaveGroup(conversationId) {
    return this.ok("leaveGroup", { conversationId });
  }
  setRole(conversationId, userId, role) {
    return this.ok("setRole", { conversationId, userId, role }, true);
  }
  muteMember(conversationId, userId, durationSeconds) {
    return this.ok("muteMember", { conversationId, userId, durationSeconds });
  }
  transferOwnership(conversationId, userId) {
    return this.ok("transferOwnership", { conversationId, userId });
  }
  dissolveGroup(conversationId) {
    return this.ok("dissolveGroup", { conversationId });
  }
  async getGroup(conversationId) {
    return (await this.request("getGroup", { conversationId }, true)).group;
  }
  async listMembers(conversationId, afterUserId = "", limit) {
    return (await this.request("listMembers", { conversationId, afterUserId, limit }, true)).members;
  }
  /** Every current member (all pages). */
  async allMembers(conversationId) {
    const out = [];
    let after = "";
    do {
      const p = await this.listMembers(conversationId, after, 1e3);
      out.push(...p.members ?? []);
      after = p.nextAfterUserId ?? "";
    } while (after);
    return out;
  }
  // Contacts
  friendRequest(userId, note) {
    return this.ok("friendRequest", { userId, note }, true);
  }
  respondFriend(userId, accept) {
    return this.ok("respondFriend", { userId, accept }, true);
  }
  removeFriend(userId) {
    return this.ok("removeFriend", { userId }, true);
  }
  async listContacts() {
    return (await this.request("listContacts", {}, true)).contacts ?? {};
  }
  block(userId) {
    return this.ok("block", { userId }, true);
  }
  unblock(userId) {
    return this.ok("unblock", { userId }, true);
  }
  /** Pins or mutes a conversation for this user. */
  setConversation(conversationId, settings) {
    return this.ok("setConversation", { conversationId, ...settings }, true);
  }
  // Rooms (not stored: a push reaches the sessions in the room at that moment)
  /** Joins a room (rejoined after every reconnect). */
  async joinRoom(room) {
    this.rooms.add(room);
    return (await this.request("joinRoom", { room }, true)).room;
  }
  leaveRoom(room) {
    this.rooms.delete(room);
    return this.ok("leaveRoom", { room }, true);
  }
  roomSend(room, op, body) {
    return this.ok("roomSend", { room, op, body: typeof body === "string" ? utf8(body) : body });
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
  registerPush(target, deviceId) {
    let body;
    try {
      body = pushTargetBody(target);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.ok("registerPush", deviceId ? { deviceId, ...body } : body, true);
  }
  /** Removes this device's push target (also fine when it has none). */
  unregisterPush(deviceId) {
    return this.ok("unregisterPush", deviceId ? { deviceId } : {}, true);
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
  async subscribeWebPush(registration, opts = {}) {
    const publicKey = opts.publicKey ?? await webPushKey({ baseUrl: opts.baseUrl ?? this.httpOrigin(), fetch: opts.fetch });
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
  async unsubscribeWebPush(registration, deviceId) {
    const sub = await registration.pushManager.getSubscription();
    const [server, local] = await Promise.allSettled([this.unregisterPush(deviceId), sub ? sub.unsubscribe() : Promise.resolve(false)]);
    if (server.status === "rejected") throw server.reason;
    if (local.status === "rejected") throw local.reason;
    return local.value;
  }
  /** The HTTP origin of the server: that of the WebSocket URL in use (ws: → http:, wss: → https:). */
  httpOrigin() {
    return new URL((this.connectedUrl || this.urls[0]).replace(/^ws/i, "http")).origin;
  }
};
function jitter(ms) {
  return ms / 2 + Math.random() * (ms / 2);
}

// src/index.ts
function directConversationId(a, b) {
  return a < b ? `p:${a}:${b}` : `p:${b}:${a}`;
}
export {
  ClosedError,
  Connection,
  DisconnectError,
  ParleyClient,
  ParleyError,
  TimeoutError,
  changePassword,
  decodeFrame,
  directConversationId,
  encodeFrame,
  fromBase64,
  isCode,
  isTemporary,
  login,
  logout,
  newClientMsgId,
  pushTargetBody,
  register,
  rpc,
  text,
  toBase64,
  toBase64Url,
  utf8,
  webPushKey,
  webPushTarget
};

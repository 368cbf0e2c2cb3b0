// Parley web client: plain ES modules, no build step. The SDK
// (parley-sdk.js) is the TypeScript SDK bundled for browsers.
import { ParleyClient, register, login, logout, directConversationId, text, isCode, webPushKey, applyReaction, mentionsUser, encodeFrame } from './parley-sdk.js';
import { initGroups, attachGroups, groupBar, setE2EE } from './groups.js';
import { initPeople, attachPeople } from './people.js';
import { initSearch, attachSearch, openSearch } from './search.js';

const $ = (id) => document.getElementById(id);
const el = (tag, cls, txt) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (txt !== undefined) e.textContent = txt;
  return e;
};
const PAGE = 30; // history page size

// ---- persisted state (per browser profile) ----
const store = {
  get(k, d) {
    try {
      const v = localStorage.getItem('parley.' + k);
      return v === null ? d : JSON.parse(v);
    } catch {
      return d;
    }
  },
  set(k, v) {
    try {
      localStorage.setItem('parley.' + k, JSON.stringify(v));
    } catch {}
  },
  del(k) {
    localStorage.removeItem('parley.' + k);
  },
};

// The signed-in account is kept per tab (sessionStorage): two windows can be
// two users, and a reload keeps the tab signed in. Cursors and the device id
// are per browser profile (localStorage).
const session = {
  get() {
    try {
      return JSON.parse(sessionStorage.getItem('parley.auth') || 'null');
    } catch {
      return null;
    }
  },
  set(v) {
    sessionStorage.setItem('parley.auth', JSON.stringify(v));
  },
  del() {
    sessionStorage.removeItem('parley.auth');
  },
};

function deviceId() {
  let d = store.get('device');
  if (!d) {
    d = 'web-' + Array.from(crypto.getRandomValues(new Uint8Array(6)), (b) => b.toString(16).padStart(2, '0')).join('');
    store.set('device', d);
  }
  return d;
}

// ---- app state ----
let client = null;
// End-to-end encryption (docs/e2ee.md): parley-e2ee.js (ts-mls), loaded after
// sign-in beside the SDK so that the first page does not wait for it.
let e2ee = null;
let e2eeModP = null;
let e2eeSettled = Promise.resolve(); // settles once this session's E2EE layer is set up (or known unavailable)
const e2eeModule = () => (e2eeModP ??= import('./parley-e2ee.js').catch((err) => (console.warn('end-to-end encryption unavailable:', err), null)));
let me = '';
let everReady = false;
/** conversationId -> conversation state */
const convs = new Map();
let openId = '';
const presence = new Map(); // userId -> online
const typingTimers = new Map(); // convId -> Map(userId -> timeout)
let editing = null; // {conversationId, seq}
let replying = null; // {conversationId, seq}: the main composer's next message answers it
let threadOpen = null; // {conversationId, root}: the thread shown in the thread panel
let openActions = ''; // "conversation|where|seq" of the message whose actions are shown
let maxFrame = 0; // the server's largest client frame in bytes (authOk), 0 until known

function conv(id) {
  let c = convs.get(id);
  if (!c) {
    c = {
      id,
      group: id.startsWith('g:'),
      peer: '',
      info: null, // GroupInfo
      lastSeq: 0, // highest seq known
      last: null, // last message shown in the list
      activity: 0,
      unread: 0,
      readSeq: 0,
      peerDeliveredSeq: 0,
      peerReadSeq: 0,
      left: false,
      msgs: new Map(), // seq -> Message
      pending: new Map(), // clientMsgId -> {text, failed}
      loaded: false,
      hasOlder: true,
      loadingOlder: false,
      readCounts: new Map(), // seq -> count (groups)
      removed: new Set(), // seqs of messages the app's moderators deleted (a RECALL marked moderated)
      reported: new Set(), // seqs of messages this tab reported
      drafts: [], // files attached in the composer, uploading or uploaded (see "files")
      pins: [], // PinnedMessage[], oldest pin first
      pinMsgs: new Map(), // seq -> Message: pinned messages not loaded in the timeline (for the pinned bar)
      unreadMentions: 0,
      members: null, // Member[] of a group (roles: who may pin, mention everyone), once loaded
      membersP: null, // the request loading them
      streams: new Map(), // streamId -> {text, from, next, ...}: messages a bot is streaming
      doneStreams: new Set(), // streamIds whose stored message arrived (late chunks are dropped)
      threads: new Map(), // root seq -> {loaded, hasOlder, loading}
      disappearing: 0, // the disappearing-messages timer, seconds (0: off)
    };
    if (!c.group) c.peer = peerOf(id);
    convs.set(id, c);
  }
  return c;
}

function peerOf(id) {
  const [a, b] = id.slice(2).split(':');
  return a === me ? b : a;
}

function title(c) {
  if (c.group) return c.info?.name || 'Group';
  return c.peer;
}

function summary(m) {
  if (!m) return '';
  const who = m.from === me ? 'You' : m.from;
  switch (m.kind) {
    case 'MESSAGE_KIND_GROUP_CREATED':
      return `${who} created the group`;
    case 'MESSAGE_KIND_MEMBERS_ADDED':
      return `${who} added ${(m.event?.userIds || []).join(', ')}`;
    case 'MESSAGE_KIND_MEMBERS_REMOVED':
      return (m.event?.userIds || []).includes(m.from) ? `${who} left` : `${who} removed ${(m.event?.userIds || []).join(', ')}`;
    case 'MESSAGE_KIND_GROUP_UPDATED':
      return `${who} changed the group settings`;
    case 'MESSAGE_KIND_OWNER_CHANGED':
      return `${(m.event?.userIds || [])[0]} is now the owner`;
    case 'MESSAGE_KIND_ROLE_CHANGED':
      return `${(m.event?.userIds || []).join(', ')} is now ${(m.event?.role || '').replace('GROUP_ROLE_', '').toLowerCase()}`;
    case 'MESSAGE_KIND_MEMBER_MUTED':
      return `${(m.event?.userIds || []).join(', ')} ${m.event?.mutedUntil ? 'muted' : 'unmuted'}`;
    case 'MESSAGE_KIND_GROUP_DISSOLVED':
      return `${who} dissolved the group`;
    case 'MESSAGE_KIND_RECALL':
      return m.event?.moderated ? 'A moderator removed a message' : `${who} recalled a message`;
    case 'MESSAGE_KIND_EDIT':
      return bodyText(m); // the new content
    case 'MESSAGE_KIND_PINNED':
      return `${who} pinned a message`;
    case 'MESSAGE_KIND_UNPINNED':
      return `${who} unpinned a message`;
    case 'MESSAGE_KIND_DISAPPEARING_SET':
      return m.event?.disappearingSeconds ? `${who} set disappearing messages to ${timerText(m.event.disappearingSeconds)}` : `${who} turned off disappearing messages`;
  }
  if (m.recalled) return recalledText(m);
  return bodyText(m) || attachmentsSummary(m.attachments);
}

/** What a recalled message shows: recalled by its sender, or removed by the app's moderators. */
function recalledText(m) {
  return m.moderated ? 'Removed by a moderator' : 'Message recalled';
}

/** The conversation is end-to-end encrypted (an MLS group). */
function isEncrypted(c) {
  return !!(c.info?.encrypted || c.encrypted);
}

/** What the E2EE layer decrypted, as the app shows any message: an MLS
 *  message becomes its plaintext, or is marked as undecryptable. */
function plainOf(m) {
  if (!m.encrypted && m.contentType !== 'message/mls') return m;
  const kind = m.kind || 'MESSAGE_KIND_NORMAL';
  if (kind !== 'MESSAGE_KIND_NORMAL' && kind !== 'MESSAGE_KIND_EDIT') return { ...m, contentType: undefined, payload: undefined, encrypted: true };
  if (m.plaintext) return { ...m, contentType: m.plainContentType, payload: m.plaintext, encrypted: true };
  if (m.recalled) return { ...m, encrypted: true };
  return { ...m, contentType: 'text', payload: undefined, encrypted: true, undecryptable: m.e2eeError?.code || 'UNAVAILABLE' };
}

function bodyText(m) {
  if (m.undecryptable) return m.undecryptable === 'NOT_KEPT' || m.undecryptable === 'NOT_A_MEMBER' ? 'Encrypted message: sent before this device joined' : 'Encrypted message: cannot be decrypted on this device';
  if (!m.contentType || m.contentType === 'text' || m.contentType.startsWith('text/')) return text(m.payload);
  return `[${m.contentType}]`;
}

function fmtTime(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  const now = new Date();
  return d.toDateString() === now.toDateString()
    ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
    : d.toLocaleDateString([], { month: 'short', day: 'numeric' });
}

// ---- applying what arrives ----

/** Applies one conversation entry (from a push, a sync or a history page). live: it is new to this client. */
function apply(m, live) {
  const c = conv(m.conversationId);
  const kind = m.kind || 'MESSAGE_KIND_NORMAL';
  if (m.encrypted) c.encrypted = true;
  if (kind === 'MESSAGE_KIND_MLS_COMMIT') {
    // A key change of an encrypted group (a device added or removed): nothing to show.
    c.lastSeq = Math.max(c.lastSeq, m.seq);
    return;
  }
  if (kind === 'MESSAGE_KIND_EDIT' || kind === 'MESSAGE_KIND_RECALL') {
    const t = c.msgs.get(m.event?.targetSeq);
    if (t) {
      if (kind === 'MESSAGE_KIND_EDIT') {
        t.payload = m.payload;
        t.contentType = m.contentType;
        t.editedAt = m.serverTime || Date.now();
      } else {
        t.recalled = true;
        t.payload = undefined;
        t.attachments = undefined;
        if (m.event?.moderated) t.moderated = true;
      }
    }
    // A message deleted by a moderator may load later than the event (history pages go backwards).
    if (kind === 'MESSAGE_KIND_RECALL' && m.event?.moderated) c.removed.add(m.event.targetSeq);
    if (c.last && c.last.seq === m.event?.targetSeq && t) c.last = t;
  }
  if (m.recalled && c.removed.has(m.seq)) m.moderated = true;
  if (kind === 'MESSAGE_KIND_GROUP_CREATED' || kind === 'MESSAGE_KIND_GROUP_UPDATED') {
    if (m.event?.group) c.info = { ...(c.info || {}), ...m.event.group };
  }
  if (kind === 'MESSAGE_KIND_MEMBERS_ADDED' && c.info) c.info.memberCount = (c.info.memberCount || 0) + (m.event?.userIds?.length || 0);
  if (kind === 'MESSAGE_KIND_MEMBERS_REMOVED' && (m.event?.userIds || []).includes(me)) c.left = true;
  // Membership and roles changed: who may pin or mention everyone is asked again when needed.
  if (kind === 'MESSAGE_KIND_MEMBERS_ADDED' || kind === 'MESSAGE_KIND_MEMBERS_REMOVED' || kind === 'MESSAGE_KIND_ROLE_CHANGED' || kind === 'MESSAGE_KIND_OWNER_CHANGED') {
    c.members = null;
    if (live && c.id === openId) loadMembers(c);
  }
  if (live && kind === 'MESSAGE_KIND_DISAPPEARING_SET') c.disappearing = m.event?.disappearingSeconds || 0;
  // Pins: events newer than what this client had (replayed in order after the list's pins).
  if (live && (kind === 'MESSAGE_KIND_PINNED' || kind === 'MESSAGE_KIND_UNPINNED')) {
    const target = m.event?.targetSeq;
    c.pins = c.pins.filter((p) => p.seq !== target);
    if (kind === 'MESSAGE_KIND_PINNED') c.pins.push({ seq: target, pinnedBy: m.from, pinnedAt: m.serverTime });
  }
  if (m.streamId) {
    c.streams.delete(m.streamId);
    c.doneStreams.add(m.streamId);
  }
  // A reply in a thread: the root counts it (once: replies the root's summary already has are not counted again).
  if (m.threadRoot && kind === 'MESSAGE_KIND_NORMAL') {
    const root = c.msgs.get(m.threadRoot);
    if (root && m.seq > (root.thread?.lastReplySeq || 0)) {
      root.thread = { replyCount: (root.thread?.replyCount || 0) + 1, lastReplySeq: m.seq, lastReplyAt: m.serverTime || Date.now() };
    }
  }
  const old = c.msgs.get(m.seq);
  // A page may be older than a reaction update already applied: keep the newer counts.
  if (old && (old.reactionVersion || 0) > (m.reactionVersion || 0)) {
    m.reactions = old.reactions;
    m.reactionVersion = old.reactionVersion;
  }
  if (old?.thread && (!m.thread || (old.thread.lastReplySeq || 0) > (m.thread.lastReplySeq || 0))) m.thread = old.thread;
  c.msgs.set(m.seq, m);
  if (m.from === me && m.clientMsgId) c.pending.delete(m.clientMsgId);
  if (m.seq > c.lastSeq) {
    c.lastSeq = m.seq;
    c.last = m;
    c.activity = Math.max(c.activity, m.serverTime || Date.now());
    // Unread counts messages from others, not events, as the server's do.
    if (live && m.from !== me && kind === 'MESSAGE_KIND_NORMAL' && !m.threadRoot) {
      if (c.id === openId) {
        const box = $('messages');
        if (box.scrollHeight - box.scrollTop - box.clientHeight > 200) c.newBelow = (c.newBelow || 0) + 1;
      }
      if (client?.state === 'ready') announce(`${c.group ? title(c) + ', ' : ''}${m.from}: ${summary(m)}`);
    }
    if (live && m.from !== me) {
      if (isVisibleOpen(c.id)) scheduleRead(c);
      else if (kind === 'MESSAGE_KIND_NORMAL') {
        // As the server counts: a thread reply is unread for those who take part in the
        // thread or whom it mentions (the next conversation list corrects a guess).
        const mentioned = !m.recalled && mentionsUser(m, me);
        if (mentioned) c.unreadMentions++;
        if (!m.threadRoot || mentioned || takesPart(c, m.threadRoot)) c.unread++;
      }
    }
  }
  if (live && m.from) clearTyping(c.id, m.from);
  if (!c.group && c.peer) ensurePresence(c.peer);
}

/** Whether this user wrote thread root's message or a reply in it (as far as this tab knows). */
function takesPart(c, root) {
  if (c.msgs.get(root)?.from === me) return true;
  for (const x of c.msgs.values()) if (x.threadRoot === root && x.from === me) return true;
  return false;
}

// Presence is visible once a conversation with messages exists: subscribe
// to 1:1 peers the server has not reported yet (batched).
const presenceKnown = new Set();
const presenceWanted = new Set();
let presenceTimer = null;
function ensurePresence(user) {
  if (!client || user === me || presenceKnown.has(user) || presenceWanted.has(user)) return;
  presenceWanted.add(user);
  clearTimeout(presenceTimer);
  presenceTimer = setTimeout(() => {
    const users = [...presenceWanted];
    presenceWanted.clear();
    client
      ?.subscribePresence(users)
      .then((ps) => {
        for (const p of ps) {
          presenceKnown.add(p.userId);
          presence.set(p.userId, !!p.online);
        }
        renderList();
        renderHeader();
      })
      .catch(() => {});
  }, 100);
}

function isVisibleOpen(id) {
  return openId === id && document.visibilityState === 'visible';
}

let readTimer = null;
function scheduleRead(c) {
  clearTimeout(readTimer);
  readTimer = setTimeout(() => {
    if (!client || !isVisibleOpen(c.id) || c.lastSeq <= c.readSeq) return;
    const seq = c.lastSeq;
    c.readSeq = seq;
    c.unread = 0;
    c.unreadMentions = 0;
    renderList();
    client.markRead(c.id, seq).catch(() => {});
  }, 150);
}

function mergeList(list) {
  for (const x of list) {
    const c = conv(x.conversationId);
    if (x.peer) c.peer = x.peer;
    if (x.group) c.info = x.group;
    c.left = !!x.left;
    c.pins = x.pins || [];
    c.disappearing = x.disappearingSeconds || 0;
    c.readSeq = Math.max(c.readSeq, x.readSeq || 0);
    c.peerDeliveredSeq = Math.max(c.peerDeliveredSeq, x.peerDeliveredSeq || 0);
    c.peerReadSeq = Math.max(c.peerReadSeq, x.peerReadSeq || 0);
    if ((x.lastSeq || 0) >= c.lastSeq) {
      c.lastSeq = x.lastSeq || 0;
      c.unread = x.unreadCount || 0;
      c.unreadMentions = x.unreadMentions || 0;
      if (x.lastMessage) {
        c.last = x.lastMessage;
        c.activity = Math.max(c.activity, x.lastMessage.serverTime || 0);
        c.msgs.set(x.lastMessage.seq, c.msgs.get(x.lastMessage.seq) || x.lastMessage);
      }
    }
  }
  // Subscriptions end with each connection (the SDK renews those it made); ask again for all peers.
  presenceKnown.clear();
  presenceWanted.clear();
  for (const c of convs.values()) if (!c.group && c.peer) ensurePresence(c.peer);
  if (openId && isVisibleOpen(openId)) scheduleRead(conv(openId));
  renderList();
  renderChat();
}

// ---- typing ----
function showTyping(convId, user) {
  let m = typingTimers.get(convId);
  if (!m) typingTimers.set(convId, (m = new Map()));
  clearTimeout(m.get(user));
  m.set(user, setTimeout(() => clearTyping(convId, user), 4000));
  renderTyping();
}
function clearTyping(convId, user) {
  const m = typingTimers.get(convId);
  if (m?.has(user)) {
    clearTimeout(m.get(user));
    m.delete(user);
    renderTyping();
  }
}

// ---- rendering ----

function renderList() {
  const ul = $('conv-list');
  const focused = document.activeElement?.closest?.('#conv-list li.conv')?.dataset.conv;
  const q = $('conv-filter').value.trim().toLowerCase();
  const all = [...convs.values()].filter((c) => c.last || c.lastSeq || c.pending.size || c.id === openId);
  const items = all.filter((c) => !q || title(c).toLowerCase().includes(q) || c.id.toLowerCase().includes(q)).sort((a, b) => b.activity - a.activity);
  ul.replaceChildren(
    ...items.map((c) => {
      const li = el('li', 'conv' + (c.id === openId ? ' active' : ''));
      li.dataset.conv = c.id;
      const name = el('span', 'name');
      if (!c.group) {
        const d = el('span', 'dot' + (presence.get(c.peer) ? ' online' : ''));
        d.dataset.presence = presence.get(c.peer) ? 'online' : 'offline';
        name.append(d);
      }
      name.append(el('span', 'title', title(c)));
      if (isEncrypted(c)) name.append(lockNode());
      li.append(name, el('span', 'time', fmtTime(c.last?.serverTime)));
      const lastText = c.last ? summary(c.last) || '' : '';
      const prefix = c.group && c.last && c.last.kind === 'MESSAGE_KIND_NORMAL' ? (c.last.from === me ? 'You: ' : c.last.from + ': ') : '';
      li.append(el('span', 'last', prefix + lastText));
      const badges = el('span', 'badges');
      if (c.unreadMentions > 0 && c.id !== openId) {
        const at = el('span', 'badge mention', '@' + c.unreadMentions);
        at.title = `${c.unreadMentions} unread mention${c.unreadMentions === 1 ? '' : 's'}`;
        badges.append(at);
      }
      if (c.unread > 0 && c.id !== openId) badges.append(el('span', 'badge unread', String(c.unread)));
      li.append(badges);
      li.onclick = () => openConv(c.id);
      // Reachable by keyboard: Tab to it, Enter or Space opens it.
      li.tabIndex = 0;
      if (c.id === openId) li.setAttribute('aria-current', 'true');
      li.onkeydown = (ev) => {
        if (ev.key === 'Enter' || ev.key === ' ') {
          ev.preventDefault();
          openConv(c.id);
        }
      };
      return li;
    }),
  );
  if (focused) ul.querySelector(`li.conv[data-conv="${CSS.escape(focused)}"]`)?.focus({ preventScroll: true });
  $('conv-empty').hidden = items.length > 0;
  $('conv-empty').textContent = q && all.length ? 'No conversation matches.' : 'No conversations yet. Start one with “Chat”.';
  updateTitle();
}

/** A padlock (an SVG: no emoji font needed), for encrypted conversations. */
function lockSvg() {
  const NS = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(NS, 'svg');
  for (const [k, v] of Object.entries({ viewBox: '0 0 16 16', width: '13', height: '13', 'aria-hidden': 'true' })) svg.setAttribute(k, v);
  const shackle = document.createElementNS(NS, 'path');
  for (const [k, v] of Object.entries({ d: 'M5 7V5a3 3 0 0 1 6 0v2', fill: 'none', stroke: 'currentColor', 'stroke-width': '1.8' })) shackle.setAttribute(k, v);
  const body = document.createElementNS(NS, 'rect');
  for (const [k, v] of Object.entries({ x: '3', y: '7', width: '10', height: '8', rx: '1.5', fill: 'currentColor' })) body.setAttribute(k, v);
  svg.append(shackle, body);
  return svg;
}

function lockNode() {
  const l = el('span', 'lock');
  l.append(lockSvg());
  l.title = 'End-to-end encrypted';
  l.setAttribute('aria-label', 'End-to-end encrypted');
  l.setAttribute('role', 'img');
  return l;
}

/** The tab's title counts unread messages, as "(3) Parley". */
function updateTitle() {
  let n = 0;
  for (const c of convs.values()) n += c.unread > 0 ? c.unread : 0;
  const t = n ? `(${n}) Parley` : 'Parley';
  if (document.title !== t) document.title = t;
}

// ---- notices: pushes from the app's server, and a live region for screen readers ----

/** Says t to screen readers (new messages, errors), without moving the focus. */
function announce(t) {
  const a = $('announce');
  a.textContent = '';
  // A new text node in a cleared region is announced even when t repeats.
  setTimeout(() => (a.textContent = t), 50);
}

const MAX_NOTICES = 5;

/** A push the app's server sent (POST /v1/admin/push/…): this client knows no op, so each
 *  shows as a dismissible notice, its text when the payload is text, else its size. */
function showPush(p) {
  const body = p.body || EMPTY;
  let t = '';
  try {
    t = new TextDecoder('utf-8', { fatal: true }).decode(body).trim();
    if (/[\u0000-\u0008\u000e-\u001f\u007f]/.test(t)) t = ''; // control bytes: not text
  } catch {
    t = '';
  }
  const words = t ? (t.length > 500 ? t.slice(0, 500) + '…' : t) : `A push of ${fmtNum(body.length)} byte${body.length === 1 ? '' : 's'}`;
  addNotice(words, t ? 'text' : 'binary');
}

function addNotice(words, kind) {
  const box = $('notices');
  const n = el('div', 'notice');
  n.dataset.kind = kind;
  n.append(el('span', 'notice-label', 'From the server: '), el('span', 'notice-text', words));
  const x = el('button', 'notice-close', '×');
  x.type = 'button';
  x.setAttribute('aria-label', 'Dismiss the notice');
  x.title = 'Dismiss (Esc)';
  x.onclick = () => dismissNotice(n);
  n.addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') {
      ev.preventDefault();
      ev.stopPropagation();
      dismissNotice(n);
    }
  });
  n.append(x);
  box.append(n);
  while (box.children.length > MAX_NOTICES) box.firstElementChild.remove();
}

/** Removes a notice; the focus, if it was there, goes to the next one or the composer. */
function dismissNotice(n) {
  const had = n.contains(document.activeElement);
  const next = n.nextElementSibling || n.previousElementSibling;
  n.remove();
  if (!had) return;
  if (next) next.querySelector('.notice-close')?.focus();
  else if (openId && !$('composer-input').disabled) $('composer-input').focus();
}

function renderHeader() {
  const chat = $('chat');
  if (!openId) {
    chat.classList.add('none');
    $('chat-empty').hidden = false;
    renderTray();
    return;
  }
  chat.classList.remove('none');
  $('chat-empty').hidden = true;
  const c = conv(openId);
  $('chat-title').textContent = title(c);
  $('chat-lock').hidden = !isEncrypted(c);
  if (!$('chat-lock').firstChild) $('chat-lock').append(lockSvg());
  const dot = $('chat-dot');
  if (c.group) {
    dot.className = 'dot none';
    $('chat-sub').textContent = c.left ? 'you left' : c.info?.memberCount ? `${c.info.memberCount} members` : '';
  } else {
    const on = !!presence.get(c.peer);
    dot.className = 'dot' + (on ? ' online' : '');
    dot.dataset.presence = on ? 'online' : 'offline';
    // The server refused a send: this id has no account (the dialog cannot tell before a send).
    $('chat-sub').textContent = c.noSuchUser ? 'No such user' : on ? 'online' : '';
  }
  $('chat-sub').classList.toggle('bad', !c.group && !!c.noSuchUser);
  groupBar(c); // Members, and Add for those the group lets add (groups.js)
  disappearingBar(c);
  $('composer-input').disabled = c.left || !!c.info?.dissolved;
  // Files would reach the server unencrypted: not offered in encrypted conversations.
  $('attach-btn').disabled = c.left || !!c.info?.dissolved || isEncrypted(c);
  renderTray();
}

function stateOf(c, m) {
  if (c.group) {
    const n = c.readCounts.get(m.seq) || 0;
    return n > 0 ? ['read', `Read by ${n}`] : ['sent', '✓ Sent'];
  }
  if (c.peerReadSeq >= m.seq) return ['read', '✓✓ Read'];
  if (c.peerDeliveredSeq >= m.seq) return ['delivered', '✓✓ Delivered'];
  return ['sent', '✓ Sent'];
}

function renderChat() {
  renderHeader();
  if (!openId) {
    renderThread();
    return;
  }
  const c = conv(openId);
  const box = $('messages');
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 60;
  const fromBottom = box.scrollHeight - box.scrollTop;
  dropExpired(c);
  const seqs = [...c.msgs.keys()].sort((a, b) => a - b);
  const nodes = [];
  // Consecutive messages of one sender within GROUP_GAP share one header; a day
  // starts with its date; the first message unread when the conversation opened
  // follows a "New messages" divider.
  let prev = null; // the previous message shown, while a run of one sender lasts
  let day = '';
  let divided = false;
  const dayOf = (ms) => (ms ? new Date(ms).toDateString() : '');
  const dated = (ms) => {
    const d = dayOf(ms);
    if (!d || d === day) return;
    day = d;
    prev = null;
    const li = el('li', 'day-sep');
    li.append(el('span', '', dayLabel(ms)));
    nodes.push(li);
  };
  for (const seq of seqs) {
    const m = c.msgs.get(seq);
    const kind = m.kind || 'MESSAGE_KIND_NORMAL';
    if (kind === 'MESSAGE_KIND_EDIT') continue;
    if (m.threadRoot && kind === 'MESSAGE_KIND_NORMAL') continue; // shown in its thread
    dated(m.serverTime);
    if (!divided && c.unreadFrom && seq > c.unreadFrom && m.from !== me && kind === 'MESSAGE_KIND_NORMAL') {
      divided = true;
      prev = null;
      const li = el('li', 'new-sep');
      li.id = 'new-sep';
      li.append(el('span', '', 'New messages'));
      nodes.push(li);
    }
    if (kind !== 'MESSAGE_KIND_NORMAL') {
      const s = el('li', 'sys', summary(m));
      s.dataset.seq = seq;
      nodes.push(s);
      prev = null;
      continue;
    }
    const li = msgNode(c, m, 'main');
    if (prev && prev.from === m.from && (m.serverTime || 0) - (prev.serverTime || 0) < GROUP_GAP) {
      li.classList.add('cont'); // its sender's name shows on the first of the run
      li.querySelector(':scope > .from')?.remove();
    } else {
      li.classList.add('first');
      // In groups, the first of a run carries its sender's avatar beside the name.
      if (c.group && m.from !== me) li.prepend(avatarNode(m.from));
    }
    prev = m;
    nodes.push(li);
  }
  for (const [id, p] of c.pending) if (!p.threadRoot) nodes.push(pendingNode(c, id, p));
  for (const st of c.streams.values()) if (!st.threadRoot) nodes.push(streamNode(c, st));
  $('msg-list').classList.toggle('group', c.group);
  keepFocus($('msg-list'), () => $('msg-list').replaceChildren(...nodes));
  $('older').textContent = c.loadingOlder ? 'Loading…' : c.loaded && !c.hasOlder ? 'Beginning of the conversation' : '';
  const sep = c.toDivider ? $('new-sep') : null;
  if (sep) {
    c.toDivider = false;
    // Opening with unread messages: the first unread is at the top, a little of the read above it.
    box.scrollTop = Math.max(0, sep.offsetTop - box.offsetTop - 40);
    c.stick = false;
    c.restoreFromBottom = undefined;
  } else if (c.restoreFromBottom !== undefined) {
    box.scrollTop = box.scrollHeight - c.restoreFromBottom;
    c.restoreFromBottom = undefined;
  } else if (atBottom || c.stick) {
    box.scrollTop = box.scrollHeight;
    c.stick = false;
  } else {
    box.scrollTop = box.scrollHeight - fromBottom;
  }
  if (box.scrollHeight - box.scrollTop - box.clientHeight < 60) c.newBelow = 0;
  renderJump();
  renderPins(c);
  renderReplyBar();
  renderThread();
  renderTyping();
}

const GROUP_GAP = 5 * 60_000; // messages of one sender closer than this share a header

// Avatar colours: each dark enough for white initials.
const AVATAR_COLORS = ['#2563eb', '#7c3aed', '#db2777', '#b45309', '#047857', '#0e7490', '#4d7c0f', '#9333ea'];

/** A round badge with the user's initial in a colour of their own (decorative: the name is beside it). */
function avatarNode(user) {
  const a = el('span', 'avatar', (user.match(/[A-Za-z0-9]/)?.[0] || '?').toUpperCase());
  a.setAttribute('aria-hidden', 'true');
  let h = 0;
  for (const ch of user) h = (h * 31 + ch.charCodeAt(0)) >>> 0;
  a.style.background = AVATAR_COLORS[h % AVATAR_COLORS.length];
  return a;
}

/** "Today", "Yesterday", a weekday within the week, else the date. */
function dayLabel(ms) {
  const d = new Date(ms);
  const today = new Date();
  const start = (x) => new Date(x.getFullYear(), x.getMonth(), x.getDate()).getTime();
  const days = Math.round((start(today) - start(d)) / 86_400_000);
  if (days === 0) return 'Today';
  if (days === 1) return 'Yesterday';
  if (days > 1 && days < 7) return d.toLocaleDateString([], { weekday: 'long' });
  return d.toLocaleDateString([], { day: 'numeric', month: 'long', year: d.getFullYear() === today.getFullYear() ? undefined : 'numeric' });
}

/** The "jump to latest" button: shown when scrolled up, with the count of messages that came meanwhile. */
function renderJump() {
  const b = $('jump-latest');
  const box = $('messages');
  const c = openId ? conv(openId) : null;
  const up = !!c && box.scrollHeight - box.scrollTop - box.clientHeight > 200;
  if (!up && c) c.newBelow = 0;
  b.hidden = !up;
  const n = c?.newBelow || 0;
  $('jump-count').textContent = n ? String(n) : '';
  b.setAttribute('aria-label', n ? `Jump to the latest messages, ${n} new` : 'Jump to the latest messages');
}

/** Runs a re-render of container, putting the focus back on the same control of the same
 *  message if it was inside (live updates rebuild the list; the keyboard user keeps their place). */
function keepFocus(container, rebuild) {
  const a = document.activeElement;
  if (!a || !container.contains(a)) return rebuild();
  const li = a.closest('li');
  const key = li?.dataset.seq ? `li[data-seq="${li.dataset.seq}"]` : li?.dataset.clientMsgId ? `li[data-client-msg-id="${li.dataset.clientMsgId}"]` : '';
  const ctl = a.dataset.action ? `[data-action="${a.dataset.action}"]` : a.dataset.react ? `[data-react="${a.dataset.react}"]` : a.dataset.emoji ? `.chip[data-emoji="${a.dataset.emoji}"]` : a.classList.contains('more') ? '.more' : a.classList.contains('reply-quote') ? '.reply-quote' : a.classList.contains('thread-link') ? '.thread-link' : '';
  rebuild();
  if (!container.contains(a)) {
    const back = key && container.querySelector(`${key} ${ctl}`.trim());
    (back || container.closest('[tabindex]') || $('composer-input')).focus({ preventScroll: true });
  }
}

/** A message of the timeline ('main'), of a thread ('thread'), or a thread's root atop its panel ('root'). */
function msgNode(c, m, where) {
  const seq = m.seq;
  const mine = m.from === me;
  const mentioned = !m.recalled && mentionsUser(m, me);
  const li = el('li', 'msg' + (mine ? ' mine' : '') + (m.recalled ? ' recalled' : '') + (m.recalled && m.moderated ? ' moderated' : '') + (mentioned ? ' mentioned' : '') + (m.incomplete ? ' incomplete' : ''));
  li.dataset.seq = seq;
  li.dataset.from = m.from;
  if (c.focusSeq === seq) li.tabIndex = -1; // opened from a search: it holds the focus
  if (c.pins.some((p) => p.seq === seq)) li.dataset.pinned = 'true';
  if (c.group && !mine) li.append(el('div', 'from', m.from));
  if (m.replyTo) li.append(quoteNode(c, m));
  const atts = !m.recalled && m.attachments?.length ? attachmentsNode(c, m) : null;
  if (atts) li.append(atts);
  const body = m.recalled ? recalledText(m) : bodyText(m);
  if (body || !atts) li.append(m.recalled ? el('div', 'body', body) : bodyNode(m, body));
  if (!m.recalled && m.reactions?.length) li.append(reactionsNode(c, m));
  if (where === 'main' && m.thread?.replyCount) li.append(threadLink(c, m));
  const meta = el('div', 'meta', fmtTime(m.serverTime) + (m.editedAt && !m.recalled ? ' · edited' : ''));
  if (m.incomplete) meta.append(' · ', el('span', 'incomplete-note', 'incomplete'));
  if (li.dataset.pinned) meta.append(' · ', el('span', 'pinned-note', '📌 pinned'));
  if (mine && !m.recalled) {
    const [st, label] = stateOf(c, m);
    li.dataset.state = st;
    meta.append(' ', el('span', 'state ' + st, label));
  }
  if (c.reported.has(m.seq)) {
    li.dataset.reported = 'true';
    meta.append(' · ', el('span', 'reported', 'Reported'));
  }
  li.append(meta);
  const acts = el('div', 'msg-actions');
  const action = (label, name, run) => {
    const b = el('button', 'secondary', label);
    b.type = 'button';
    b.dataset.action = name;
    b.onclick = (ev) => {
      ev.stopPropagation();
      closeActions(li);
      run();
    };
    acts.append(b);
  };
  if (!m.recalled && !c.left) {
    const picker = el('div', 'picker');
    picker.setAttribute('role', 'group');
    picker.setAttribute('aria-label', 'React');
    for (const e of QUICK_EMOJIS) {
      const b = el('button', 'pick' + (m.reactions?.some((r) => r.emoji === e && r.me) ? ' mine' : ''), e);
      b.type = 'button';
      b.dataset.react = e;
      b.title = 'React with ' + e;
      b.onclick = (ev) => {
        ev.stopPropagation();
        closeActions(li);
        toggleReaction(c, m, e);
      };
      picker.append(b);
    }
    acts.append(picker);
  }
  if (where === 'main' && !m.recalled && !c.left) {
    action('Reply', 'reply', () => startReply(c, m));
    action('Reply in thread', 'thread', () => openThread(c, m.seq));
  }
  if (where !== 'thread' && !m.recalled && canPin(c)) {
    const pinned = c.pins.some((p) => p.seq === seq);
    action(pinned ? 'Unpin' : 'Pin', pinned ? 'unpin' : 'pin', () => togglePin(c, seq, pinned));
  }
  if (mine && !m.recalled && where !== 'root') {
    action('Edit', 'edit', () => startEdit(c, m));
    action('Recall', 'recall', () =>
      client.recall(c.id, m.seq).then((ack) => {
        // Not echoed to this session either: apply the recall here (ack null: already recalled).
        if (ack) apply({ conversationId: c.id, seq: ack.seq, from: me, clientMsgId: ack.clientMsgId, serverTime: ack.serverTime, kind: 'MESSAGE_KIND_RECALL', event: { targetSeq: m.seq } }, false);
        else m.recalled = true;
        rerender(c.id);
      }, alertError),
    );
  }
  if (!mine && !m.recalled && !c.reported.has(m.seq)) action('Report', 'report', () => openReport(c, m));
  if (where !== 'root') {
    action('Delete for me', 'delete', () =>
      client.deleteForMe(c.id, [m.seq]).then(() => {
        c.msgs.delete(m.seq);
        rerender(c.id);
      }, alertError),
    );
  }
  // The actions open with a click on the message, or with this button (keyboard, screen readers).
  const more = el('button', 'more', '⋯');
  more.type = 'button';
  more.setAttribute('aria-label', `Actions for the message from ${mine ? 'you' : m.from}`);
  more.title = 'Message actions';
  li.append(more, acts);
  // The message whose actions are shown stays so across re-renders (live updates redraw the list).
  const key = `${c.id}|${where}|${seq}`;
  const setOpen = (on) => {
    li.classList.toggle('open', on);
    more.setAttribute('aria-expanded', on ? 'true' : 'false');
  };
  setOpen(openActions === key);
  li.onclick = () => {
    for (const o of document.querySelectorAll('.msg.open')) if (o !== li) closeActions(o);
    const on = !li.classList.contains('open');
    setOpen(on);
    openActions = on ? key : '';
  };
  more.onclick = (ev) => {
    ev.stopPropagation();
    li.onclick();
  };
  return li;
}

/** Hides a message's actions; the focus, if it was among them, goes back to its ⋯ button. */
function closeActions(li) {
  const inside = li.querySelector('.msg-actions')?.contains(document.activeElement);
  li.classList.remove('open');
  li.querySelector(':scope > .more')?.setAttribute('aria-expanded', 'false');
  openActions = '';
  if (inside) li.querySelector(':scope > .more')?.focus({ preventScroll: true });
}

/** A send waiting for its ack (or refused). */
function pendingNode(c, id, p) {
  const li = el('li', 'msg mine pending');
  li.dataset.clientMsgId = id;
  li.dataset.state = p.rejected ? 'rejected' : p.failed ? 'failed' : 'pending';
  if (p.rejected) li.classList.add('rejected');
  if (p.replyTo) li.append(quoteNode(c, { replyTo: p.replyTo }));
  if (p.atts?.length) li.append(el('div', 'atts-pending', p.atts.map((a) => a.name || 'file').join(', ')));
  if (p.text || !p.atts?.length) li.append(el('div', 'body', p.text));
  if (p.failed) {
    // A refusal by the app's moderation says why, in the app's words.
    const meta = el('div', 'meta', 'Not sent: ');
    meta.append(el('span', 'why', p.failed));
    if (p.rejected) meta.setAttribute('role', 'alert');
    li.append(meta);
  } else li.append(el('div', 'meta', '🕓 Sending…'));
  return li;
}

// ---- rich messages: replies, reactions, mentions, pins, threads, streams ----

const QUICK_EMOJIS = ['👍', '❤️', '😂', '😮', '😢', '🎉'];

/** The text of a message, with the mentions it carries marked (text nodes and spans only). */
function bodyNode(m, body) {
  const d = el('div', 'body');
  const names = new Set(m.mentions || []);
  if (m.mentionAll) names.add('all');
  if (!names.size || !body) {
    d.textContent = body;
    return d;
  }
  const re = /@([A-Za-z0-9_.@-]+)/g;
  let last = 0;
  let x;
  while ((x = re.exec(body))) {
    let name = x[1];
    if (!names.has(name)) name = name.replace(/[.@-]+$/, ''); // "@bob." ends a sentence
    if (!names.has(name)) continue;
    const end = x.index + 1 + name.length;
    d.append(body.slice(last, x.index), el('span', 'mention' + (name === me || name === 'all' ? ' you' : ''), '@' + name));
    last = end;
    re.lastIndex = end;
  }
  d.append(body.slice(last));
  return d;
}

/** The words a message preview shows. */
function previewText(p) {
  if (!p.contentType || p.contentType === 'text' || p.contentType.startsWith('text/')) {
    const t = text(p.snippet);
    if (t) return t + (p.truncated ? '…' : '');
  }
  if (p.attachments) return p.attachments > 1 ? `📎 ${p.attachments} files` : '📎 File';
  return p.contentType ? `[${p.contentType}]` : '';
}

/** The quote of the message m answers: as this tab knows it now, else as the server described it. */
function quoteNode(c, m) {
  const q = el('button', 'reply-quote');
  q.type = 'button';
  q.dataset.replyTo = m.replyTo;
  const orig = c.msgs.get(m.replyTo);
  const p = m.replyPreview;
  const from = orig?.from || p?.from || '';
  let t;
  if (orig ? orig.recalled : p?.recalled) {
    t = orig ? recalledText(orig) : 'Message recalled';
    q.classList.add('recalled');
  } else if (!orig && (!p || p.missing)) {
    t = 'Message unavailable';
    q.classList.add('missing');
  } else if (orig) {
    const b = bodyText(orig) || attachmentsSummary(orig.attachments);
    t = b.length > 200 ? b.slice(0, 200) + '…' : b;
  } else t = previewText(p);
  if (from) q.append(el('span', 'quote-from', from === me ? 'You' : from));
  q.append(el('span', 'quote-text', t));
  q.title = 'Show the original message';
  q.onclick = (ev) => {
    ev.stopPropagation();
    jumpTo(c, m.replyTo);
  };
  return q;
}

/** Scrolls to message seq (loading older pages until it is there) and flashes it; with focus,
 *  the message takes the keyboard focus too (a search result was opened). */
async function jumpTo(c, seq, focus = false) {
  // Page back while pages bring older messages (one already loading is waited for); a
  // message that is not there (deleted for this user) stops it at the first page below it.
  const oldest = () => (c.msgs.size ? Math.min(...c.msgs.keys()) : Infinity);
  for (let i = 0; i < 1000 && !c.msgs.has(seq) && c.hasOlder && oldest() > seq && openId === c.id; i++) {
    const was = oldest();
    await loadOlder(c);
    if (oldest() >= was) break; // no progress (a failed page): give up rather than spin
  }
  const m = c.msgs.get(seq);
  if (!m || openId !== c.id) return alertError(new Error('that message is not available'));
  if (focus) c.focusSeq = seq;
  if (m.threadRoot) {
    await openThread(c, m.threadRoot);
    return flash($('thread-list').querySelector(`li.msg[data-seq="${seq}"]`), focus);
  }
  flash($('msg-list').querySelector(`li[data-seq="${seq}"]`), focus);
}

function flash(node, focus = false) {
  if (!node) return;
  node.scrollIntoView({ block: 'center', behavior: 'smooth' });
  node.classList.add('flash');
  setTimeout(() => node.classList.remove('flash'), 1600);
  if (focus) {
    node.tabIndex = -1; // a message is not in the Tab order; this one takes the focus once
    node.focus({ preventScroll: true });
  }
}

/** Opens conversation id at message seq (a search result), loading history back to it. */
async function openAt(id, seq) {
  if (openId !== id) await openConv(id);
  else document.querySelector('.app').classList.add('show-chat'); // phones: the chat shows
  await jumpTo(conv(id), seq, true);
}

function startReply(c, m) {
  replying = { conversationId: c.id, seq: m.seq };
  editing = null;
  $('edit-bar').hidden = true;
  renderReplyBar();
  $('composer-input').focus();
}

function renderReplyBar() {
  const bar = $('reply-bar');
  if (!replying || replying.conversationId !== openId) {
    bar.hidden = true;
    return;
  }
  const c = conv(openId);
  const m = c.msgs.get(replying.seq);
  bar.hidden = false;
  $('reply-who').textContent = !m ? '' : m.from === me ? 'yourself' : m.from;
  const t = !m ? '' : m.recalled ? recalledText(m) : bodyText(m) || attachmentsSummary(m.attachments);
  $('reply-text').textContent = t.length > 80 ? t.slice(0, 80) + '…' : t;
}

function reactionsNode(c, m) {
  const row = el('div', 'reactions');
  for (const r of m.reactions) {
    const b = el('button', 'chip' + (r.me ? ' mine' : ''));
    b.type = 'button';
    b.dataset.emoji = r.emoji;
    b.setAttribute('aria-pressed', r.me ? 'true' : 'false');
    b.title = r.me ? 'Take back your ' + r.emoji : 'React with ' + r.emoji;
    b.append(el('span', 'emoji', r.emoji), el('span', 'count', String(r.count || 0)));
    b.disabled = c.left;
    b.onclick = (ev) => {
      ev.stopPropagation();
      toggleReaction(c, m, r.emoji);
    };
    row.append(b);
  }
  return row;
}

/** Adds my reaction, or takes it back when I have it; the answer (personal) updates the counts. */
function toggleReaction(c, m, emoji) {
  const mine = !!m.reactions?.some((r) => r.emoji === emoji && r.me);
  const p = mine ? client.unreact(c.id, m.seq, emoji) : client.react(c.id, m.seq, emoji);
  p.then((u) => {
    const cur = c.msgs.get(m.seq) || m;
    if (applyReaction(cur, u)) rerender(c.id);
  }, alertError);
}

function threadLink(c, m) {
  const n = m.thread.replyCount;
  const b = el('button', 'thread-link', `${n} ${n === 1 ? 'reply' : 'replies'}` + (m.thread.lastReplyAt ? ' · ' + fmtTime(m.thread.lastReplyAt) : ''));
  b.type = 'button';
  b.onclick = (ev) => {
    ev.stopPropagation();
    openThread(c, m.seq);
  };
  return b;
}

/** A message a bot is streaming: the text so far, with a cursor. */
function streamNode(c, st) {
  const li = el('li', 'msg streaming' + (st.from === me ? ' mine' : ''));
  li.dataset.streamId = st.id;
  li.dataset.from = st.from;
  if (c.group && st.from !== me) li.append(el('div', 'from', st.from));
  if (st.replyTo) li.append(quoteNode(c, { replyTo: st.replyTo }));
  const body = el('div', 'body', (st.missedStart ? '… ' : '') + st.text);
  body.append(el('span', 'cursor'));
  li.append(body, el('div', 'meta', 'writing…'));
  li.setAttribute('aria-busy', 'true');
  return li;
}

/** A chunk of a streamed message: appended to its bubble at its offset. */
function applyChunk(ch) {
  const c = conv(ch.conversationId);
  if (c.doneStreams.has(ch.streamId)) return; // the stored message is here already
  const off = ch.offset || 0;
  let st = c.streams.get(ch.streamId);
  if (!st) {
    st = { id: ch.streamId, from: ch.from, text: '', next: off, missedStart: off > 0, replyTo: ch.replyTo, threadRoot: ch.threadRoot };
    c.streams.set(ch.streamId, st);
  }
  const bytes = new TextEncoder().encode(ch.text || '');
  if (off + bytes.length <= st.next && bytes.length) return; // a repeat
  st.text += off < st.next ? new TextDecoder().decode(bytes.subarray(st.next - off)) : ch.text || '';
  st.next = Math.max(st.next, off + bytes.length);
  c.activity = Math.max(c.activity, Date.now());
  if (c.id === openId) scheduleRender();
}

let renderQueued = false;
function scheduleRender() {
  if (renderQueued) return;
  renderQueued = true;
  requestAnimationFrame(() => {
    renderQueued = false;
    renderChat();
  });
}

// -- who may do what in a group: its members and their roles, loaded when needed

function loadMembers(c) {
  if (!c.group || !client) return Promise.resolve([]);
  if (c.members) return Promise.resolve(c.members);
  if (!c.membersP) {
    c.membersP = client.allMembers(c.id).then(
      (ms) => {
        c.members = ms;
        c.membersP = null;
        if (c.id === openId) renderChat();
        return ms;
      },
      () => {
        c.membersP = null;
        return [];
      },
    );
  }
  return c.membersP;
}

function myRole(c) {
  if (!c.group) return '';
  if (c.info?.owner === me) return 'GROUP_ROLE_OWNER';
  return c.members?.find((x) => x.userId === me)?.role || '';
}

const isAdmin = (c) => ['GROUP_ROLE_OWNER', 'GROUP_ROLE_ADMIN'].includes(myRole(c));

/** Either side of a 1:1; a group's owner and admins. */
function canPin(c) {
  if (c.left || c.info?.dissolved) return false;
  return !c.group || isAdmin(c);
}

function canMentionAll(c) {
  return c.group && !c.left && (!!c.info?.membersMentionAll || isAdmin(c));
}

// -- disappearing messages (docs/retention.md)

// [seconds, in sentences, in the header's menu (short: it shares a phone's header with the name)]
const TIMERS = [
  [0, 'Off', 'Off'],
  [30, '30 seconds', '30 sec'],
  [300, '5 minutes', '5 min'],
  [3600, '1 hour', '1 hour'],
  [86400, '1 day', '1 day'],
  [604800, '1 week', '1 week'],
  [2419200, '4 weeks', '4 weeks'],
];

function timerText(sec) {
  return (TIMERS.find(([v]) => v === sec) || [sec, `${sec} seconds`])[1].toLowerCase();
}

// The header's timer: shows the conversation's setting and changes it (the
// server refuses those who may not: a plain group member).
function disappearingBar(c) {
  const sel = $('disappear-select');
  if (!sel) return;
  if (!sel.options.length) {
    for (const [v, , short] of TIMERS) sel.append(new Option(short, String(v))); // (the icon beside it is an SVG: an emoji is a box where no font has it)
    sel.onchange = () => {
      const cc = conv(openId);
      const sec = Number(sel.value);
      client.setDisappearing(cc.id, sec).then((ack) => {
        // The event is not echoed to this session: apply it here.
        apply({ conversationId: cc.id, seq: ack.seq, from: me, clientMsgId: ack.clientMsgId, serverTime: ack.serverTime, kind: 'MESSAGE_KIND_DISAPPEARING_SET', event: { disappearingSeconds: sec } }, true);
        rerender(cc.id);
      }, (err) => {
        sel.value = String(cc.disappearing || 0);
        alertError(err);
      });
    };
  }
  sel.value = String(c.disappearing || 0);
  sel.disabled = c.left || !!c.info?.dissolved;
  sel.classList.toggle('on', !!c.disappearing);
  sel.title = c.disappearing ? `Messages disappear ${timerText(c.disappearing)} after they are sent` : 'Disappearing messages: off';
}

// Messages past their expiry leave the view (the server no longer serves them).
function dropExpired(c) {
  const now = Date.now();
  for (const [seq, m] of c.msgs) if (m.expiresAt && m.expiresAt <= now) c.msgs.delete(seq);
  if (c.last?.expiresAt && c.last.expiresAt <= now) c.last = undefined;
}

// Once a second: an open conversation with messages that disappear is redrawn
// when one of them has expired.
setInterval(() => {
  if (!openId) return;
  const c = conv(openId);
  const now = Date.now();
  for (const m of c.msgs.values()) {
    if (m.expiresAt && m.expiresAt <= now) {
      rerender(c.id);
      return;
    }
  }
}, 1000);

// -- pins

function togglePin(c, seq, pinned) {
  (pinned ? client.unpin(c.id, seq) : client.pin(c.id, seq)).then((ack) => {
    // The event is not echoed to this session: apply it here (null: it was done already).
    if (ack) apply({ conversationId: c.id, seq: ack.seq, from: me, clientMsgId: ack.clientMsgId, serverTime: ack.serverTime, kind: pinned ? 'MESSAGE_KIND_UNPINNED' : 'MESSAGE_KIND_PINNED', event: { targetSeq: seq } }, true);
    else refreshList();
    rerender(c.id);
  }, alertError);
}

let pinsExpanded = false;

/** The words a pinned message shows in the bar. */
function pinText(c, seq) {
  const m = c.msgs.get(seq) || c.pinMsgs.get(seq);
  if (!m) return 'Message ' + seq;
  if (m.recalled) return recalledText(m);
  return bodyText(m) || attachmentsSummary(m.attachments) || 'Message ' + seq;
}

function renderPins(c) {
  const bar = $('pinned-bar');
  const pins = c.pins;
  if (!pins.length) {
    bar.hidden = true;
    return;
  }
  bar.hidden = false;
  // Pinned messages that are not loaded: fetch each once, for its text.
  for (const p of pins) {
    if (!c.msgs.has(p.seq) && !c.pinMsgs.has(p.seq)) {
      c.pinMsgs.set(p.seq, null);
      client
        ?.history(c.id, p.seq + 1, 1)
        .then((page) => {
          const m = (page.messages || []).find((x) => x.seq === p.seq);
          if (m) c.pinMsgs.set(p.seq, m);
          if (openId === c.id) renderPins(c);
        })
        .catch(() => {});
    }
  }
  const latest = pins[pins.length - 1];
  const toggle = $('pinned-toggle');
  toggle.replaceChildren(el('span', 'pin-icon', '📌'), el('span', 'pin-count', pins.length === 1 ? 'Pinned' : `${pins.length} pinned`), el('span', 'pin-latest', pinText(c, latest.seq)));
  toggle.setAttribute('aria-expanded', pinsExpanded ? 'true' : 'false');
  const list = $('pinned-list');
  list.hidden = !pinsExpanded;
  list.replaceChildren(
    ...[...pins].reverse().map((p) => {
      const li = el('li', 'pin');
      li.dataset.seq = p.seq;
      const jump = el('button', 'pin-jump');
      jump.type = 'button';
      jump.append(el('span', 'pin-text', pinText(c, p.seq)), el('span', 'pin-by', `${p.pinnedBy === me ? 'you' : p.pinnedBy || ''}${p.pinnedAt ? ' · ' + fmtTime(p.pinnedAt) : ''}`));
      jump.onclick = () => {
        pinsExpanded = false;
        renderPins(c);
        jumpTo(c, p.seq);
      };
      li.append(jump);
      if (canPin(c)) {
        const un = el('button', 'secondary pin-remove', 'Unpin');
        un.type = 'button';
        un.dataset.action = 'unpin';
        un.onclick = () => togglePin(c, p.seq, true);
        li.append(un);
      }
      return li;
    }),
  );
}

// -- threads

async function openThread(c, root) {
  const same = threadOpen && threadOpen.conversationId === c.id && threadOpen.root === root;
  threadOpen = { conversationId: c.id, root };
  document.querySelector('.app').classList.add('show-thread');
  renderThread();
  if (!same) $('thread-input').value = '';
  $('thread-input').focus({ preventScroll: true });
  const t = threadState(c, root);
  if (!t.loaded) await loadThread(c, root, true);
  $('thread-messages').scrollTop = $('thread-messages').scrollHeight;
}

function closeThread() {
  threadOpen = null;
  document.querySelector('.app').classList.remove('show-thread');
  renderThread();
}

function threadState(c, root) {
  let t = c.threads.get(root);
  if (!t) c.threads.set(root, (t = { loaded: false, hasOlder: false, loading: false }));
  return t;
}

async function loadThread(c, root, first = false) {
  const t = threadState(c, root);
  if (t.loading) return;
  t.loading = true;
  renderThread();
  try {
    const have = [...c.msgs.values()].filter((m) => m.threadRoot === root).map((m) => m.seq);
    const before = first || !have.length ? 0 : Math.min(...have);
    const page = await client.threadHistory(c.id, root, before, 50);
    for (const m of page.messages || []) apply(m, false);
    t.hasOlder = !!page.hasMore && (page.messages || []).length > 0;
    t.loaded = true;
  } catch (err) {
    alertError(err);
  } finally {
    t.loading = false;
  }
  if (openId === c.id) renderChat();
}

function renderThread() {
  const panel = $('thread-panel');
  if (!threadOpen || threadOpen.conversationId !== openId) {
    panel.hidden = true;
    document.querySelector('.app').classList.remove('show-thread');
    $('chat').classList.remove('threaded');
    return;
  }
  panel.hidden = false;
  $('chat').classList.add('threaded'); // wide screens: the conversation makes room for the panel
  const c = conv(openId);
  const rootSeq = threadOpen.root;
  const root = c.msgs.get(rootSeq);
  $('thread-root').replaceChildren(...(root ? [msgNode(c, root, 'root')] : []));
  const replies = [...c.msgs.values()].filter((m) => m.threadRoot === rootSeq && (m.kind || 'MESSAGE_KIND_NORMAL') === 'MESSAGE_KIND_NORMAL').sort((a, b) => a.seq - b.seq);
  const n = Math.max(root?.thread?.replyCount || 0, replies.length);
  $('thread-count').textContent = n ? `${n} ${n === 1 ? 'reply' : 'replies'}` : '';
  const box = $('thread-messages');
  const atBottom = box.scrollHeight - box.scrollTop - box.clientHeight < 60;
  const nodes = replies.map((m) => msgNode(c, m, 'thread'));
  for (const [id, p] of c.pending) if (p.threadRoot === rootSeq) nodes.push(pendingNode(c, id, p));
  for (const st of c.streams.values()) if (st.threadRoot === rootSeq) nodes.push(streamNode(c, st));
  $('thread-list').replaceChildren(...nodes);
  const t = threadState(c, rootSeq);
  const older = $('thread-older');
  older.replaceChildren();
  if (t.loading) older.textContent = 'Loading…';
  else if (t.hasOlder) {
    const b = el('button', 'link', 'Earlier replies');
    b.type = 'button';
    b.onclick = () => loadThread(c, rootSeq);
    older.append(b);
  } else if (t.loaded && !replies.length) older.textContent = 'No replies yet';
  if (atBottom) box.scrollTop = box.scrollHeight;
  $('thread-input').disabled = c.left || !!c.info?.dissolved;
}

// -- mentions: typing @ offers the conversation's members

let mentionState = null; // {start, query, items, index}

/** Who can be mentioned in c: its members (a 1:1: the peer), and "all" where allowed. */
function mentionCandidates(c) {
  const users = c.group ? (c.members || []).map((x) => x.userId) : [c.peer];
  const out = users.filter((u) => u && u !== me).map((u) => ({ id: u, label: u }));
  if (canMentionAll(c)) out.unshift({ id: 'all', label: 'all', note: 'everyone in the group' });
  return out;
}

function updateMentions() {
  const input = $('composer-input');
  const c = openId ? conv(openId) : null;
  const before = input.value.slice(0, input.selectionStart ?? input.value.length);
  const m = /(^|\s)@([A-Za-z0-9_.@-]*)$/.exec(before);
  if (!c || !m || editing) return hideMentions();
  if (c.group && !c.members) {
    loadMembers(c).then(() => openId === c.id && updateMentions());
  }
  const q = m[2].toLowerCase();
  const items = mentionCandidates(c)
    .filter((x) => x.id.toLowerCase().startsWith(q) || (q && x.id.toLowerCase().includes(q)))
    .slice(0, 8);
  if (!items.length) return hideMentions();
  const keep = mentionState && mentionState.query === q ? mentionState.index : 0;
  mentionState = { start: before.length - m[2].length - 1, query: q, items, index: Math.min(keep, items.length - 1) };
  renderMentions();
}

function renderMentions() {
  const ul = $('mention-list');
  if (!mentionState) {
    ul.hidden = true;
    return;
  }
  ul.hidden = false;
  ul.replaceChildren(
    ...mentionState.items.map((x, i) => {
      const li = el('li', 'mention-item' + (i === mentionState.index ? ' active' : ''));
      li.setAttribute('role', 'option');
      li.setAttribute('aria-selected', i === mentionState.index ? 'true' : 'false');
      li.dataset.user = x.id;
      li.append(el('span', 'mention-name', '@' + x.label));
      if (x.note) li.append(el('span', 'mention-note', x.note));
      li.onmousedown = (ev) => {
        ev.preventDefault(); // keep the focus in the composer
        pickMention(i);
      };
      return li;
    }),
  );
}

function hideMentions() {
  mentionState = null;
  renderMentions();
}

function pickMention(i) {
  const st = mentionState;
  if (!st) return;
  const x = st.items[i];
  const input = $('composer-input');
  const caret = input.selectionStart ?? input.value.length;
  const insert = '@' + x.id + ' ';
  input.value = input.value.slice(0, st.start) + insert + input.value.slice(caret);
  const pos = st.start + insert.length;
  input.setSelectionRange(pos, pos);
  hideMentions();
  input.focus();
}

/** The users a text mentions (members named with @), and whether it mentions everyone (@all, where allowed). */
function mentionsIn(c, textValue) {
  const known = new Set(c.group ? (c.members || []).map((x) => x.userId) : [c.peer]);
  const mentions = [];
  let mentionAll = false;
  for (const x of textValue.matchAll(/(^|[^A-Za-z0-9_.@-])@([A-Za-z0-9_.@-]+)/g)) {
    let name = x[2];
    if (!known.has(name) && name !== 'all') name = name.replace(/[.@-]+$/, '');
    if (name === 'all' && canMentionAll(c)) mentionAll = true;
    else if (name !== me && known.has(name) && !mentions.includes(name) && mentions.length < 50) mentions.push(name);
  }
  return { mentions, mentionAll };
}

function renderTyping() {
  const m = openId ? typingTimers.get(openId) : null;
  const who = m ? [...m.keys()] : [];
  $('typing').textContent = who.length ? `${who.join(', ')} ${who.length > 1 ? 'are' : 'is'} typing…` : '';
}

function setBanner(textContent, action) {
  const b = $('banner');
  if (!textContent) {
    b.hidden = true;
    return;
  }
  b.hidden = false;
  b.replaceChildren(textContent);
  if (action) {
    const btn = el('button', '', action.label);
    btn.onclick = action.run;
    b.append(btn);
  }
}

function rerender(convId) {
  renderList();
  if (convId === openId) renderChat();
}

/** An error as a few words: its code ("permission denied"), else its message. A refusal by the
 *  app's moderation gives the app's reason instead. */
function errText(err) {
  if (isCode(err, 'ERROR_CODE_REJECTED')) return rejectedText(err);
  return err?.code ? String(err.code).replace('ERROR_CODE_', '').toLowerCase().replaceAll('_', ' ') : String(err?.message || err);
}

/** Why the app's moderation refused a message: the reason it gave (its own words, shown as text),
 *  else a sentence for the rule (the word filter gives no reason). */
function rejectedText(err) {
  if (err?.reason) return err.reason;
  return err?.rejectCode === 'word_filter' ? 'it contains words that are not allowed here' : 'refused by moderation';
}

function alertError(err) {
  setBanner('Could not do that: ' + errText(err));
  setTimeout(() => client?.state === 'ready' && setBanner(''), 3000);
}

// ---- conversations ----

async function openConv(id) {
  openId = id;
  store.set('open.' + me, id);
  editing = null;
  $('edit-bar').hidden = true;
  document.querySelector('.app').classList.add('show-chat');
  if (replying && replying.conversationId !== id) replying = null;
  if (threadOpen && threadOpen.conversationId !== id) closeThread();
  pinsExpanded = false;
  hideMentions();
  const c = conv(id);
  c.stick = true;
  c.unreadMentions = 0;
  // Where reading stopped: the "New messages" divider goes after it, and the view opens there.
  c.unreadFrom = c.unread > 0 ? c.readSeq : 0;
  c.toDivider = c.unread > 0;
  c.newBelow = 0;
  $('composer-error').textContent = '';
  $('thread-error').textContent = '';
  loadMembers(c);
  renderList();
  renderChat();
  if (!c.loaded) await loadOlder(c, true);
  // Load back to the first unread message, one more page at most: past that, reading starts
  // at the newest (a long backlog is not all loaded at once; scrolling up loads it).
  for (let i = 0; i < 1 && c.toDivider && c.hasOlder && openId === id && !$('new-sep'); i++) {
    const oldest = Math.min(...[...c.msgs.keys()]);
    if (!(oldest > c.unreadFrom + 1)) break;
    await loadOlder(c);
  }
  if (openId === id && c.toDivider) {
    if (!$('new-sep')) c.stick = true;
    renderChat();
  }
  c.toDivider = false;
  updateCount('main');
  scheduleRead(c);
  refreshReadCounts(c);
  $('composer-input').focus({ preventScroll: true });
}

/** Loads the page before the oldest message shown (first: the newest page). A call while a
 *  page loads waits for that one (jumpTo pages back in a loop). */
function loadOlder(c, first = false) {
  if (c.loadingOlder) return c.olderP;
  if (!first && !c.hasOlder) return Promise.resolve();
  return (c.olderP = loadOlderNow(c, first));
}

async function loadOlderNow(c, first) {
  c.loadingOlder = true;
  renderChat();
  const box = $('messages');
  try {
    const seqs = [...c.msgs.keys()].filter((s) => c.loaded || !first);
    const before = first ? 0 : Math.min(...seqs);
    // Any group through the E2EE layer: the list does not say which are encrypted, and what
    // this device decrypted before comes from its key store (MLS keys are used once).
    if (c.group) await e2eeSettled; // a page opened right after sign-in: decrypt it, do not show it undecryptable
    const page = e2ee && c.group ? await e2ee.history(c.id, before, PAGE) : await client.history(c.id, before, PAGE);
    for (const m of page.messages || []) apply(plainOf(m), false);
    // Pages are bounded by bytes, so a page may be short: only hasMore ends the history (an
    // empty page cannot move `before`, so it ends it too rather than asking again forever).
    c.hasOlder = !!page.hasMore && (page.messages || []).length > 0;
    if (!first) c.restoreFromBottom = box.scrollHeight - box.scrollTop;
    else c.stick = true;
    c.loaded = true;
  } catch (err) {
    alertError(err);
  } finally {
    c.loadingOlder = false;
  }
  if (openId === c.id) renderChat();
  // Fill the screen: keep loading while there is no scrollbar yet.
  if (openId === c.id && c.hasOlder && box.scrollHeight <= box.clientHeight + 10) loadOlder(c);
}

let rcTimer = null;
async function refreshReadCounts(c) {
  if (!c.group || openId !== c.id || !client) return;
  const own = [...c.msgs.values()].filter((m) => m.from === me && (m.kind || 'MESSAGE_KIND_NORMAL') === 'MESSAGE_KIND_NORMAL' && !m.recalled);
  const seqs = own.map((m) => m.seq).slice(-100);
  if (seqs.length) {
    try {
      const counts = await client.readCounts(c.id, seqs);
      let changed = false;
      for (const rc of counts) {
        if ((c.readCounts.get(rc.seq) || 0) !== (rc.count || 0)) changed = true;
        c.readCounts.set(rc.seq, rc.count || 0);
      }
      if (changed && openId === c.id) renderChat();
    } catch {}
  }
}
function scheduleReadCounts() {
  clearInterval(rcTimer);
  rcTimer = setInterval(() => {
    if (openId && document.visibilityState === 'visible') refreshReadCounts(conv(openId));
  }, 2000);
}

// ---- sending, editing ----

/** Sends a message into the open conversation; extra: {replyTo, threadRoot, mentions, mentionAll}. */
function send(textValue, atts = [], extra = {}) {
  const c = conv(openId);
  if (editing) {
    const target = editing;
    editing = null;
    $('edit-bar').hidden = true;
    client.edit(target.conversationId, target.seq, textValue).then((ack) => {
      // The server does not echo an edit to the session that made it: apply it here.
      const payload = new TextEncoder().encode(textValue);
      apply({ conversationId: ack.conversationId, seq: ack.seq, from: me, clientMsgId: ack.clientMsgId, contentType: 'text', payload, serverTime: ack.serverTime, kind: 'MESSAGE_KIND_EDIT', event: { targetSeq: target.seq } }, false);
      rerender(ack.conversationId);
    }, alertError);
    return;
  }
  const clientMsgId = Array.from(crypto.getRandomValues(new Uint8Array(12)), (b) => b.toString(16).padStart(2, '0')).join('');
  c.pending.set(clientMsgId, { text: textValue, atts, replyTo: extra.replyTo, threadRoot: extra.threadRoot });
  c.activity = Date.now();
  c.stick = true;
  renderChat();
  renderList();
  const target = c.group ? { conversationId: c.id } : { to: c.peer };
  const sent = !isEncrypted(c)
    ? client.send({ ...target, contentType: 'text', payload: textValue, clientMsgId, attachments: atts.map((a) => a.id), ...extra })
    : !e2ee
      ? Promise.reject(Object.assign(new Error('End-to-end encryption is not available in this browser'), { e2ee: true }))
      : atts.length
        ? Promise.reject(Object.assign(new Error('Files cannot be sent in encrypted conversations'), { e2ee: true }))
        : e2ee.send(c.id, textValue, { clientMsgId, ...extra });
  sent.then(
    (ack) => {
      const p = c.pending.get(clientMsgId);
      c.pending.delete(clientMsgId);
      if (!c.msgs.has(ack.seq)) {
        const m = { conversationId: ack.conversationId, seq: ack.seq, messageId: ack.messageId, from: me, clientMsgId, contentType: 'text', payload: new TextEncoder().encode(p ? p.text : textValue), serverTime: ack.serverTime, kind: 'MESSAGE_KIND_NORMAL' };
        if (atts.length) m.attachments = atts;
        for (const k of ['replyTo', 'threadRoot', 'mentionAll']) if (extra[k]) m[k] = extra[k];
        if (extra.mentions?.length) m.mentions = extra.mentions;
        apply(m, false);
        // What the upload told may be partial (a resumable upload names the
        // file only): the stored message has the server's whole description.
        if (atts.length) describeOwn(c, ack.seq);
      }
      if (ack.seq > c.readSeq) {
        // Answering means having read what came before; the server keeps
        // read cursors only as told, so tell it when others' messages lie
        // between the last mark and this one (a mark scheduled a moment ago
        // would otherwise see nothing left unread and never be sent).
        if (ack.seq > c.readSeq + 1) client.markRead(c.id, ack.seq).catch(() => {});
        c.readSeq = ack.seq;
      }
      if (!c.group) ensurePresence(c.peer);
      if (openId === c.id) renderChat();
      renderList();
    },
    (err) => {
      const p = c.pending.get(clientMsgId);
      if (p) {
        p.failed = err?.e2ee ? err.message : err?.code ? sendErrText(err) : 'closed';
        p.rejected = isCode(err, 'ERROR_CODE_REJECTED');
      }
      if (isCode(err, 'ERROR_CODE_NO_SUCH_USER')) c.noSuchUser = true;
      if (p?.failed) announce('Message not sent: ' + p.failed);
      if (openId === c.id) renderChat();
    },
  );
}

/** An error of starting or changing an encrypted conversation, for a dialog. */
function e2eeErrText(err) {
  if (err?.code === 'NO_KEY_PACKAGES') return 'Not everyone has signed in with encryption yet: ' + err.message;
  return String(err?.message || err?.code || err);
}

/** Why a send was refused, for its bubble ("Not sent: …"). */
function sendErrText(err) {
  if (isCode(err, 'ERROR_CODE_NO_SUCH_USER')) return 'No such user';
  if (isCode(err, 'ERROR_CODE_TOO_LARGE') || isCode(err, 'ERROR_CODE_FRAME_TOO_LARGE')) {
    return 'too long for this server' + (maxFrame ? ` (at most ${fmtNum(textLimit())} bytes of text)` : '');
  }
  return errText(err);
}

// ---- the size limit: a frame over the server's max_frame_bytes is refused
// whole, so the composer measures what it would send (the payload travels
// base64 in a JSON frame) and refuses what would not fit, instead of cutting.

const EMPTY = new Uint8Array(0);
const fmtNum = (n) => n.toLocaleString('en-US');
const utf8Len = (s) => new TextEncoder().encode(s).length;

/** The most payload bytes that fit in a frame around body (a send or an edit with an empty payload). */
function payloadRoom(frame) {
  if (!maxFrame) return Infinity;
  // The largest frame id the SDK will use, and the JSON exactly as it encodes it.
  const env = utf8Len(encodeFrame({ id: 2 ** 31, ...frame }));
  return Math.max(0, Math.floor((maxFrame - env) / 4) * 3);
}

/** The largest text the composer (where: 'main' or 'thread') may send into the open conversation now. */
function textLimit(where = 'main', value = '') {
  if (!maxFrame || !openId) return maxFrame ? payloadRoom({ send: { clientMsgId: 'x'.repeat(24), contentType: 'text', payload: EMPTY, conversationId: 'g:' + 'x'.repeat(64) } }) : Infinity;
  const c = conv(openId);
  const clientMsgId = 'x'.repeat(24);
  if (where === 'main' && editing) {
    return payloadRoom({ edit: { conversationId: editing.conversationId, seq: editing.seq, contentType: 'text', payload: EMPTY, clientMsgId } });
  }
  const send = { clientMsgId, contentType: 'text', payload: EMPTY, ...(c.group ? { conversationId: c.id } : { to: c.peer }) };
  const ready = where === 'main' ? c.drafts.filter((d) => d.status === 'done' && d.att) : [];
  if (ready.length) send.attachments = ready.map((d) => ({ id: d.att.id }));
  if (where === 'main' && replying?.conversationId === c.id) send.replyTo = replying.seq;
  const m = mentionsIn(c, value);
  if (m.mentions.length) send.mentions = m.mentions;
  if (m.mentionAll) send.mentionAll = true;
  if (where === 'thread' && threadOpen) send.threadRoot = threadOpen.root;
  return payloadRoom({ send });
}

const COUNT_IDS = { main: ['composer-input', 'composer-count', 'composer-error'], thread: ['thread-input', 'thread-input-count', 'thread-error'] };

/** Shows the size counter once the text nears the limit; returns [bytes, limit]. */
function updateCount(where = 'main') {
  const [inputId, countId, errId] = COUNT_IDS[where];
  const v = $(inputId).value.trim();
  const n = utf8Len(v);
  const limit = textLimit(where, v);
  const count = $(countId);
  count.hidden = !(n > limit * 0.8);
  count.classList.toggle('over', n > limit);
  count.textContent = count.hidden ? '' : `${fmtNum(n)} / ${fmtNum(limit)}`;
  count.title = 'Bytes of text in this message, and the most this server takes in one';
  if (n <= limit) $(errId).textContent = '';
  return [n, limit];
}

/** False, with an error by the composer, when its text is over the limit. */
function fitsLimit(where) {
  const [n, limit] = updateCount(where);
  if (n <= limit) return true;
  $(COUNT_IDS[where][2]).textContent = `Too long to send: ${fmtNum(n)} bytes of text, and this server takes at most ${fmtNum(limit)} in one message. Shorten it, or send it as a file.`;
  return false;
}

function startEdit(c, m) {
  if (isEncrypted(c)) return announce('Editing is not available in encrypted conversations');
  editing = { conversationId: c.id, seq: m.seq };
  replying = null;
  renderReplyBar();
  $('edit-bar').hidden = false;
  const input = $('composer-input');
  input.value = bodyText(m);
  input.focus();
  updateCount('main');
}

// ---- reporting a message to the app's moderators ----

let reporting = null; // {conversationId, seq} of the message in the report dialog

function openReport(c, m) {
  reporting = { conversationId: c.id, seq: m.seq };
  const quote = bodyText(m) || attachmentsSummary(m.attachments);
  $('report-quote').textContent = (m.from ? m.from + ': ' : '') + (quote.length > 140 ? quote.slice(0, 140) + '…' : quote);
  $('report-reason').value = 'spam';
  $('report-note').value = '';
  $('report-error').textContent = '';
  $('report-ok').disabled = false;
  $('report-dialog').showModal();
}

async function submitReport() {
  const target = reporting;
  if (!target || !client) return;
  const reason = $('report-reason').value;
  const note = $('report-note').value.trim();
  if (new TextEncoder().encode(note).length > 1000) {
    $('report-error').textContent = 'The note is too long (at most 1000 bytes).';
    return;
  }
  $('report-error').textContent = '';
  $('report-ok').disabled = true;
  try {
    await client.reportMessage(target.conversationId, target.seq, reason, note || undefined);
  } catch (err) {
    if (reporting !== target) return;
    $('report-ok').disabled = false;
    $('report-error').textContent = isCode(err, 'ERROR_CODE_PERMISSION_DENIED')
      ? 'This message can no longer be reported.'
      : 'Could not send the report: ' + errText(err);
    return;
  }
  conv(target.conversationId).reported.add(target.seq);
  if (reporting === target) {
    reporting = null;
    $('report-dialog').close();
  }
  rerender(target.conversationId);
}

// ---- files: attaching, uploading, showing ----
// Files are uploaded as soon as they are attached (the button, a paste, a
// drop), each with its progress and a × to cancel; Send waits until they are
// uploaded. Messages show images as thumbnails (a box of the image's
// proportions until it loads), audio and video with the browser's controls,
// other files as a card that downloads them. Download URLs last minutes
// (media_url_ttl): each is asked for when needed and asked again once near
// its expiry, never kept for long.

const MAX_FILES = 10; // per message (the server's limit)
const IMG_BOX = 240; // the largest side of an image in a message, px

function fmtSize(n) {
  if (!(n >= 0)) return '';
  if (n < 1000) return `${n} B`;
  const units = ['KB', 'MB', 'GB', 'TB'];
  let v = n;
  let i = -1;
  do {
    v /= 1000;
    i++;
  } while (v >= 1000 && i < units.length - 1);
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ${units[i]}`;
}

function kindOf(a) {
  const t = a.contentType || '';
  if (t.startsWith('image/')) return 'image';
  if (t.startsWith('video/')) return 'video';
  if (t.startsWith('audio/')) return 'audio';
  return 'file';
}

function attachmentsSummary(atts) {
  if (!atts?.length) return '';
  if (atts.length > 1) return `📎 ${atts.length} files`;
  const a = atts[0];
  return { image: '📷 Photo', video: '🎬 Video', audio: '🎵 Audio' }[kindOf(a)] || '📎 ' + (a.name || 'File');
}

/** A document icon labelled with the file's extension (an SVG: no emoji font needed). */
function fileIcon(name, contentType) {
  const NS = 'http://www.w3.org/2000/svg';
  const mk = (tag, attrs) => {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return e;
  };
  const m = /\.([A-Za-z0-9]{1,4})$/.exec(name || '');
  const ext = (m ? m[1] : (contentType || '').split('/')[1]?.split(/[;+.-]/)[0] || '').slice(0, 4).toUpperCase();
  const svg = mk('svg', { viewBox: '0 0 32 40', width: '28', height: '35', 'aria-hidden': 'true', class: 'doc-icon' });
  svg.append(
    mk('path', { d: 'M5 2h15l8 8v28H5z', fill: '#e8eefc', stroke: 'currentColor', 'stroke-width': '2', 'stroke-linejoin': 'round' }),
    mk('path', { d: 'M20 2v8h8', fill: 'none', stroke: 'currentColor', 'stroke-width': '2', 'stroke-linejoin': 'round' }),
  );
  if (ext) {
    const t = mk('text', { x: '16.5', y: '31', 'text-anchor': 'middle', 'font-size': ext.length > 3 ? '7' : '8.5', 'font-weight': '700', fill: 'currentColor' });
    t.textContent = ext;
    svg.append(t);
  }
  return svg;
}

/** A content type without its parameters ("text/plain; charset=utf-8" → "text/plain"). */
const essence = (t) => (t || '').split(';')[0].trim();

/** What went wrong with an upload, for the person who attached the file. */
function uploadErrText(err) {
  const code = String(err?.code || '').replace(/^ERROR_CODE_/, '').toLowerCase();
  switch (code) {
    case 'too_large':
      return 'Too large to send.';
    case 'unsupported_media_type':
      return 'This type of file is not allowed here.';
    case 'quota_exceeded':
      return 'Your storage for files is full.';
    case 'too_many_requests':
      return 'Too many uploads at once. Try again.';
    case 'bad_request':
      return 'The file is empty or damaged.';
    case 'unauthenticated':
      return 'Signed out. Sign in again.';
    case 'network':
    case 'unavailable':
      return 'Upload failed (connection or server). Try again.';
  }
  return 'Upload failed: ' + errText(err);
}

// -- download URLs: asked for on demand, reused only while they have time left

const urlCache = new Map(); // "file|thumb|conv|seq" -> {url, expiresAt} or a pending Promise

/** A URL for an attachment of message (convId, seq): a cached one with at least minLeftMs left, else a new one. */
async function fileUrlFor(convId, seq, fileId, thumb, minLeftMs = 60_000) {
  return (await fileLink(convId, seq, fileId, thumb, minLeftMs)).url;
}

/** As fileUrlFor, with the URL's expiry: {url, expiresAt}. */
async function fileLink(convId, seq, fileId, thumb, minLeftMs) {
  const key = `${fileId}|${thumb ? 't' : 'f'}|${convId}|${seq}`;
  const hit = urlCache.get(key);
  if (hit instanceof Promise) return hit;
  if (hit && hit.expiresAt - Date.now() > minLeftMs) return hit;
  const p = client.fileUrl(fileId, convId, seq, thumb).then(
    (r) => {
      // Only web URLs go into src and href (the server's own, or its object store's).
      if (!/^https?:\/\//i.test(r.url)) throw new Error('unexpected file URL');
      const link = { url: r.url, expiresAt: r.expiresAt || Date.now() + 60_000 };
      urlCache.set(key, link);
      return link;
    },
    (err) => {
      urlCache.delete(key);
      throw err;
    },
  );
  urlCache.set(key, p);
  return p;
}

/** Points a media element (img, video, audio) at a file's URL, and at a new one if the old one fails or has expired. */
function loadMedia(node, convId, seq, a, thumb) {
  let lastTry = 0;
  let expiresAt = 0;
  const load = (minLeft, then) => {
    lastTry = Date.now();
    fileLink(convId, seq, a.id, thumb, minLeft).then(
      (link) => {
        expiresAt = link.expiresAt;
        if (node.src !== link.url) {
          const t = node.currentTime;
          node.src = link.url;
          if (t) node.currentTime = t; // a player resumes where it was
        }
        then?.();
      },
      () => node.closest('.att')?.classList.add('broken'),
    );
  };
  // A player started long after it was shown: its URL has expired, so take a new one first.
  node.addEventListener('play', () => {
    if (expiresAt && expiresAt - Date.now() < 10_000) {
      node.pause();
      load(5 * 60_000, () => node.play().catch(() => {}));
    }
  });
  node.addEventListener('error', () => {
    if (Date.now() - lastTry > 5000) load(5 * 60_000);
    else node.closest('.att')?.classList.add('broken');
  });
  node.addEventListener('load', () => node.closest('.att')?.classList.add('loaded'));
  node.addEventListener('loadedmetadata', () => node.closest('.att')?.classList.add('loaded'));
  return () => load(60_000);
}

// Thumbnails and players ask for their URL when they come near the screen.
let mediaObserver = null;
function whenVisible(node, fn) {
  if (!('IntersectionObserver' in window)) return fn();
  if (!mediaObserver) {
    mediaObserver = new IntersectionObserver(
      (entries) => {
        for (const e of entries) {
          if (!e.isIntersecting) continue;
          mediaObserver.unobserve(e.target);
          e.target._load?.();
        }
      },
      { root: $('messages'), rootMargin: '600px 0px' },
    );
  }
  node._load = fn;
  mediaObserver.observe(node);
}

/** The displayed size of an image: at most IMG_BOX a side, its proportions kept. */
function boxOf(a) {
  const w = a.width || 0;
  const h = a.height || 0;
  if (!w || !h) return { w: IMG_BOX, h: Math.round((IMG_BOX * 3) / 4) };
  const s = Math.min(1, IMG_BOX / Math.max(w, h));
  return { w: Math.max(48, Math.round(w * s)), h: Math.max(48, Math.round(h * s)), ratio: `${w} / ${h}` };
}

// A message's attachment nodes are kept across renders (renderChat rebuilds
// the list): images do not reload and players keep playing.
const attCache = new WeakMap(); // message -> {key, node}

function attachmentsNode(c, m) {
  const key = m.seq + ':' + m.attachments.map((a) => a.id + (a.contentType || '') + (a.thumbnail ? 't' : '')).join(',');
  const hit = attCache.get(m);
  if (hit?.key === key) return hit.node;
  const box = el('div', 'atts');
  // Clicks on files are not clicks on the message (which opens its actions).
  box.addEventListener('click', (ev) => ev.stopPropagation());
  for (const a of m.attachments) box.append(attachmentNode(c.id, m.seq, a));
  attCache.set(m, { key, node: box });
  return box;
}

function attachmentNode(convId, seq, a) {
  const kind = kindOf(a);
  const name = a.name || 'file';
  // Images the browser shows: as a thumbnail, or, without one, the file itself when small.
  if (kind === 'image' && (a.thumbnail || (a.size || 0) <= 2_000_000)) {
    const { w, h, ratio } = boxOf(a);
    const btn = el('button', 'att att-image');
    btn.type = 'button';
    btn.setAttribute('aria-label', `Open image ${name}`);
    btn.dataset.file = a.id;
    btn.style.width = w + 'px';
    if (ratio) btn.style.aspectRatio = ratio;
    else btn.style.height = h + 'px';
    const img = el('img');
    img.alt = name;
    img.decoding = 'async';
    btn.append(img);
    whenVisible(btn, loadMedia(img, convId, seq, a, !!a.thumbnail));
    btn.addEventListener('click', () => openViewer(convId, seq, a, btn));
    return btn;
  }
  if (kind === 'video' || kind === 'audio') {
    const wrap = el('div', 'att att-' + kind);
    wrap.dataset.file = a.id;
    const player = el(kind);
    player.controls = true;
    player.preload = 'metadata';
    player.setAttribute('aria-label', name);
    if (kind === 'video') {
      player.playsInline = true;
      const { w, ratio } = boxOf(a);
      player.style.width = (a.width ? w : IMG_BOX) + 'px';
      if (ratio) player.style.aspectRatio = ratio;
    }
    wrap.append(player);
    if (kind === 'audio') wrap.append(el('div', 'att-caption', `${name} · ${fmtSize(a.size)}`));
    whenVisible(wrap, loadMedia(player, convId, seq, a, false));
    return wrap;
  }
  return fileCard(convId, seq, a);
}

/** A card that downloads the file, with a URL asked for at the click. */
function fileCard(convId, seq, a) {
  const name = a.name || 'file';
  const card = el('a', 'att att-file');
  card.dataset.file = a.id;
  card.href = '#';
  card.download = name;
  card.setAttribute('aria-label', `Download ${name}, ${fmtSize(a.size)}`);
  const icon = el('span', 'att-icon');
  icon.append(fileIcon(name, a.contentType));
  card.append(icon);
  const info = el('span', 'att-info');
  info.append(el('span', 'att-name', name), el('span', 'att-sub', [fmtSize(a.size), essence(a.contentType)].filter(Boolean).join(' · ')));
  card.append(info);
  let ready = false; // the href is a URL with time left: let the click through
  card.addEventListener('click', (ev) => {
    if (ready) {
      ready = false;
      return;
    }
    ev.preventDefault();
    card.classList.add('busy');
    fileUrlFor(convId, seq, a.id, false, 2 * 60_000).then(
      (url) => {
        card.classList.remove('busy');
        card.href = url;
        ready = true;
        card.click();
      },
      (err) => {
        card.classList.remove('busy');
        alertError(err);
      },
    );
  });
  return card;
}

// -- the image viewer: a modal dialog (the page behind is inert, so focus
// stays in it), closed by Esc, the × or a click.

let viewerOpener = null;
let viewerOp = 0;

async function openViewer(convId, seq, a, opener) {
  const dlg = $('viewer');
  const img = $('viewer-img');
  const op = ++viewerOp;
  viewerOpener = opener;
  $('viewer-title').textContent = a.name || 'Image';
  img.removeAttribute('src');
  img.alt = a.name || 'Image';
  $('viewer-status').textContent = 'Loading…';
  const dl = $('viewer-download');
  dl.removeAttribute('href');
  dl.download = a.name || 'image';
  dlg.showModal();
  try {
    const url = await fileUrlFor(convId, seq, a.id, false, 2 * 60_000);
    if (op !== viewerOp || !dlg.open) return;
    img.src = url;
    dl.href = url;
  } catch (err) {
    if (op === viewerOp) $('viewer-status').textContent = 'Could not load the image: ' + errText(err);
  }
}

function wireViewer() {
  const dlg = $('viewer');
  const img = $('viewer-img');
  img.addEventListener('load', () => ($('viewer-status').textContent = ''));
  img.addEventListener('error', () => img.getAttribute('src') && ($('viewer-status').textContent = 'Could not load the image.'));
  $('viewer-close').addEventListener('click', () => dlg.close());
  // A click on the image or the backdrop closes it; the bar's links and buttons do their own thing.
  dlg.addEventListener('click', (ev) => {
    if (ev.target === dlg || ev.target === img) dlg.close();
  });
  dlg.addEventListener('close', () => {
    viewerOp++;
    img.removeAttribute('src');
    viewerOpener?.focus({ preventScroll: true });
    viewerOpener = null;
  });
}

// -- attaching: the tray of files being uploaded for the next message

let draftSeq = 0;

function addFiles(files) {
  if (!openId || !client) return;
  const c = conv(openId);
  if (c.left || c.info?.dissolved) return;
  let skipped = 0;
  for (const file of files) {
    if (c.drafts.length >= MAX_FILES) {
      skipped++;
      continue;
    }
    const d = {
      key: ++draftSeq,
      file,
      name: file.name || (file.type.startsWith('image/') ? 'pasted-image.' + (file.type.split('/')[1] || 'png').replace(/[^a-z0-9]/g, '') : 'file'),
      status: 'uploading',
      sent: 0,
      error: '',
      retry: false,
      att: null,
      ctrl: null,
      preview: file.type.startsWith('image/') && file.size < 20_000_000 ? URL.createObjectURL(file) : '',
      node: null,
    };
    c.drafts.push(d);
    startUpload(c, d);
  }
  $('tray-note').textContent = skipped ? `A message carries at most ${MAX_FILES} files: ${skipped} not added.` : '';
  renderTray();
}

function startUpload(c, d) {
  d.status = 'uploading';
  d.error = '';
  d.sent = 0;
  d.ctrl = new AbortController();
  const ctrl = d.ctrl;
  client
    .upload(d.file, d.name, {
      signal: ctrl.signal,
      onProgress: (sent) => {
        d.sent = sent;
        updateDraft(d);
      },
    })
    .then(
      (att) => {
        if (ctrl.signal.aborted) return;
        d.att = att;
        d.status = 'done';
        d.sent = d.file.size;
      },
      (err) => {
        if (ctrl.signal.aborted || err?.name === 'AbortError') return;
        d.status = 'error';
        d.error = uploadErrText(err);
        d.retry = err?.temporary === true;
      },
    )
    .finally(() => {
      if (openId === c.id) renderTray();
    });
}

function dropDraft(c, d) {
  if (d.status === 'uploading') d.ctrl?.abort(); // the SDK also deletes what the server has
  if (d.preview) URL.revokeObjectURL(d.preview);
  c.drafts = c.drafts.filter((x) => x !== d);
}

function draftNode(c, d) {
  const li = el('li', 'draft');
  if (d.preview) li.append(Object.assign(el('img', 'draft-thumb'), { src: d.preview, alt: '' }));
  else {
    const icon = el('span', 'draft-thumb draft-icon');
    icon.append(fileIcon(d.name, d.file.type));
    li.append(icon);
  }
  const info = el('div', 'draft-info');
  const status = el('span', 'draft-status');
  const bar = el('progress', 'draft-progress');
  bar.max = 1;
  bar.setAttribute('aria-label', `Uploading ${d.name}`);
  info.append(el('span', 'draft-name', d.name), status, bar);
  li.append(info);
  const retry = el('button', 'secondary draft-retry', 'Retry');
  retry.type = 'button';
  retry.addEventListener('click', () => {
    startUpload(c, d);
    renderTray();
  });
  const x = el('button', 'draft-remove', '×');
  x.type = 'button';
  x.addEventListener('click', () => {
    dropDraft(c, d);
    renderTray();
    $('composer-input').focus({ preventScroll: true });
  });
  li.append(retry, x);
  d.node = { li, status, bar, retry, x };
  return d.node;
}

/** Updates one file's row in place (progress comes often). */
function updateDraft(d) {
  const n = d.node;
  if (!n) return;
  n.li.dataset.status = d.status;
  n.li.classList.toggle('failed', d.status === 'error');
  const size = d.file.size;
  n.status.textContent =
    d.status === 'uploading' ? `${fmtSize(d.sent)} of ${fmtSize(size)}` : d.status === 'done' ? `${fmtSize(size)} · ready` : d.error;
  n.status.setAttribute('role', d.status === 'error' ? 'alert' : 'none');
  n.bar.hidden = d.status !== 'uploading';
  n.bar.value = size ? d.sent / size : 0;
  n.retry.hidden = !(d.status === 'error' && d.retry);
  n.x.setAttribute('aria-label', (d.status === 'uploading' ? 'Cancel ' : 'Remove ') + d.name);
  n.x.title = d.status === 'uploading' ? 'Cancel upload' : 'Remove';
}

function renderTray() {
  const tray = $('tray');
  const c = openId ? conv(openId) : null;
  const drafts = c ? c.drafts : [];
  tray.replaceChildren(
    ...drafts.map((d) => {
      const n = d.node || draftNode(c, d);
      updateDraft(d);
      return n.li;
    }),
  );
  tray.hidden = drafts.length === 0;
  const uploading = drafts.filter((d) => d.status === 'uploading').length;
  const send = $('send-btn');
  send.disabled = uploading > 0;
  send.title = uploading ? `Waiting for ${uploading} upload${uploading > 1 ? 's' : ''}` : '';
  if (!c || !drafts.length) $('tray-note').textContent = '';
}

/** The server's description of a message this session sent with files. */
async function describeOwn(c, seq) {
  try {
    const page = await client.history(c.id, seq + 1, 1);
    const m = (page.messages || []).find((x) => x.seq === seq);
    const mine = c.msgs.get(seq);
    if (m?.attachments && mine) {
      mine.attachments = m.attachments;
      if (openId === c.id) renderChat();
    }
  } catch {}
}

function wireFiles() {
  const input = $('file-input');
  $('attach-btn').addEventListener('click', () => input.click());
  input.addEventListener('change', () => {
    addFiles([...input.files]);
    input.value = ''; // the same file can be picked again
    $('composer-input').focus({ preventScroll: true });
  });
  // Paste: files on the clipboard (a screenshot, a copied image) are attached.
  document.addEventListener('paste', (ev) => {
    if (!openId || $('app').hidden || document.querySelector('dialog[open]')) return;
    const files = [...(ev.clipboardData?.files || [])];
    if (!files.length) return;
    if (![...ev.clipboardData.types].includes('text/plain')) ev.preventDefault();
    addFiles(files);
  });
  // Drop onto the conversation.
  const chat = $('chat');
  const hasFiles = (ev) => [...(ev.dataTransfer?.types || [])].includes('Files');
  let depth = 0;
  chat.addEventListener('dragenter', (ev) => {
    if (!hasFiles(ev) || !openId) return;
    ev.preventDefault();
    depth++;
    chat.classList.add('dropping');
  });
  chat.addEventListener('dragover', (ev) => {
    if (!hasFiles(ev) || !openId) return;
    ev.preventDefault();
    ev.dataTransfer.dropEffect = 'copy';
  });
  chat.addEventListener('dragleave', () => {
    if (--depth <= 0) {
      depth = 0;
      chat.classList.remove('dropping');
    }
  });
  chat.addEventListener('drop', (ev) => {
    depth = 0;
    chat.classList.remove('dropping');
    if (!hasFiles(ev) || !openId) return;
    ev.preventDefault();
    addFiles([...ev.dataTransfer.files]);
  });
  wireViewer();
}

// ---- notifications (Web Push) ----
// The choice is kept per user in localStorage ("notify.<user>"). While it is
// on, each sign-in renews this browser's push subscription and registers it
// as this device's target again (the server drops a device's target when it
// signs out, or when another session of the same kind takes over).

let pushKey = ''; // the server's VAPID public key, once known
let notifyOp = 0; // bumped by each change: an answer to an older one is ignored

const notifyChoice = () => 'notify.' + me;
const BLOCKED = 'Notifications are blocked for this site. Allow them in the browser’s site settings, then turn this on again.';
const SERVER_OFF = 'This server has push notifications turned off.';

function notifyUI(on, status = '', { disabled = false, bad = false } = {}) {
  const t = $('notify-toggle');
  t.checked = on;
  t.disabled = disabled;
  const s = $('notify-status');
  s.textContent = status;
  s.classList.toggle('bad', bad);
}

/** Why this page cannot have push notifications ('' when it can). */
function pushUnsupported() {
  if (!window.isSecureContext) return 'Notifications need this page on https:// (or http://localhost).';
  if (!('serviceWorker' in navigator) || !('PushManager' in window) || !('Notification' in window)) return 'This browser does not support push notifications.';
  return '';
}

/** At sign-in: whether the toggle can work here, and the remembered choice renewed. */
async function initNotifications() {
  const op = ++notifyOp;
  const c = client;
  const why = pushUnsupported();
  if (why) return notifyUI(false, why, { disabled: true });
  const wanted = store.get(notifyChoice(), false);
  notifyUI(wanted, '', { disabled: true });
  try {
    pushKey = await webPushKey({ baseUrl: location.origin });
  } catch (err) {
    if (op !== notifyOp) return;
    if (err?.apiCode === 'not_found') return notifyUI(false, SERVER_OFF, { disabled: true });
    // Not known for now: turning it on asks again.
    return notifyUI(false, 'Could not ask the server about notifications (' + errText(err) + ').', { bad: true });
  }
  if (op !== notifyOp) return;
  if (!wanted) return notifyUI(false);
  if (Notification.permission !== 'granted') {
    // Blocked or reset in the browser's settings since it was turned on.
    store.del(notifyChoice());
    c.unregisterPush().catch(() => {});
    return notifyUI(false, Notification.permission === 'denied' ? BLOCKED : 'The browser no longer allows notifications here; turn them on again.', { bad: true });
  }
  await notificationsOn(op, c);
}

/** The toggle was flipped. */
async function toggleNotifications() {
  const c = client;
  if (!c) return;
  const op = ++notifyOp;
  if (!$('notify-toggle').checked) return notificationsOff(op, c);
  notifyUI(true, 'Turning on…', { disabled: true });
  let perm = Notification.permission;
  if (perm === 'default') {
    try {
      perm = await Notification.requestPermission();
    } catch {
      perm = 'default';
    }
  }
  if (op !== notifyOp) return;
  if (perm === 'denied') return notifyUI(false, BLOCKED, { bad: true });
  if (perm !== 'granted') return notifyUI(false, 'Notifications were not allowed.', { bad: true });
  await notificationsOn(op, c);
}

/** Registers the service worker, subscribes with the server's key, registers the target. Permission is granted. */
async function notificationsOn(op, c) {
  notifyUI(true, 'Turning on…', { disabled: true });
  try {
    if (!pushKey) pushKey = await webPushKey({ baseUrl: location.origin });
    await navigator.serviceWorker.register('/sw.js', { scope: '/' });
    // Subscribing needs an active worker; one that fails to start would leave "ready" pending.
    let timer;
    const reg = await Promise.race([
      navigator.serviceWorker.ready,
      new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('the service worker did not start')), 15000))),
    ]).finally(() => clearTimeout(timer));
    await c.subscribeWebPush(reg, { publicKey: pushKey });
  } catch (err) {
    if (op !== notifyOp) return;
    if (err?.apiCode === 'not_found') return notifyUI(false, SERVER_OFF, { disabled: true });
    return notifyUI(false, 'Could not turn notifications on (' + errText(err) + ').', { bad: true });
  }
  if (op !== notifyOp) return;
  store.set(notifyChoice(), true);
  notifyUI(true, 'On: new messages show as notifications while Parley is closed.');
}

/** Unregisters the target and ends the subscription. */
async function notificationsOff(op, c) {
  store.del(notifyChoice());
  notifyUI(false, 'Turning off…', { disabled: true });
  try {
    const reg = await navigator.serviceWorker.getRegistration('/');
    if (reg) await c.unsubscribeWebPush(reg);
    else await c.unregisterPush();
  } catch (err) {
    if (op === notifyOp) notifyUI(false, 'Could not turn notifications off (' + errText(err) + ').', { bad: true });
    return;
  }
  if (op === notifyOp) notifyUI(false);
}

// ---- opening a conversation from a notification ----
// A click on a notification focuses an open tab and sends it the conversation
// id (a service worker message), or opens a new tab at /#c=<conversation id>.

/** id when it is a conversation this user can be in, else ''. */
function linkedConv(id) {
  if (typeof id !== 'string' || id.length > 200) return '';
  if (/^g:./.test(id)) return id;
  const m = /^p:([^:]+):([^:]+)$/.exec(id);
  return m && (m[1] === me || m[2] === me) ? id : '';
}

/** The conversation named by the URL's #c=…, taken off the URL. */
function takeLinkedConv() {
  const m = /^#c=(.+)$/.exec(location.hash);
  if (!m) return '';
  history.replaceState(null, '', location.pathname + location.search);
  try {
    return linkedConv(decodeURIComponent(m[1]));
  } catch {
    return '';
  }
}

function openLinked(id) {
  const c = client;
  if (!c || !id) return;
  c.waitReady().then(() => client === c && openConv(id), () => {});
}

// ---- the client's lifecycle ----

function start(auth) {
  me = auth.userId;
  $('auth').hidden = true;
  $('app').hidden = false;
  $('me-name').textContent = me;
  $('me-name').title = me; // the whole name when the bar clips it
  const cursorsKey = 'cursors.' + me;
  const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
  client = new ParleyClient({
    url: `${proto}//${location.host}/ws`,
    token: auth.token,
    deviceId: deviceId(),
    deviceType: 'web',
    resumeFromServer: true,
    cursors: store.get(cursorsKey, {}),
  });
  window.parley = client; // handy in the console
  attachGroups(client);
  attachPeople(client);
  attachSearch();
  let saveTimer = null;
  const onMessage = (raw) => {
    const m = plainOf(raw);
    apply(m, true);
    if (!saveTimer) saveTimer = setTimeout(() => ((saveTimer = null), store.set(cursorsKey, client.cursors())), 500);
    renderList();
    if (m.conversationId === openId) {
      renderChat();
      refreshReadCounts(conv(openId));
    }
    if (!convs.get(m.conversationId)?.info && m.conversationId.startsWith('g:')) refreshList();
  };
  // Messages go through the E2EE layer once its module is loaded (it hands
  // on every entry, decrypting MLS ones); those delivered before are given to it first.
  const early = [];
  const offEarly = client.on('message', (m) => early.push(m));
  const cl = client;
  e2ee = null;
  e2eeSettled = e2eeModule().then((mod) => {
    if (client !== cl) return;
    offEarly();
    if (mod) {
      try {
        let keys;
        try {
          keys = new mod.IndexedDBKeyStore(`parley-e2ee/${me}/${deviceId()}`);
        } catch {
          keys = new mod.MemoryKeyStore(); // no IndexedDB (a private window): keys last as long as the tab
        }
        e2ee = mod.createE2EE(cl, { store: keys, earlier: early });
        e2ee.on('message', onMessage);
        e2ee.on('error', (err) => console.warn('end-to-end encryption:', err));
        window.parleyE2EE = e2ee; // handy in the console
        setE2EE(e2ee);
        return;
      } catch (err) {
        console.warn('end-to-end encryption unavailable:', err);
        e2ee = null;
      }
    }
    cl.on('message', onMessage);
    for (const m of early) onMessage(m);
  });
  client.on('conversations', mergeList);
  client.on('connected', (ok) => {
    maxFrame = ok.maxFrameBytes || 0;
    if (openId) updateCount('main');
  });
  client.on('push', showPush);
  client.on('receipt', (r) => {
    const c = conv(r.conversationId);
    if (r.userId === me) {
      if (r.readSeq && r.readSeq > c.readSeq) {
        c.readSeq = r.readSeq;
        c.unread = 0;
        if (r.readSeq >= c.lastSeq) c.unreadMentions = 0;
        else refreshList(); // the server counts what is left
      }
    } else {
      c.peerDeliveredSeq = Math.max(c.peerDeliveredSeq, r.deliveredSeq || 0, r.readSeq || 0);
      c.peerReadSeq = Math.max(c.peerReadSeq, r.readSeq || 0);
    }
    renderList();
    if (r.conversationId === openId) renderChat();
  });
  client.on('typing', (t) => t.userId !== me && showTyping(t.conversationId, t.userId));
  client.on('reaction', (u) => {
    const c = convs.get(u.conversationId);
    const m = c?.msgs.get(u.seq);
    if (m && applyReaction(m, u) && u.conversationId === openId) renderChat();
  });
  client.on('streamChunk', applyChunk);
  client.on('presence', (p) => {
    presence.set(p.userId, !!p.online);
    renderList();
    renderHeader();
  });
  client.on('hidden', (h) => {
    const c = conv(h.conversationId);
    for (const s of h.seqs || []) c.msgs.delete(s);
    if (h.clearedSeq) for (const s of [...c.msgs.keys()]) if (s <= h.clearedSeq) c.msgs.delete(s);
    renderChat();
  });
  client.on('state', (s) => {
    $('me-dot').className = 'dot' + (s === 'ready' ? ' online' : '');
    if (s === 'ready') {
      everReady = true;
      setBanner('');
      // Reloaded history may have changed while away (edits, recalls): refresh the open one.
      if (openId) refreshOpen();
    } else if (s === 'connecting' || s === 'syncing') {
      setBanner(everReady ? 'Reconnecting…' : 'Connecting…', { label: 'Retry now', run: () => client.reconnectNow() });
    }
  });
  client.on('closed', (err) => {
    if (err?.code === 'DISCONNECT_CODE_KICKED') {
      setBanner('Signed in on another device.', { label: 'Use here', run: () => restart(auth) });
    } else if (err?.code === 'DISCONNECT_CODE_TOKEN_REVOKED' || err?.code === 'DISCONNECT_CODE_AUTH_FAILED' || isCode(err, 'ERROR_CODE_UNAUTHENTICATED')) {
      signOut(false);
    }
  });
  // Keep the cursors when the page goes away, so the next visit resumes from them.
  window.addEventListener('pagehide', () => client && store.set(cursorsKey, client.cursors()));
  setBanner('Connecting…');
  scheduleReadCounts();
  initNotifications();
  const linked = takeLinkedConv();
  if (linked) openLinked(linked);
  else {
    const last = store.get('open.' + me, '');
    if (last) client.waitReady().then(() => !openId && openConv(last), () => {});
  }
}

function restart(auth) {
  for (const c of convs.values()) for (const d of c.drafts) dropDraft(c, d);
  urlCache.clear();
  client?.close();
  convs.clear();
  openId = '';
  replying = null;
  threadOpen = null;
  everReady = false;
  start(auth);
  renderList();
  renderChat();
}

let listTimer = null;
function refreshList() {
  clearTimeout(listTimer);
  listTimer = setTimeout(() => client?.conversations().then(mergeList, () => {}), 200);
}

async function refreshOpen() {
  const c = conv(openId);
  try {
    const page = await client.history(c.id, 0, Math.max(PAGE, Math.min(c.msgs.size, 200)));
    for (const m of page.messages || []) {
      const old = c.msgs.get(m.seq);
      if (old && old.kind === m.kind) {
        // What the server fills in is replaced, absent or not (reactions by their version).
        const keepReactions = (old.reactionVersion || 0) > (m.reactionVersion || 0);
        const { reactions, reactionVersion } = old;
        for (const k of ['replyPreview', 'thread', 'reactions', 'reactionVersion']) delete old[k];
        Object.assign(old, m);
        if (keepReactions) Object.assign(old, { reactions, reactionVersion });
      } else c.msgs.set(m.seq, m);
    }
    if (threadOpen?.conversationId === c.id) {
      const t = await client.threadHistory(c.id, threadOpen.root, 0, 50);
      for (const m of t.messages || []) apply(m, false);
    }
    if (openId === c.id) renderChat();
  } catch {}
}

function signOut(callServer = true) {
  const auth = session.get();
  if (callServer && auth) logout({}, auth.token).catch(() => {});
  client?.close();
  client = null;
  e2ee?.close();
  e2ee = null;
  setE2EE(null);
  session.del();
  for (const c of convs.values()) for (const d of c.drafts) dropDraft(c, d);
  urlCache.clear();
  $('viewer').close();
  store.del('open.' + me);
  convs.clear();
  openId = '';
  replying = null;
  threadOpen = null;
  me = '';
  everReady = false;
  notifyOp++;
  notifyUI(false, '', { disabled: true });
  setBanner('');
  $('app').hidden = true;
  $('auth').hidden = false;
  $('auth-pass').value = '';
}

// ---- keyboard shortcuts (listed in the help dialog, index.html) ----

const typingIn = (t) => t instanceof HTMLElement && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));

function onShortcut(ev) {
  if ($('app').hidden) return;
  const dialogOpen = !!document.querySelector('dialog[open]'); // a modal dialog handles its own keys (Esc closes it)
  const mod = ev.ctrlKey || ev.metaKey;
  if (mod && !ev.altKey && ev.key.toLowerCase() === 'k') {
    if (dialogOpen) return;
    ev.preventDefault();
    document.querySelector('.app').classList.remove('show-chat'); // phones: the list shows
    $('conv-filter').focus();
    $('conv-filter').select();
    return;
  }
  // Search messages: Ctrl/⌘+Shift+F, or / outside a text field.
  if ((mod && ev.shiftKey && !ev.altKey && ev.key.toLowerCase() === 'f') || (ev.key === '/' && !mod && !ev.altKey && !typingIn(ev.target))) {
    if (dialogOpen) return;
    ev.preventDefault();
    openSearch();
    return;
  }
  if (ev.altKey && !mod && (ev.key === 'ArrowUp' || ev.key === 'ArrowDown')) {
    if (dialogOpen) return;
    ev.preventDefault();
    stepConv(ev.key === 'ArrowUp' ? -1 : 1);
    return;
  }
  if (ev.key === '?' && !mod && !ev.altKey && !typingIn(ev.target) && !dialogOpen) {
    ev.preventDefault();
    $('help-dialog').showModal();
    return;
  }
  if (ev.key === 'ArrowUp' && !mod && !ev.altKey && !ev.shiftKey && ev.target === $('composer-input') && !ev.target.value && !mentionState && openId && !editing) {
    const c = conv(openId);
    const last = [...c.msgs.values()]
      .filter((m) => m.from === me && (m.kind || 'MESSAGE_KIND_NORMAL') === 'MESSAGE_KIND_NORMAL' && !m.recalled && !m.threadRoot && (!m.contentType || m.contentType === 'text' || m.contentType.startsWith('text/')) && bodyText(m))
      .sort((a, b) => b.seq - a.seq)[0];
    if (last && !c.left) {
      ev.preventDefault();
      startEdit(c, last);
    }
    return;
  }
  if (ev.key === 'Escape' && !dialogOpen && !ev.defaultPrevented) {
    if (escapeOne()) ev.preventDefault();
  }
}

/** Esc: closes the innermost thing open (message actions, an edit, a reply, the pins, a thread, a notice). */
function escapeOne() {
  if (mentionState) return hideMentions(), true;
  const open = document.querySelector('.msg.open');
  if (open) return closeActions(open), true;
  if (editing) return $('edit-cancel').click(), true;
  if (replying) {
    replying = null;
    renderReplyBar();
    return true;
  }
  if (pinsExpanded) {
    pinsExpanded = false;
    if (openId) renderPins(conv(openId));
    return true;
  }
  if (threadOpen) {
    closeThread();
    $('composer-input').focus({ preventScroll: true });
    return true;
  }
  const notice = $('notices').lastElementChild;
  if (notice) return dismissNotice(notice), true;
  return false;
}

/** Opens the conversation before (-1) or after (1) the open one in the list. */
function stepConv(dir) {
  const ids = [...$('conv-list').querySelectorAll('li.conv')].map((li) => li.dataset.conv);
  if (!ids.length) return;
  const i = ids.indexOf(openId);
  const next = i < 0 ? ids[dir > 0 ? 0 : ids.length - 1] : ids[i + dir];
  if (next) openConv(next);
}

/** Opens the 1:1 conversation with user u (new or not). */
function chatWith(u) {
  const id = directConversationId(me, u);
  const c = conv(id);
  c.peer = u;
  c.activity = Date.now();
  ensurePresence(u);
  openConv(id);
}

// What the members panel (groups.js) and People (people.js) use of the app.
const hooks = {
  get client() {
    return client;
  },
  get me() {
    return me;
  },
  get openId() {
    return openId;
  },
  conv,
  rerender,
  chatWith,
  errText,
  title,
  fmtTime,
  openAt,
};

// ---- wiring the DOM ----

const USER_ID = /^[A-Za-z0-9_.@-]{1,64}$/;
// Starts and ends with a letter or digit, no two of _ . @ - in a row.
const NEW_USERNAME = /^(?=.{1,64}$)[A-Za-z0-9]+(?:[_.@-][A-Za-z0-9]+)*$/;
const USERNAME_RULE =
  'A username is 1 to 64 characters: letters (A–Z, a–z), digits (0–9) and the signs _ . @ -; it starts and ends with a letter or digit, with no two signs in a row.';

function wire() {
  $('auth-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const mode = ev.submitter?.value || 'login';
    const u = $('auth-user').value.trim();
    const p = $('auth-pass').value;
    $('auth-error').textContent = '';
    // The server's rules (internal/auth: ValidUserID to sign in, ValidNewUsername to register), said up front.
    if (!(mode === 'register' ? NEW_USERNAME : USER_ID).test(u)) {
      $('auth-error').textContent = mode === 'register' ? USERNAME_RULE : 'Usernames use only letters, digits and _ . @ - (at most 64 characters).';
      $('auth-user').focus();
      return;
    }
    if (mode === 'register' && p.length < 8) {
      $('auth-error').textContent = 'Passwords need at least 8 characters.';
      $('auth-pass').focus();
      return;
    }
    try {
      const r = mode === 'register' ? await register({}, u, p) : await login({}, u, p);
      const auth = { userId: r.user_id, token: r.token };
      session.set(auth);
      start(auth);
      renderList();
      renderChat();
    } catch (err) {
      // The SDK's code is the protocol's; apiCode is the HTTP API's own word.
      const code = err?.apiCode || err?.code || '';
      $('auth-error').textContent =
        code === 'invalid_credentials' ? 'Wrong username or password.' :
        code === 'conflict' ? 'That username is taken.' :
        code === 'registration_disabled' ? 'This server does not take new accounts.' :
        code === 'bad_request' ? USERNAME_RULE + ' Passwords need at least 8 characters.' :
        'Could not sign in: ' + (err?.message || code);
    }
  });

  $('composer').addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (!openId) return;
    const input = $('composer-input');
    const v = input.value.trim();
    const c = conv(openId);
    if (editing) {
      if (!v || !fitsLimit('main')) return;
      input.value = '';
      updateCount('main');
      return send(v);
    }
    if (c.drafts.some((d) => d.status === 'uploading')) return; // Send waits for the uploads
    const ready = c.drafts.filter((d) => d.status === 'done');
    if (!v && !ready.length) return;
    if (!fitsLimit('main')) return;
    input.value = '';
    updateCount('main');
    hideMentions();
    // Files that failed stay in the tray, with their error, until removed.
    for (const d of ready) dropDraft(c, d);
    const extra = v ? mentionsIn(c, v) : {};
    if (!extra.mentions?.length) delete extra.mentions;
    if (!extra.mentionAll) delete extra.mentionAll;
    if (replying?.conversationId === c.id) extra.replyTo = replying.seq;
    replying = null;
    renderReplyBar();
    send(v, ready.map((d) => d.att), extra);
  });
  $('composer-input').addEventListener('keydown', (ev) => {
    if (!mentionState) return;
    const n = mentionState.items.length;
    if (ev.key === 'ArrowDown' || ev.key === 'ArrowUp') {
      ev.preventDefault();
      mentionState.index = (mentionState.index + (ev.key === 'ArrowDown' ? 1 : n - 1)) % n;
      renderMentions();
    } else if (ev.key === 'Enter' || ev.key === 'Tab') {
      ev.preventDefault();
      pickMention(mentionState.index);
    } else if (ev.key === 'Escape') {
      ev.preventDefault();
      hideMentions();
    }
  });
  $('composer-input').addEventListener('input', updateMentions);
  $('composer-input').addEventListener('input', () => updateCount('main'));
  $('thread-input').addEventListener('input', () => updateCount('thread'));
  $('composer-input').addEventListener('blur', () => setTimeout(hideMentions, 150));
  $('reply-cancel').onclick = () => {
    replying = null;
    renderReplyBar();
  };
  $('thread-close').onclick = closeThread;
  $('thread-composer').addEventListener('submit', (ev) => {
    ev.preventDefault();
    if (!openId || !threadOpen || threadOpen.conversationId !== openId) return;
    const input = $('thread-input');
    const v = input.value.trim();
    if (!v || !fitsLimit('thread')) return;
    input.value = '';
    updateCount('thread');
    const c = conv(openId);
    const extra = { threadRoot: threadOpen.root, ...mentionsIn(c, v) };
    if (!extra.mentions.length) delete extra.mentions;
    if (!extra.mentionAll) delete extra.mentionAll;
    send(v, [], extra);
    const box = $('thread-messages');
    box.scrollTop = box.scrollHeight;
  });
  $('pinned-toggle').onclick = () => {
    pinsExpanded = !pinsExpanded;
    if (openId) renderPins(conv(openId));
  };
  document.addEventListener('keydown', onShortcut);
  $('help-btn').onclick = () => $('help-dialog').showModal();
  $('conv-filter').addEventListener('input', renderList);
  $('conv-filter').addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter') {
      // Enter opens the first conversation found.
      const first = $('conv-list').querySelector('li.conv');
      if (first) {
        ev.preventDefault();
        openConv(first.dataset.conv);
      }
    } else if (ev.key === 'Escape' && $('conv-filter').value) {
      ev.preventDefault();
      ev.stopPropagation();
      $('conv-filter').value = '';
      renderList();
    }
  });
  $('jump-latest').onclick = () => {
    const box = $('messages');
    box.scrollTo({ top: box.scrollHeight, behavior: 'smooth' });
    if (openId) conv(openId).newBelow = 0;
    $('composer-input').focus({ preventScroll: true });
  };
  wireFiles();
  let lastTyping = 0;
  $('composer-input').addEventListener('input', () => {
    if (!openId || !client || editing) return;
    const now = Date.now();
    if (now - lastTyping > 2000) {
      lastTyping = now;
      client.typing(openId);
    }
  });
  $('edit-cancel').onclick = () => {
    editing = null;
    hideMentions();
    $('edit-bar').hidden = true;
    $('composer-input').value = '';
  };
  $('messages').addEventListener('scroll', () => {
    const box = $('messages');
    renderJump();
    if (openId && box.scrollTop < 80) {
      const c = conv(openId);
      if (c.loaded && c.hasOlder && !c.loadingOlder) loadOlder(c);
    }
  });
  $('back-btn').onclick = () => {
    document.querySelector('.app').classList.remove('show-chat');
    openId = '';
    store.del('open.' + me);
    renderList();
    renderChat();
  };
  $('logout-btn').onclick = () => signOut(true);

  $('new-chat-btn').onclick = () => {
    $('new-chat-user').value = '';
    $('new-chat-e2ee').checked = false;
    $('new-chat-error').textContent = '';
    $('new-chat-dialog').showModal();
  };
  $('new-chat-form').addEventListener('submit', (ev) => {
    if (ev.submitter?.value !== 'ok') return;
    const u = $('new-chat-user').value.trim();
    if (!u || u === me) {
      ev.preventDefault();
      $('new-chat-error').textContent = 'Enter another user’s name.';
      return;
    }
    if ($('new-chat-e2ee').checked) {
      // An encrypted 1:1 is an encrypted group of the two (docs/e2ee.md).
      ev.preventDefault();
      if (!e2ee) {
        $('new-chat-error').textContent = 'End-to-end encryption is not available in this browser.';
        return;
      }
      $('new-chat-error').textContent = 'Setting up encryption…';
      e2ee.createDirect(u, `${me} & ${u}`).then(
        (g) => {
          const c = conv(g.conversationId);
          c.info = g;
          c.activity = Date.now();
          $('new-chat-dialog').close();
          openConv(g.conversationId);
        },
        (err) => ($('new-chat-error').textContent = e2eeErrText(err)),
      );
      return;
    }
    chatWith(u);
  });

  let groupMode = 'create';
  const openGroupDialog = (mode) => {
    groupMode = mode;
    $('group-dialog-title').textContent = mode === 'create' ? 'New group' : 'Add members';
    $('group-ok').textContent = mode === 'create' ? 'Create' : 'Add';
    $('group-name-label').hidden = mode !== 'create';
    $('group-e2ee-label').hidden = mode !== 'create';
    $('group-e2ee').checked = false;
    $('group-name').value = '';
    $('group-members').value = '';
    $('group-error').textContent = '';
    $('group-dialog').showModal();
  };
  $('new-group-btn').onclick = () => openGroupDialog('create');
  $('add-members-btn').onclick = () => openGroupDialog('add');
  $('group-form').addEventListener('submit', async (ev) => {
    if (ev.submitter?.value !== 'ok') return;
    ev.preventDefault();
    const users = $('group-members').value.split(/[\s,]+/).map((s) => s.trim()).filter((s) => s && s !== me);
    try {
      if (groupMode === 'create') {
        const name = $('group-name').value.trim() || 'Group';
        if ($('group-e2ee').checked && !e2ee) throw new Error('End-to-end encryption is not available in this browser.');
        const g = $('group-e2ee').checked ? await e2ee.createGroup({ name, userIds: users }) : await client.createGroup({ name, userIds: users });
        const c = conv(g.conversationId);
        c.info = g;
        c.activity = Date.now();
        $('group-dialog').close();
        openConv(g.conversationId);
      } else {
        if (!users.length) throw new Error('Enter at least one username.');
        if (isEncrypted(conv(openId))) await e2ee.addMembers(openId, users);
        else await client.addMembers(openId, users);
        $('group-dialog').close();
      }
    } catch (err) {
      $('group-error').textContent = err?.code === 'ERROR_CODE_PERMISSION_DENIED' ? 'Not allowed.' : e2eeErrText(err);
    }
  });

  $('report-form').addEventListener('submit', (ev) => {
    if (ev.submitter?.value !== 'ok') return;
    ev.preventDefault(); // the dialog stays open until the server has the report
    submitReport();
  });
  $('report-dialog').addEventListener('close', () => (reporting = null));

  $('notify-toggle').addEventListener('change', toggleNotifications);
  // From the service worker: a notification of this conversation was clicked.
  navigator.serviceWorker?.addEventListener('message', (ev) => {
    if (ev.data?.type === 'parley.open') openLinked(linkedConv(ev.data.conversationId));
  });
  window.addEventListener('hashchange', () => client && openLinked(takeLinkedConv()));

  document.addEventListener('visibilitychange', () => {
    if (openId && document.visibilityState === 'visible') scheduleRead(conv(openId));
  });
  window.addEventListener('online', () => client?.reconnectNow());
}

wire();
initGroups(hooks);
initPeople(hooks);
initSearch(hooks);
const saved = session.get();
if (saved?.token) start(saved);
else $('auth').hidden = false;
renderList();
renderChat();

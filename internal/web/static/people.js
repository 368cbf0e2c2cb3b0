// Parley web client: People, a dialog with the user's contacts (friends, with
// presence and when they were last seen), friend requests both ways, and the
// users they blocked. Live from the server's contactEvent and presenceEvent
// frames; a block change pushes nothing (docs/protocol.md, section 6), so the
// list is read again after each action and on each reconnect.
import { isCode } from './parley-sdk.js';

const FRIEND = 'CONTACT_STATE_FRIEND';
const SENT = 'CONTACT_STATE_REQUEST_SENT';
const RECEIVED = 'CONTACT_STATE_REQUEST_RECEIVED';

let H = null; // what app.js gives (see initPeople)
let dlg = null;
let contacts = new Map(); // userId -> Contact
let blocked = [];
const presence = new Map(); // userId -> {online, lastSeen}
let loadOp = 0;
let ticker = null; // redraws "last seen" while the dialog is open

const el = (tag, cls, txt) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (txt !== undefined) e.textContent = txt;
  return e;
};
const button = (label, cls, onclick, aria, action) => {
  const b = el('button', cls, label);
  b.type = 'button';
  if (aria) b.setAttribute('aria-label', aria);
  if (action) b.dataset.action = action;
  b.onclick = onclick;
  return b;
};

/** "last seen …" from a unix ms time; '' when unknown. */
export function lastSeenText(ms, now = Date.now()) {
  if (!ms) return '';
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return 'last seen just now';
  if (s < 3600) return `last seen ${Math.floor(s / 60)} min ago`;
  if (s < 86400) return `last seen ${Math.floor(s / 3600)} h ago`;
  const d = new Date(ms);
  return 'last seen ' + d.toLocaleDateString([], { month: 'short', day: 'numeric', year: d.getFullYear() === new Date(now).getFullYear() ? undefined : 'numeric' });
}

function refusal(err) {
  if (isCode(err, 'ERROR_CODE_BAD_REQUEST')) return 'Not possible: check the username (and that it is not yours).';
  if (isCode(err, 'ERROR_CODE_TOO_LARGE')) return 'The note is too long (at most 256 bytes).';
  if (isCode(err, 'ERROR_CODE_CONFLICT')) return 'That request is no longer pending.';
  if (isCode(err, 'ERROR_CODE_TOO_MANY_REQUESTS')) return 'Too many requests; try again in a moment.';
  return 'Could not do that: ' + H.errText(err);
}

function say(textValue, bad = false) {
  if (!dlg) return;
  const s = dlg.querySelector('.pp-status');
  s.textContent = textValue;
  s.classList.toggle('bad', bad);
}

/** Reads the contacts and the block list; subscribes to the friends' presence. */
async function load() {
  const client = H.client;
  if (!client) return;
  const op = ++loadOp;
  try {
    const list = await client.listContacts();
    if (op !== loadOp || client !== H.client) return;
    contacts = new Map((list.contacts || []).map((c) => [c.userId, c]));
    blocked = [...(list.blocked || [])].sort();
  } catch {
    return;
  }
  render();
  watchPresence(client, [...contacts.values()].filter((c) => c.state === FRIEND).map((c) => c.userId));
}

function watchPresence(client, users) {
  if (!users.length) return;
  client.subscribePresence(users).then((ps) => {
    for (const p of ps) presence.set(p.userId, { online: !!p.online, lastSeen: p.lastSeen || 0 });
    render();
  }, () => {});
}

/** Runs a contact request; a refusal is said; the list is read again either way. */
async function act(btn, run, done) {
  if (btn) btn.disabled = true;
  say('');
  try {
    await run(H.client);
    if (done) say(done);
  } catch (err) {
    say(refusal(err), true);
  } finally {
    if (btn) btn.disabled = false;
    await load();
  }
}

/** Listens to this client's contact and presence events (call with each new client). */
export function attachPeople(client) {
  contacts = new Map();
  blocked = [];
  presence.clear();
  if (dlg?.open) dlg.close();
  render();
  client.on('contact', (c) => {
    if (client !== H.client) return;
    const was = contacts.get(c.userId)?.state;
    if (!c.state || c.state === 'CONTACT_STATE_UNSPECIFIED') contacts.delete(c.userId);
    else contacts.set(c.userId, c);
    if (c.state === FRIEND && was !== FRIEND) watchPresence(client, [c.userId]);
    render();
  });
  client.on('presence', (p) => {
    // Presence of other users (conversation peers) arrives too; all are kept.
    const old = presence.get(p.userId);
    presence.set(p.userId, { online: !!p.online, lastSeen: p.lastSeen || (p.online ? old?.lastSeen || 0 : 0) });
    if (contacts.get(p.userId)?.state === FRIEND) render();
  });
  // Events missed while away, and block changes made on other devices.
  client.on('state', (s) => s === 'ready' && client === H.client && load());
}

function build() {
  dlg = el('dialog', 'pp');
  dlg.id = 'people-dialog';
  dlg.setAttribute('aria-labelledby', 'pp-title');
  // Fixed markup only: user data goes in with textContent (render below).
  dlg.innerHTML = `
    <header class="gp-head">
      <h2 id="pp-title">People</h2>
      <button type="button" class="pp-close secondary" aria-label="Close" title="Close (Esc)">×</button>
    </header>
    <form class="pp-request">
      <label>Username <input name="user" autocomplete="off" required maxlength="64"></label>
      <label>Note (optional) <input name="note" autocomplete="off" maxlength="256"></label>
      <div class="row">
        <button type="submit" value="request">Send friend request</button>
        <button type="submit" value="block" class="secondary">Block</button>
      </div>
    </form>
    <p class="pp-status" role="status"></p>
    <section aria-labelledby="pp-in-h"><h3 id="pp-in-h">Requests</h3><ul class="pp-list pp-incoming"></ul></section>
    <section aria-labelledby="pp-out-h"><h3 id="pp-out-h">Sent requests</h3><ul class="pp-list pp-outgoing"></ul></section>
    <section aria-labelledby="pp-fr-h"><h3 id="pp-fr-h">Contacts</h3><ul class="pp-list pp-friends"></ul></section>
    <section aria-labelledby="pp-bl-h"><h3 id="pp-bl-h">Blocked</h3><ul class="pp-list pp-blocked"></ul></section>`;
  document.body.append(dlg);
  dlg.querySelector('.pp-close').onclick = () => dlg.close();
  dlg.addEventListener('close', () => {
    clearInterval(ticker);
    ticker = null;
  });
  const form = dlg.querySelector('.pp-request');
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const user = form.user.value.trim();
    const note = form.note.value.trim();
    if (!user || user === H.me) return say('Enter another user’s name.', true);
    if (ev.submitter?.value === 'block') {
      act(ev.submitter, (cl) => cl.block(user), `You blocked ${user}.`).then(() => (form.user.value = ''));
      return;
    }
    act(ev.submitter, async (cl) => {
      await cl.friendRequest(user, note || undefined);
      form.user.value = '';
      form.note.value = '';
    }, contacts.get(user)?.state === RECEIVED ? `You and ${user} are now friends.` : `Friend request sent to ${user}.`);
  });
}

/** Opens the People dialog. */
export function openPeople() {
  if (!dlg) build();
  say('');
  render();
  if (!dlg.open) dlg.showModal();
  dlg.querySelector('.pp-request input').focus();
  clearInterval(ticker);
  ticker = setInterval(render, 30_000);
  load();
}

function row(userId, cls) {
  const li = el('li', 'pp-item ' + cls);
  li.dataset.user = userId;
  return li;
}

function render() {
  // The sidebar's button counts requests waiting for an answer.
  const incoming = [...contacts.values()].filter((c) => c.state === RECEIVED).sort((a, b) => (b.updatedAt || 0) - (a.updatedAt || 0));
  const btn = document.getElementById('people-btn');
  if (btn) {
    const badge = btn.querySelector('.pp-badge');
    badge.textContent = incoming.length ? String(incoming.length) : '';
    badge.hidden = !incoming.length;
    btn.setAttribute('aria-label', incoming.length ? `People: ${incoming.length} friend request${incoming.length === 1 ? '' : 's'}` : 'People');
  }
  if (!dlg?.open) return;
  const q = (s) => dlg.querySelector(s);
  const focusKey = dlg.contains(document.activeElement) ? document.activeElement.dataset.key : '';
  const byName = (a, b) => a.userId.localeCompare(b.userId);
  const key = (b, k, u) => ((b.dataset.key = k + '|' + u), b);

  q('.pp-incoming').replaceChildren(
    ...incoming.map((c) => {
      const li = row(c.userId, 'incoming');
      const who = el('span', 'pp-who');
      who.append(el('b', 'pp-name', c.userId));
      if (c.note) who.append(el('span', 'pp-note', c.note));
      li.append(who);
      const acts = el('span', 'pp-actions');
      acts.append(
        key(button('Accept', '', (ev) => act(ev.currentTarget, (cl) => cl.respondFriend(c.userId, true), `You and ${c.userId} are now friends.`), `Accept ${c.userId}`, 'accept'), 'accept', c.userId),
        key(button('Decline', 'secondary', (ev) => act(ev.currentTarget, (cl) => cl.respondFriend(c.userId, false), `Declined ${c.userId}.`), `Decline ${c.userId}`, 'decline'), 'decline', c.userId),
        key(button('Block', 'secondary', (ev) => act(ev.currentTarget, async (cl) => {
          await cl.removeFriend(c.userId); // the request goes too
          await cl.block(c.userId);
        }, `You blocked ${c.userId}.`), `Block ${c.userId}`, 'block'), 'block', c.userId),
      );
      li.append(acts);
      return li;
    }),
  );
  q('.pp-incoming').parentElement.hidden = !incoming.length;

  const outgoing = [...contacts.values()].filter((c) => c.state === SENT).sort(byName);
  q('.pp-outgoing').replaceChildren(
    ...outgoing.map((c) => {
      const li = row(c.userId, 'outgoing');
      const who = el('span', 'pp-who');
      who.append(el('b', 'pp-name', c.userId));
      who.append(el('span', 'pp-note', c.note ? `waiting for an answer · “${c.note}”` : 'waiting for an answer'));
      li.append(who);
      const acts = el('span', 'pp-actions');
      acts.append(key(button('Cancel', 'secondary', (ev) => act(ev.currentTarget, (cl) => cl.removeFriend(c.userId), `Request to ${c.userId} withdrawn.`), `Cancel the request to ${c.userId}`, 'cancel'), 'cancel', c.userId));
      li.append(acts);
      return li;
    }),
  );
  q('.pp-outgoing').parentElement.hidden = !outgoing.length;

  const friends = [...contacts.values()].filter((c) => c.state === FRIEND);
  // Online first, then by name.
  friends.sort((a, b) => Number(!!presence.get(b.userId)?.online) - Number(!!presence.get(a.userId)?.online) || byName(a, b));
  q('.pp-friends').replaceChildren(
    ...friends.map((c) => {
      const li = row(c.userId, 'friend');
      const p = presence.get(c.userId);
      const who = el('span', 'pp-who');
      const dot = el('span', 'dot' + (p?.online ? ' online' : ''));
      dot.dataset.presence = p?.online ? 'online' : 'offline';
      dot.setAttribute('aria-hidden', 'true');
      const name = el('b', 'pp-name');
      name.append(dot, document.createTextNode(c.userId));
      who.append(name, el('span', 'pp-seen', p?.online ? 'online' : p ? lastSeenText(p.lastSeen) || 'offline' : ''));
      li.append(who);
      const acts = el('span', 'pp-actions');
      acts.append(
        key(button('Chat', '', () => {
          dlg.close();
          H.chatWith(c.userId);
        }, `Chat with ${c.userId}`, 'chat'), 'chat', c.userId),
        key(button('Remove', 'secondary', (ev) => {
          if (!confirm(`Remove ${c.userId} from your contacts?`)) return;
          act(ev.currentTarget, (cl) => cl.removeFriend(c.userId), `${c.userId} is no longer a contact.`);
        }, `Remove ${c.userId}`, 'remove'), 'remove', c.userId),
        key(button('Block', 'secondary', (ev) => {
          if (!confirm(`Block ${c.userId}? They will not be able to write to you.`)) return;
          act(ev.currentTarget, (cl) => cl.block(c.userId), `You blocked ${c.userId}.`);
        }, `Block ${c.userId}`, 'block'), 'block', c.userId),
      );
      li.append(acts);
      return li;
    }),
  );
  if (!friends.length) q('.pp-friends').append(el('li', 'pp-empty', 'No contacts yet: send a friend request above.'));

  q('.pp-blocked').replaceChildren(
    ...blocked.map((u) => {
      const li = row(u, 'blocked');
      li.append(el('b', 'pp-name', u));
      const acts = el('span', 'pp-actions');
      acts.append(key(button('Unblock', 'secondary', (ev) => act(ev.currentTarget, (cl) => cl.unblock(u), `You unblocked ${u}.`), `Unblock ${u}`, 'unblock'), 'unblock', u));
      li.append(acts);
      return li;
    }),
  );
  q('.pp-blocked').parentElement.hidden = !blocked.length;
  // Redrawn rows are new nodes: keep the focus on the same control, else (its row went) in the form.
  if (focusKey) (dlg.querySelector(`[data-key="${CSS.escape(focusKey)}"]`) || dlg.querySelector('.pp-request input')).focus();
}

/** hooks: { client, me (getters), chatWith(userId), errText(err) }. */
export function initPeople(hooks) {
  H = hooks;
  const btn = document.getElementById('people-btn');
  if (btn) btn.onclick = openPeople;
}

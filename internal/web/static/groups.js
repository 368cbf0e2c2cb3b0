// Parley web client: a group's members panel (a modal dialog). Members and
// their roles, and the actions the user's role allows, as the server rules
// them (docs/protocol.md, "Groups"): what a role may not do is not shown.
// Kept in sync with the group's events, which arrive as messages.
import { isCode } from './parley-sdk.js';

const OWNER = 'GROUP_ROLE_OWNER';
const ADMIN = 'GROUP_ROLE_ADMIN';
const MEMBER = 'GROUP_ROLE_MEMBER';
const EVERYONE = 'GROUP_ADD_POLICY_EVERYONE';
const ADMINS = 'GROUP_ADD_POLICY_ADMINS';
const RANK = { [OWNER]: 3, [ADMIN]: 2, [MEMBER]: 1 };
const ROLE_NAME = { [OWNER]: 'owner', [ADMIN]: 'admin', [MEMBER]: 'member' };
const MUTES = [
  [600, '10 minutes'],
  [3600, '1 hour'],
  [8 * 3600, '8 hours'],
  [86400, '1 day'],
  [7 * 86400, '7 days'],
];
// Entries of a group's sequence that change who is in it, their roles or its settings.
const GROUP_EVENTS = new Set([
  'MESSAGE_KIND_GROUP_CREATED',
  'MESSAGE_KIND_MEMBERS_ADDED',
  'MESSAGE_KIND_MEMBERS_REMOVED',
  'MESSAGE_KIND_ROLE_CHANGED',
  'MESSAGE_KIND_MEMBER_MUTED',
  'MESSAGE_KIND_GROUP_UPDATED',
  'MESSAGE_KIND_OWNER_CHANGED',
  'MESSAGE_KIND_GROUP_DISSOLVED',
]);

/** What app.js gives: getters for its state and the functions the panel calls. */
let H = null;
let dlg = null; // the dialog, built once
let shownId = ''; // the conversation whose members the dialog shows
let lastSig = ''; // what the member list was last drawn from: unchanged data is not redrawn
const expanded = new Set(); // user ids whose actions are open
const refreshOp = new Map(); // conversation id -> number of the latest refresh

const el = (tag, cls, txt) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (txt !== undefined) e.textContent = txt;
  return e;
};
const button = (label, cls, onclick, aria) => {
  const b = el('button', cls, label);
  b.type = 'button';
  if (aria) b.setAttribute('aria-label', aria);
  b.onclick = onclick;
  return b;
};

// ---- who may do what (the server's rules, internal/chat/groups.go) ----

export function roleOf(c, user) {
  if (!c?.group) return '';
  if (c.info?.owner === user) return OWNER;
  return c.members?.find((m) => m.userId === user)?.role || '';
}

const usable = (c) => c?.group && !c.left && !c.info?.dissolved;
const isAdminRole = (r) => r === OWNER || r === ADMIN;
/** The owner acts on anyone else, an admin on plain members. */
const outranks = (a, b) => (a === OWNER && b !== OWNER) || (a === ADMIN && b === MEMBER);

/** Owner and admins add; plain members only when the group lets everyone add and mute-all is off. */
export function canAddMembers(c) {
  if (!usable(c)) return false;
  const r = roleOf(c, H.me);
  if (isAdminRole(r)) return true;
  return r === MEMBER && c.info?.addPolicy === EVERYONE && !c.info?.muteAll;
}

// ---- the header's buttons (called by app.js's renderHeader) ----

/** Shows the Members button for a group, and Add only to those who may add; redraws an open panel. */
export function groupBar(c) {
  if (!H) return;
  const members = document.getElementById('members-btn');
  const add = document.getElementById('add-members-btn');
  if (members) members.hidden = !c?.group;
  if (add) add.hidden = !canAddMembers(c);
  // The header says "you left" for any way out: say removed when someone else did it, and dissolved.
  const sub = document.getElementById('chat-sub');
  if (sub && c?.group && c.left && outReason(c) !== 'You left this group.') sub.textContent = 'you were removed';
  else if (sub && c?.group && !c.left && c.info?.dissolved) sub.textContent = 'dissolved';
  if (dlg?.open && c?.id === shownId) renderPanel();
}

// ---- refusals, in words ----

/** A refusal of a group action as a sentence; conflict: what CONFLICT means for this action. */
function refusal(err, conflict) {
  if (isCode(err, 'ERROR_CODE_PERMISSION_DENIED')) return 'Not allowed: your role in this group does not permit that (it may just have changed).';
  if (isCode(err, 'ERROR_CODE_CONFLICT')) return conflict || 'Not possible now: the group was dissolved.';
  if (isCode(err, 'ERROR_CODE_BAD_REQUEST')) return 'Not possible: that user is not a member (any more), or the value is not valid.';
  if (isCode(err, 'ERROR_CODE_GROUP_FULL')) return 'The group is full.';
  if (isCode(err, 'ERROR_CODE_TOO_LARGE')) return 'Too long.';
  if (isCode(err, 'ERROR_CODE_TOO_MANY_REQUESTS')) return 'Too many requests; try again in a moment.';
  return 'Could not do that: ' + H.errText(err);
}

function say(textValue, bad = false) {
  const s = dlg.querySelector('.gp-status');
  s.textContent = textValue;
  s.classList.toggle('bad', bad);
}

/** Runs a group request from the panel: its button is disabled meanwhile, a refusal is said,
 *  and the group is read again either way (roles may have changed under the user). */
async function act(btn, run, done, conflict) {
  const c = H.conv(shownId);
  if (btn) btn.disabled = true;
  say('');
  try {
    await run(H.client, c);
    if (done) say(done);
  } catch (err) {
    say(refusal(err, conflict), true);
  } finally {
    if (btn) btn.disabled = false;
    refresh(c);
  }
}

// ---- keeping the group's state current ----

/** Reads the group's settings again, and its members when it is on screen (a big group's
 *  member list is many pages: others are read when opened); the latest call wins. */
async function refresh(c) {
  const client = H.client;
  if (!client || !c?.group) return;
  const op = (refreshOp.get(c.id) || 0) + 1;
  refreshOp.set(c.id, op);
  const shown = c.id === H.openId || c.id === shownId;
  if (!shown) c.members = null; // app.js loads them when the group is opened
  let info = null;
  let members = null;
  try {
    info = await client.getGroup(c.id);
  } catch {}
  if (shown) {
    // A former member may not list them (denied): none to show.
    members = c.left ? [] : await client.allMembers(c.id).catch((err) => (isCode(err, 'ERROR_CODE_PERMISSION_DENIED') ? [] : null));
  }
  if (refreshOp.get(c.id) !== op || client !== H.client) return;
  // Replaced, not merged: a setting turned off is absent from the answer.
  if (info) c.info = info;
  if (members) c.members = members;
  H.rerender(c.id); // the header (name, count, Add) and the composer (dissolved)
  if (dlg?.open && c.id === shownId) renderPanel();
}

const timers = new Map();
function refreshSoon(c) {
  clearTimeout(timers.get(c.id));
  timers.set(c.id, setTimeout(() => (timers.delete(c.id), refresh(c)), 120));
}

/** Listens to this client's group events (call with each new client). */
// The end-to-end encryption layer (app.js sets it once loaded): members of an
// encrypted group are added and removed with its MLS Commits.
let e2ee = null;
export function setE2EE(e) {
  e2ee = e;
}
const encrypted = (c) => !!(c.info?.encrypted || c.encrypted);

export function attachGroups(client) {
  refreshOp.clear();
  if (dlg?.open) dlg.close();
  client.on('message', (m) => {
    if (!GROUP_EVENTS.has(m.kind) || client !== H.client) return;
    const c = H.conv(m.conversationId);
    const users = m.event?.userIds || [];
    // Added back after leaving or being removed: a member again.
    if (m.kind === 'MESSAGE_KIND_MEMBERS_ADDED' && users.includes(H.me)) c.left = false;
    if (dlg?.open && c.id === shownId) {
      if (m.kind === 'MESSAGE_KIND_MEMBERS_REMOVED' && users.includes(H.me) && m.from !== H.me) say(`${m.from} removed you from this group.`, true);
      else if (m.kind === 'MESSAGE_KIND_GROUP_DISSOLVED' && m.from !== H.me) say(`${m.from} dissolved this group.`, true);
      else if (m.kind === 'MESSAGE_KIND_ROLE_CHANGED' && users.includes(H.me)) say(`You are now ${ROLE_NAME[m.event?.role] === 'admin' ? 'an admin' : 'a member'}.`);
      else if (m.kind === 'MESSAGE_KIND_OWNER_CHANGED' && users.includes(H.me)) say('You are now the owner.');
    }
    refreshSoon(c);
  });
}

// ---- the panel ----

function fmtUntil(ms) {
  const d = new Date(ms);
  return d.toDateString() === new Date().toDateString()
    ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' })
    : d.toLocaleString([], { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

/** Why this user is out of the group, from the last event that took them out (if loaded). */
function outReason(c) {
  let ev = null;
  for (const m of c.msgs.values()) if (m.kind === 'MESSAGE_KIND_MEMBERS_REMOVED' && (m.event?.userIds || []).includes(H.me) && (!ev || m.seq > ev.seq)) ev = m;
  if (ev && ev.from !== H.me) return `${ev.from} removed you from this group.`;
  return 'You left this group.';
}

function build() {
  dlg = el('dialog', 'gp');
  dlg.id = 'members-dialog';
  dlg.setAttribute('aria-labelledby', 'gp-title');
  dlg.innerHTML = `
    <header class="gp-head">
      <h2 id="gp-title"></h2>
      <button type="button" class="gp-close secondary" aria-label="Close" title="Close (Esc)">×</button>
    </header>
    <p class="gp-sub"></p>
    <p class="gp-announcement"></p>
    <p class="gp-status" role="status"></p>
    <section class="gp-settings" aria-label="Group settings">
      <form class="gp-rename gp-inline">
        <label>Group name <input name="name" maxlength="128" required></label>
        <button type="submit">Rename</button>
      </form>
      <form class="gp-announce gp-inline">
        <label>Announcement <textarea name="announcement" rows="2" maxlength="1024"></textarea></label>
        <button type="submit">Save</button>
      </form>
      <label class="switch"><input type="checkbox" role="switch" name="muteAll"> Mute everyone (only the owner and admins write)</label>
      <label>Who may add members
        <select name="addPolicy">
          <option value="${ADMINS}">The owner and admins</option>
          <option value="${EVERYONE}">Every member</option>
        </select>
      </label>
    </section>
    <form class="gp-add gp-inline">
      <label>Add members (usernames, comma-separated) <input name="users" autocomplete="off"></label>
      <button type="submit">Add</button>
    </form>
    <h3 class="gp-count"></h3>
    <ul class="gp-list" aria-label="Members"></ul>
    <footer class="gp-foot">
      <p class="gp-owner-note"></p>
      <button type="button" class="gp-leave secondary">Leave group</button>
      <button type="button" class="gp-dissolve danger">Dissolve group</button>
    </footer>`;
  // (The markup above is fixed text: names and user data are set with textContent below.)
  document.body.append(dlg);
  const q = (s) => dlg.querySelector(s);
  q('.gp-close').onclick = () => dlg.close();
  dlg.addEventListener('close', () => {
    shownId = '';
    document.getElementById('members-btn')?.focus();
  });
  q('.gp-rename').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const name = q('.gp-rename input').value.trim();
    if (!name) return;
    act(ev.submitter, (cl, c) => cl.updateGroup({ conversationId: c.id, name }), 'Renamed.');
  });
  q('.gp-announce').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const announcement = q('.gp-announce textarea').value.trim();
    act(ev.submitter, (cl, c) => cl.updateGroup({ conversationId: c.id, announcement }), 'Announcement saved.');
  });
  q('[name=muteAll]').addEventListener('change', (ev) => {
    const muteAll = ev.target.checked;
    act(ev.target, (cl, c) => cl.updateGroup({ conversationId: c.id, muteAll }), muteAll ? 'Everyone is muted but the owner and admins.' : 'Everyone may write again.');
  });
  q('[name=addPolicy]').addEventListener('change', (ev) => {
    const addPolicy = ev.target.value;
    act(ev.target, (cl, c) => cl.updateGroup({ conversationId: c.id, addPolicy }), 'Saved.');
  });
  q('.gp-add').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const input = q('.gp-add input');
    const users = input.value.split(/[\s,]+/).map((s) => s.trim()).filter((s) => s && s !== H.me);
    if (!users.length) return say('Enter at least one username.', true);
    act(ev.submitter, async (cl, c) => {
      if (encrypted(c)) {
        if (!e2ee) throw new Error('End-to-end encryption is not available in this browser.');
        await e2ee.addMembers(c.id, users);
      } else await cl.addMembers(c.id, users);
      input.value = '';
    }, `Added ${users.join(', ')}.`);
  });
  q('.gp-leave').onclick = (ev) => {
    if (!confirm('Leave this group? You will not receive its messages any more.')) return;
    act(ev.currentTarget, (cl, c) => cl.leaveGroup(c.id), 'You left the group.', 'The owner cannot leave: make someone else the owner first, or dissolve the group.');
  };
  q('.gp-dissolve').onclick = (ev) => {
    if (!confirm('Dissolve this group? No one will be able to write in it again.')) return;
    act(ev.currentTarget, (cl, c) => cl.dissolveGroup(c.id), 'The group was dissolved.', 'The group was dissolved already.');
  };
}

/** Opens the members panel of group conversation c. */
export function openMembers(c) {
  if (!c?.group) return;
  if (!dlg) build();
  shownId = c.id;
  lastSig = '';
  expanded.clear();
  say('');
  dlg.querySelector('.gp-rename input').value = c.info?.name || '';
  dlg.querySelector('.gp-announce textarea').value = c.info?.announcement || '';
  renderPanel();
  if (!dlg.open) dlg.showModal();
  dlg.querySelector('.gp-close').focus();
  refresh(c);
}

function renderPanel() {
  const c = H.conv(shownId);
  const q = (s) => dlg.querySelector(s);
  const me = H.me;
  const myRole = c.left ? '' : roleOf(c, me);
  const live = usable(c);
  const admin = live && isAdminRole(myRole);
  const owner = live && myRole === OWNER;
  const info = c.info || {};

  q('#gp-title').textContent = info.name || 'Group';
  q('.gp-sub').textContent = c.left
    ? outReason(c)
    : info.dissolved
      ? 'This group was dissolved: it is read-only.'
      : `You are ${myRole === OWNER ? 'the owner' : myRole === ADMIN ? 'an admin' : myRole ? 'a member' : '…'}` + (info.muteAll ? ' · everyone is muted but the owner and admins' : '');
  q('.gp-announcement').textContent = info.announcement || '';
  q('.gp-announcement').hidden = !info.announcement;

  q('.gp-settings').hidden = !admin;
  // Values follow the server, except while the user is editing them.
  const name = q('.gp-rename input');
  if (document.activeElement !== name && !name.matches(':focus-within')) name.value = info.name || '';
  const ann = q('.gp-announce textarea');
  if (document.activeElement !== ann) ann.value = info.announcement || '';
  q('[name=muteAll]').checked = !!info.muteAll;
  q('[name=addPolicy]').value = info.addPolicy === EVERYONE ? EVERYONE : ADMINS;
  q('.gp-add').hidden = !canAddMembers(c);
  q('.gp-leave').hidden = !live || myRole === OWNER || !myRole;
  q('.gp-dissolve').hidden = !owner;
  q('.gp-owner-note').textContent = owner ? 'As the owner you cannot leave: make someone else the owner first, or dissolve the group.' : '';
  q('.gp-owner-note').hidden = !owner;

  const members = c.left ? [] : [...(c.members || [])];
  // Owner first, then admins, then members; by name within a role.
  members.sort((a, b) => (RANK[roleOf(c, b.userId)] || 0) - (RANK[roleOf(c, a.userId)] || 0) || a.userId.localeCompare(b.userId));
  q('.gp-count').textContent = c.left ? '' : c.members ? `${members.length} member${members.length === 1 ? '' : 's'}` : 'Loading members…';
  const sig = JSON.stringify([myRole, live, info.owner, members, [...expanded]]);
  if (sig === lastSig) return;
  lastSig = sig;
  // The list is drawn again: keep the focus on the same control.
  const focusKey = dlg.contains(document.activeElement) ? document.activeElement.dataset.key : '';
  q('.gp-list').replaceChildren(...members.map((m) => memberNode(c, m, myRole, live)));
  // A control whose row went (a member removed): the focus stays in the dialog.
  if (focusKey) (dlg.querySelector(`[data-key="${CSS.escape(focusKey)}"]`) || dlg.querySelector('.gp-close')).focus();
}

function memberNode(c, m, myRole, live) {
  const u = m.userId;
  const role = roleOf(c, u);
  const li = el('li', 'gp-member');
  li.dataset.user = u;
  li.dataset.role = ROLE_NAME[role] || 'member';
  const who = el('span', 'gp-who');
  who.append(el('span', 'gp-name', u + (u === H.me ? ' (you)' : '')), el('span', 'gp-role role-' + (ROLE_NAME[role] || 'member'), ROLE_NAME[role] || 'member'));
  if (m.mutedUntil && m.mutedUntil > Date.now()) who.append(el('span', 'gp-muted', 'muted until ' + fmtUntil(m.mutedUntil)));
  li.append(who);

  const may = live && u !== H.me && outranks(myRole, role); // remove, mute
  const isOwner = live && myRole === OWNER && u !== H.me; // set role, transfer
  if (!may && !isOwner) return li;
  const open = expanded.has(u);
  const toggle = button(open ? 'Done' : 'Manage', 'secondary gp-manage', () => {
    if (expanded.has(u)) expanded.delete(u);
    else expanded.add(u);
    renderPanel();
  }, open ? `Done managing ${u}` : `Manage ${u}`); // the name holds the visible word (voice control says it)
  toggle.dataset.key = 'manage|' + u;
  toggle.setAttribute('aria-expanded', String(open));
  li.append(toggle);
  if (!open) return li;

  const acts = el('div', 'gp-actions');
  const key = (b, k) => ((b.dataset.key = k + '|' + u), (b.dataset.action = k), b);
  if (isOwner && role !== OWNER) {
    const next = role === ADMIN ? MEMBER : ADMIN;
    acts.append(key(button(role === ADMIN ? 'Make member' : 'Make admin', 'secondary', (ev) =>
      act(ev.currentTarget, (cl, cc) => cl.setRole(cc.id, u, next), `${u} is now ${next === ADMIN ? 'an admin' : 'a member'}.`), `${role === ADMIN ? 'Make member' : 'Make admin'}: ${u}`), 'role'));
  }
  if (may) {
    if (m.mutedUntil && m.mutedUntil > Date.now()) {
      acts.append(key(button('Unmute', 'secondary', (ev) => act(ev.currentTarget, (cl, cc) => cl.muteMember(cc.id, u, 0), `${u} may write again.`), `Unmute ${u}`), 'unmute'));
    } else {
      const sel = el('select', 'gp-mute-for');
      sel.setAttribute('aria-label', `Mute ${u} for`);
      for (const [s, label] of MUTES) sel.append(new Option(label, String(s)));
      sel.value = '3600';
      sel.dataset.key = 'mutefor|' + u;
      acts.append(sel, key(button('Mute', 'secondary', (ev) => {
        const secs = Number(sel.value);
        const label = MUTES.find(([s]) => s === secs)?.[1] || '';
        act(ev.currentTarget, (cl, cc) => cl.muteMember(cc.id, u, secs), `${u} is muted for ${label}.`);
      }, `Mute ${u}`), 'mute'));
    }
    acts.append(key(button('Remove', 'danger', (ev) => {
      if (!confirm(`Remove ${u} from the group?`)) return;
      act(ev.currentTarget, (cl, cc) => (encrypted(cc) && e2ee ? e2ee.removeMember(cc.id, u) : cl.removeMember(cc.id, u)), `${u} was removed.`);
    }, `Remove ${u}`), 'remove'));
  }
  if (isOwner) {
    acts.append(key(button('Make owner', 'secondary', (ev) => {
      if (!confirm(`Make ${u} the owner? You will become an admin.`)) return;
      act(ev.currentTarget, (cl, cc) => cl.transferOwnership(cc.id, u), `${u} is now the owner; you are an admin.`);
    }, `Make owner: ${u}`), 'transfer'));
  }
  li.append(acts);
  return li;
}

/** hooks: { client, me, conv(id), rerender(id), errText(err) } (client and me as getters). */
export function initGroups(hooks) {
  H = hooks;
  const btn = document.getElementById('members-btn');
  if (btn) btn.onclick = () => H.openId && openMembers(H.conv(H.openId));
}

// Parley web client: message search, a dialog that finds messages in all the
// user's conversations or the open one (the server's `search` frame through
// the SDK), shows each hit's snippet with the matched words marked, pages
// with "More", and opens a hit in its conversation, scrolled to it.
import { isCode, snippetParts } from './parley-sdk.js';

const MAX_QUERY = 256; // bytes of UTF-8: the server's limit
const PAGE = 20;

let H = null; // what app.js gives (see initSearch)
let dlg = null;
let op = 0; // bumped by each search: an answer to an older one is dropped
let last = null; // {query, opts, next}: the search shown, for "More"
let opener = null; // where the focus goes back to when the dialog closes without a pick

const el = (tag, cls, txt) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (txt !== undefined) e.textContent = txt;
  return e;
};
const q = (sel) => dlg.querySelector(sel);

function build() {
  dlg = el('dialog', 'search-dialog');
  dlg.id = 'search-dialog';
  dlg.setAttribute('aria-labelledby', 'search-title');
  // Fixed markup only: user data goes in with textContent (show below).
  dlg.innerHTML = `
    <header class="gp-head">
      <h2 id="search-title">Search messages</h2>
      <button type="button" class="pp-close secondary" id="search-close" aria-label="Close" title="Close (Esc)">×</button>
    </header>
    <form id="search-form" role="search" aria-label="Search messages">
      <div class="search-row">
        <input id="search-input" type="search" autocomplete="off" spellcheck="false" placeholder="Words to find" aria-label="Words to find" aria-describedby="search-hint">
        <button type="submit" id="search-go">Search</button>
      </div>
      <div class="search-opts">
        <label class="search-scope">In <select id="search-scope">
          <option value="all">All conversations</option>
          <option value="open" id="search-scope-open">This conversation</option>
        </select></label>
        <label class="search-check"><input type="checkbox" id="search-phrase"> Exact phrase</label>
      </div>
      <p id="search-hint" class="search-hint">Every word must match, in any order; case and accents do not matter. ↓ moves to the results.</p>
    </form>
    <p id="search-status" class="search-status" role="status"></p>
    <ul id="search-results" class="search-results" aria-label="Results"></ul>
    <button type="button" id="search-more" class="secondary search-more" hidden>More</button>`;
  document.body.append(dlg);
  q('#search-close').onclick = () => dlg.close();
  dlg.addEventListener('close', () => {
    if (opener?.isConnected) opener.focus({ preventScroll: true });
    opener = null;
  });
  q('#search-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    run();
  });
  q('#search-more').onclick = () => more();
  q('#search-input').addEventListener('keydown', (ev) => {
    if (ev.key === 'ArrowDown' && hits().length) {
      ev.preventDefault();
      hits()[0].focus();
    } else if (ev.key === 'Escape') {
      // Close at once (a search field's Esc would clear it first): the search is kept for next time.
      ev.preventDefault();
      dlg.close();
    }
  });
  // The results: ↑/↓ (Home/End) move between them; Enter or Space opens one (they are buttons).
  q('#search-results').addEventListener('keydown', (ev) => {
    const list = hits();
    const i = list.indexOf(document.activeElement);
    if (i < 0) return;
    let to = -1;
    if (ev.key === 'ArrowDown') to = Math.min(i + 1, list.length - 1);
    else if (ev.key === 'ArrowUp') to = i - 1;
    else if (ev.key === 'Home') to = 0;
    else if (ev.key === 'End') to = list.length - 1;
    else return;
    ev.preventDefault();
    if (to < 0) q('#search-input').focus();
    else list[to].focus();
  });
}

const hits = () => [...dlg.querySelectorAll('.search-hit')];

/** Opens the dialog (scope: 'open' to search the open conversation, 'all', or the last choice). */
export function openSearch(scope) {
  if (!dlg) build();
  const openId = H.openId;
  const opt = q('#search-scope-open');
  opt.hidden = opt.disabled = !openId;
  opt.textContent = openId ? `This conversation (${H.title(H.conv(openId))})` : 'This conversation';
  if (scope) q('#search-scope').value = scope;
  if (!openId) q('#search-scope').value = 'all';
  if (!dlg.open) {
    opener = document.activeElement;
    dlg.showModal();
  }
  if (!last) say('Find messages in your conversations.');
  q('#search-input').focus();
  q('#search-input').select();
}

function say(t, bad = false) {
  const s = q('#search-status');
  s.textContent = t;
  s.classList.toggle('bad', bad);
}

/** Why a search failed, in words. */
function failText(err) {
  // Off (`search: off`), a failed index, or a search that ran too long: the server cannot tell them apart.
  if (isCode(err, 'ERROR_CODE_UNAVAILABLE')) return 'Search is not available: it is off on this server, or this search took too long (try rarer words).';
  if (isCode(err, 'ERROR_CODE_TOO_MANY_REQUESTS')) return 'The server is busy with other searches. Try again in a moment.';
  if (isCode(err, 'ERROR_CODE_PERMISSION_DENIED')) return 'You cannot search this conversation.';
  if (isCode(err, 'ERROR_CODE_BAD_REQUEST')) return 'The server cannot search for that: use fewer words.';
  return 'Could not search: ' + H.errText(err) + '.';
}

async function run() {
  const query = q('#search-input').value.trim();
  if (!query) {
    say('Type the words to find.', true);
    return q('#search-input').focus();
  }
  if (new TextEncoder().encode(query).length > MAX_QUERY) {
    say('That is too long to search for: use fewer words.', true);
    return q('#search-input').focus();
  }
  const opts = { limit: PAGE };
  if (q('#search-phrase').checked) opts.phrase = true;
  if (q('#search-scope').value === 'open' && H.openId) opts.conversationId = H.openId;
  last = null;
  q('#search-results').replaceChildren();
  q('#search-more').hidden = true;
  await page(query, opts);
}

function more() {
  if (!last?.next) return;
  page(last.query, { ...last.opts, before: last.next });
}

/** Asks for one page and shows it after what is there. */
async function page(query, opts) {
  const mine = ++op;
  const client = H.client;
  const first = !opts.before;
  const moreBtn = q('#search-more');
  const fromMore = document.activeElement === moreBtn; // (disabling it below takes its focus)
  moreBtn.disabled = true;
  dlg.setAttribute('aria-busy', 'true');
  if (first) say('Searching…');
  let res;
  try {
    res = await client.search(query, opts);
  } catch (err) {
    if (mine !== op) return;
    dlg.removeAttribute('aria-busy');
    moreBtn.disabled = false;
    say(failText(err), true);
    return;
  }
  if (mine !== op || client !== H.client) return;
  dlg.removeAttribute('aria-busy');
  moreBtn.disabled = false;
  const { before: _, ...base } = opts;
  last = { query, opts: base, next: res.next };
  const ul = q('#search-results');
  const nodes = res.hits.map(hitNode);
  ul.append(...nodes);
  moreBtn.hidden = !res.next;
  const n = ul.children.length;
  // A page may come back short, even empty, with more to look through (the server bounds each search).
  if (!n && res.next) say('Nothing found so far: “More” searches further.');
  else if (!n) say(opts.conversationId ? 'No messages in this conversation match.' : 'No messages match.');
  else say(`${n} message${n === 1 ? '' : 's'} found${res.next ? ', more with “More”' : ''}.`);
  // "More" keeps the keyboard user's place: the focus goes to the first new result.
  if (!first && nodes.length && (fromMore || document.activeElement === moreBtn)) nodes[0].querySelector('button').focus();
}

/** One result: a button with the conversation, sender, time and the snippet, matches in <mark>. */
function hitNode(h) {
  const li = el('li');
  const b = el('button', 'search-hit');
  b.type = 'button';
  b.dataset.conv = h.conversationId;
  b.dataset.seq = String(h.seq);
  const head = el('span', 'sh-head');
  const c = H.conv(h.conversationId);
  head.append(el('span', 'sh-conv', H.title(c)));
  if (c.group || h.from === H.me) head.append(el('span', 'sh-from', h.from === H.me ? 'You' : h.from));
  const t = el('time', 'sh-time', H.fmtTime(h.serverTime));
  if (h.serverTime) {
    t.dateTime = new Date(h.serverTime).toISOString();
    t.title = new Date(h.serverTime).toLocaleString();
  }
  head.append(t);
  const snip = el('span', 'sh-snippet');
  for (const p of snippetParts(h.snippet, h.highlights)) snip.append(p.highlight ? el('mark', '', p.text) : document.createTextNode(p.text));
  b.append(head, snip);
  b.onclick = () => {
    opener = null; // the focus goes to the message
    dlg.close();
    H.openAt(h.conversationId, h.seq);
  };
  li.append(b);
  return li;
}

/** Forgets the last search (a new client: another user may sign in). */
export function attachSearch() {
  op++;
  last = null;
  if (!dlg) return;
  if (dlg.open) dlg.close();
  q('#search-input').value = '';
  q('#search-results').replaceChildren();
  q('#search-more').hidden = true;
  say('');
}

/** hooks: { client, me, openId (getters), conv(id), title(c), fmtTime(ms), openAt(id, seq), errText(err) }. */
export function initSearch(hooks) {
  H = hooks;
  const btn = document.getElementById('search-btn');
  if (btn) btn.onclick = () => openSearch();
}

// The web client as a product: limits said before they bite, refusals said on
// the message, the server's pushes shown, grouping, separators, shortcuts, the
// dark theme, and an accessibility check (axe-core) of the main screens.
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startServer, uniqueName, waitFor, type RunningServer } from '../helpers/server.js';
import { bubbles, expectAccessible, launch, newPage, openChatWith, openConversation, sendText, signUp } from '../helpers/browser.js';

// A small frame limit, so that a long message is over it (the default is 64 KiB).
const MAX_FRAME = 2048;

let srv: RunningServer;
let browser: Browser;
const contexts: BrowserContext[] = [];
const allErrors: string[][] = [];

beforeAll(async () => {
  [srv, browser] = await Promise.all([startServer(inject('parleyBin'), undefined, { config: `max_frame_bytes: ${MAX_FRAME}\n` }), launch()]);
});
afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await srv?.dispose();
});

interface User {
  ctx: BrowserContext;
  page: Page;
  name: string;
  errors: string[];
}

async function user(prefix: string, opts: { viewport?: { width: number; height: number }; colorScheme?: 'light' | 'dark'; name?: string } = {}): Promise<User> {
  const ctx = await browser.newContext({ viewport: opts.viewport ?? { width: 1100, height: 760 }, colorScheme: opts.colorScheme ?? 'light' });
  contexts.push(ctx);
  const { page, errors } = await newPage(ctx, srv.http);
  allErrors.push(errors);
  const name = opts.name ?? uniqueName(prefix);
  await signUp(page, name);
  return { ctx, page, name, errors };
}

const bubble = (page: Page, text: string) => page.locator(`#msg-list li.msg:has(.body:text-is("${text}"))`);

async function adminPush(users: string[], body: Uint8Array | string, op = 1000): Promise<void> {
  const r = await fetch(`${srv.http}/v1/admin/push/users?user_ids=${users.join(',')}&op=${op}`, {
    method: 'POST',
    headers: { 'X-Api-Key': srv.adminKey() },
    body: typeof body === 'string' ? body : Buffer.from(body),
  });
  expect(r.status).toBe(200);
  expect(((await r.json()) as { pushed: number }).pushed).toBeGreaterThan(0);
}

/** Whether an element's text is clipped with an ellipsis (not just cut). */
const ellipsized = (page: Page, selector: string) =>
  page.$eval(selector, (e) => {
    const s = getComputedStyle(e);
    return { ellipsis: s.textOverflow === 'ellipsis', clipped: e.scrollWidth > e.clientWidth, text: e.textContent };
  });

describe('web client: limits and refusals', () => {
  it('a message over the server’s frame limit is not cut: a counter shows the limit, the send is refused with a reason, one at the limit goes through', async () => {
    const a = await user('lim');
    const b = await user('limb');
    await openChatWith(a.page, b.name);
    expect(await a.page.getAttribute('#composer-input', 'maxlength')).toBeNull();
    expect(await a.page.getAttribute('#thread-input', 'maxlength')).toBeNull();

    // Short text: no counter.
    await a.page.fill('#composer-input', 'short');
    expect(await a.page.isHidden('#composer-count')).toBe(true);

    // Near the limit, still under it: the counter shows, without an error.
    await a.page.fill('#composer-input', 'n'.repeat(1300));
    await a.page.waitForSelector('#composer-count:not([hidden])');
    expect(await a.page.getAttribute('#composer-count', 'class')).not.toContain('over');
    expect(await a.page.textContent('#composer-error')).toBe('');

    // Far over: counted in UTF-8 bytes ("é" is two), shown against the limit, kept whole.
    const long = 'é'.repeat(2500);
    await a.page.fill('#composer-input', long);
    const count = (await a.page.textContent('#composer-count')) ?? '';
    const m = /^([\d,]+) \/ ([\d,]+)$/.exec(count);
    expect(m, count).not.toBeNull();
    expect(Number(m![1]!.replaceAll(',', ''))).toBe(5000);
    const limit = Number(m![2]!.replaceAll(',', ''));
    // Room is left for the frame around the text: base64 and the JSON envelope.
    expect(limit).toBeGreaterThan(MAX_FRAME / 2);
    expect(limit).toBeLessThan((MAX_FRAME * 3) / 4);
    expect(await a.page.getAttribute('#composer-count', 'class')).toContain('over');
    await a.page.press('#composer-input', 'Enter');
    await a.page.waitForSelector('#composer-error:has-text("Too long to send")');
    expect(await a.page.textContent('#composer-error')).toContain(`at most ${limit.toLocaleString('en-US')}`);
    expect(await a.page.inputValue('#composer-input')).toBe(long); // nothing cut, nothing lost
    expect(await a.page.$$eval('#msg-list li.msg', (l) => l.length)).toBe(0);

    // One byte over is refused; exactly at the limit is sent, stored and received whole.
    await a.page.fill('#composer-input', 'x'.repeat(limit + 1));
    await a.page.press('#composer-input', 'Enter');
    await a.page.waitForSelector('#composer-error:has-text("Too long to send")');
    const atLimit = 'y'.repeat(limit);
    await a.page.fill('#composer-input', atLimit);
    expect(await a.page.textContent('#composer-error')).toBe(''); // the error goes once it fits
    await a.page.press('#composer-input', 'Enter');
    await waitFor(async () => ['sent', 'delivered', 'read'].includes((await bubble(a.page, atLimit).getAttribute('data-state').catch(() => '')) ?? ''), 10000, 'the message at the limit is sent');
    await b.page.locator(`#conv-list li.conv:has(.title:text-is("${a.name}"))`).waitFor();
    await openConversation(b.page, a.name);
    await b.page.waitForSelector(`#msg-list .body:text-is("${atLimit}")`);
    expect(srv.output()).not.toMatch(/panic/);
    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('a send the SDK refuses as too large says so on its bubble, never "Sending…"', async () => {
    const a = await user('big');
    const b = await user('bigb');
    await openChatWith(a.page, b.name);
    // The SDK fails a send over the frame limit at once with ERROR_CODE_TOO_LARGE. The composer
    // never lets one through, so this test pads the payload on its way into the real SDK.
    await a.page.evaluate(() => {
      const client = (window as unknown as { parley: { send: (i: { payload: string }) => Promise<unknown> } }).parley;
      const send = client.send.bind(client);
      client.send = (input) => send({ ...input, payload: input.payload + 'x'.repeat(5000) });
    });
    await sendText(a.page, 'refused as too large');
    const li = a.page.locator('#msg-list li.pending:has(.body:text-is("refused as too large"))');
    await li.locator('.meta:has-text("Not sent: too long for this server")').waitFor();
    expect(await li.getAttribute('data-state')).toBe('failed');
    expect(await li.locator('.meta').textContent()).not.toContain('Sending');
  });

  it('a chat with a user id that has no account says "No such user", not "Sent"', async () => {
    const a = await user('lone');
    const ghost = uniqueName('ghost');
    await openChatWith(a.page, ghost);
    await sendText(a.page, 'anyone there?');
    const li = a.page.locator('#msg-list li.msg:has(.body:text-is("anyone there?"))');
    await li.locator('.meta:has-text("No such user")').waitFor();
    expect(await li.getAttribute('data-state')).toBe('failed');
    expect(await a.page.textContent('#chat-sub')).toBe('No such user');
    expect(await a.page.locator('#msg-list li.msg .state.sent').count()).toBe(0);
  });
});

describe('web client: notices, favicon, title, names', () => {
  it('a push from the app’s server shows as a notice (text as text, other bytes as their size), dismissed by keyboard', async () => {
    const a = await user('pu');
    await adminPush([a.name], 'Maintenance at 02:00 UTC');
    const text = a.page.locator('#notices .notice[data-kind=text]');
    await text.locator('.notice-text:text-is("Maintenance at 02:00 UTC")').waitFor();
    await adminPush([a.name], new Uint8Array([0, 1, 2, 0xff, 0xfe]));
    const bin = a.page.locator('#notices .notice[data-kind=binary]');
    await bin.locator('.notice-text:text-is("A push of 5 bytes")').waitFor();
    await expectAccessible(a.page, 'notices');

    // The × is a labelled button: focus it, Enter dismisses; focus moves to the next notice.
    await text.locator('.notice-close').focus();
    await a.page.keyboard.press('Enter');
    await text.waitFor({ state: 'detached' });
    expect(await a.page.evaluate(() => document.activeElement?.closest('.notice')?.getAttribute('data-kind'))).toBe('binary');
    // Esc dismisses the focused notice.
    await a.page.keyboard.press('Escape');
    await bin.waitFor({ state: 'detached' });
    // Esc with nothing else open dismisses the latest notice.
    await adminPush([a.name], 'second');
    await a.page.locator('#notices .notice').waitFor();
    await a.page.locator('body').click({ position: { x: 5, y: 5 } });
    await a.page.keyboard.press('Escape');
    await a.page.locator('#notices .notice').waitFor({ state: 'detached' });
  });

  it('loads without a 404 (a favicon), counts unread messages in the tab title, clips long names with an ellipsis', async () => {
    const ctx = await browser.newContext({ viewport: { width: 900, height: 700 } });
    contexts.push(ctx);
    const failed: string[] = [];
    const page = await ctx.newPage();
    page.on('response', (r) => r.status() >= 400 && failed.push(`${r.status()} ${r.url()}`));
    await page.goto(srv.http + '/');
    await page.waitForLoadState('networkidle');
    const icon = await page.getAttribute('link[rel=icon]', 'href');
    expect(icon).toBeTruthy();
    const r = await fetch(new URL(icon!, srv.http + '/'));
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toContain('image/svg+xml');
    expect(failed).toEqual([]);
    expect(await page.title()).toBe('Parley');

    // A name of 64 characters (the most a username can have), wide letters.
    const tail = uniqueName('');
    const longName = 'W'.repeat(64 - tail.length - 1) + 'w' + tail;
    expect(longName).toHaveLength(64);
    await signUp(page, longName);
    const b = await user('tit');
    await openChatWith(b.page, longName);
    for (const t of ['one', 'two', 'three']) await sendText(b.page, t);
    await waitFor(async () => (await page.title()) === '(3) Parley', 10000, 'the title counts 3 unread');
    await openConversation(page, b.name);
    await waitFor(async () => (await page.title()) === 'Parley', 10000, 'the title clears once read');

    // The long name in b's list, header, and a group's bubbles: clipped with an ellipsis.
    for (const sel of [`#conv-list li.conv .title`, '#chat-title']) {
      const e = await ellipsized(b.page, sel);
      expect(e.text).toBe(longName);
      expect(e, sel).toMatchObject({ ellipsis: true, clipped: true });
    }
    await page.click('#new-group-btn');
    await page.fill('#group-name', 'wide');
    await page.fill('#group-members', b.name);
    await page.click('#group-ok');
    await page.waitForSelector('#chat-title:text-is("wide")');
    await sendText(page, 'from the long name');
    await b.page.locator('#conv-list li.conv:has(.title:text-is("wide"))').waitFor();
    await openConversation(b.page, 'wide');
    await b.page.waitForSelector('#msg-list li.msg:has(.body:text-is("from the long name")) .from');
    const from = await ellipsized(b.page, '#msg-list li.msg:has(.body:text-is("from the long name")) .from');
    expect(from).toMatchObject({ ellipsis: true, clipped: true, text: longName });
    // A group's run of messages starts with its sender's avatar (decorative: the name is beside it).
    const avatar = b.page.locator('#msg-list li.msg:has(.body:text-is("from the long name")) .avatar');
    expect(await avatar.textContent()).toBe('W');
    expect(await avatar.getAttribute('aria-hidden')).toBe('true');
  });

  it('sign-up says which characters a username may have', async () => {
    const ctx = await browser.newContext();
    contexts.push(ctx);
    const { page, errors } = await newPage(ctx, srv.http);
    for (const bad of ['bad name!', 'dots..twice', '-dash-first']) {
      await page.fill('#auth-user', bad);
      await page.fill('#auth-pass', 'long-enough-password');
      await page.click('#register-btn');
      await page.waitForSelector('#auth-error:has-text("letters (A–Z, a–z), digits (0–9) and the signs _ . @ -")');
      expect(await page.textContent('#auth-error')).toContain('starts and ends with a letter or digit');
      expect(await page.isHidden('#app')).toBe(true);
      await page.fill('#auth-user', '');
      await page.evaluate(() => (document.getElementById('auth-error')!.textContent = ''));
    }
    await expectAccessible(page, 'sign-in with an error');
    expect(errors).toEqual([]);
  });
});

describe('web client: reading a conversation', () => {
  it('groups messages by sender, dates them, opens at the first unread with a divider, offers a jump to the latest with a count', async () => {
    const a = await user('rd');
    const b = await user('rdb', { viewport: { width: 1000, height: 600 } });
    await openChatWith(a.page, b.name);
    await sendText(a.page, 'hello there');
    await b.page.locator(`#conv-list li.conv:has(.title:text-is("${a.name}"))`).waitFor();
    await openConversation(b.page, a.name);
    await waitFor(async () => (await bubble(a.page, 'hello there').getAttribute('data-state')) === 'read', 10000, 'b read it');
    await sendText(b.page, 'hi');
    await sendText(b.page, 'how are you?');
    await b.page.waitForSelector('#msg-list li.msg.mine:has(.body:text-is("how are you?"))[data-state=sent], #msg-list li.msg.mine:has(.body:text-is("how are you?"))[data-state=delivered], #msg-list li.msg.mine:has(.body:text-is("how are you?"))[data-state=read]');
    // One run of b's: the first opens it, the next continues it.
    expect(await bubble(b.page, 'hi').getAttribute('class')).toContain('first');
    expect(await bubble(b.page, 'how are you?').getAttribute('class')).toContain('cont');
    expect(await bubble(b.page, 'hello there').getAttribute('class')).toContain('first');
    // A date separator heads the day.
    expect(await b.page.$$eval('#msg-list > li', (l) => l.map((e) => e.className.split(' ')[0]))).toEqual(['day-sep', 'msg', 'msg', 'msg']);
    expect(await b.page.textContent('#msg-list li.day-sep')).toBe('Today');

    // b goes to another conversation; a writes many messages.
    const c = await user('rdc');
    await openChatWith(b.page, c.name);
    const many = Array.from({ length: 40 }, (_, i) => `unread ${i + 1}`);
    for (const t of many) await sendText(a.page, t);
    await waitFor(async () => ['sent', 'delivered', 'read'].includes((await bubble(a.page, 'unread 40').getAttribute('data-state').catch(() => '')) ?? ''), 20000, 'all sent');
    const badge = b.page.locator(`#conv-list li.conv:has(.title:text-is("${a.name}")) .badge.unread`);
    await waitFor(async () => (await badge.textContent().catch(() => '')) === '40', 10000, 'b has 40 unread').catch(async (e) => {
      throw new Error(`${e}: badge ${await badge.textContent().catch(() => 'none')}, a sees ${(await bubbles(a.page)).length} bubbles`);
    });
    await openConversation(b.page, a.name);
    // The divider stands right before the first unread message, and the view opens there.
    const sep = b.page.locator('#msg-list li.new-sep');
    await sep.waitFor();
    expect(await sep.textContent()).toBe('New messages');
    expect(await b.page.$eval('#new-sep', (e) => (e.nextElementSibling?.querySelector('.body')?.textContent ?? ''))).toBe('unread 1');
    const view = async () =>
      b.page.$eval('#messages', (box) => {
        const s = document.getElementById('new-sep')!.getBoundingClientRect();
        const r = box.getBoundingClientRect();
        return { sepVisible: s.top >= r.top && s.bottom <= r.bottom, fromBottom: box.scrollHeight - box.scrollTop - box.clientHeight };
      });
    const v = await view();
    expect(v.sepVisible).toBe(true);
    expect(v.fromBottom).toBeGreaterThan(200);
    // Scrolled up: the jump button shows, and counts what arrives meanwhile.
    const jump = b.page.locator('#jump-latest');
    await jump.waitFor();
    expect(await b.page.textContent('#jump-count')).toBe('');
    await sendText(a.page, 'while you read');
    await sendText(a.page, 'and another');
    await b.page.waitForSelector('#jump-count:text-is("2")');
    expect(await jump.getAttribute('aria-label')).toBe('Jump to the latest messages, 2 new');
    await expectAccessible(b.page, 'conversation with the divider and the jump button');
    await jump.click();
    await waitFor(async () => (await b.page.$eval('#messages', (x) => x.scrollHeight - x.scrollTop - x.clientHeight)) < 60, 5000, 'scrolled to the latest');
    await jump.waitFor({ state: 'hidden' });
    expect((await bubbles(b.page)).slice(-2)).toEqual(['while you read', 'and another']);
    for (const e of allErrors) expect(e).toEqual([]);
  });
});

describe('web client: read marks', () => {
  it('answering right after opening a conversation marks what came before as read', async () => {
    const a = await user('rm');
    const b = await user('rmb');
    await openChatWith(a.page, b.name);
    await sendText(a.page, 'are you there?');
    await sendText(a.page, 'call me');
    await b.page.locator(`#conv-list li.conv:has(.title:text-is("${a.name}")) .badge.unread`).waitFor();
    // Open and answer at once, faster than a person reads: the answer's ack
    // must carry the read mark when the delayed one finds nothing to mark.
    await b.page.evaluate((title) => {
      const li = Array.from(document.querySelectorAll('#conv-list li.conv')).find((e) => e.querySelector('.title')?.textContent === title) as HTMLElement;
      li.click();
      const box = document.getElementById('composer-input') as HTMLTextAreaElement;
      box.value = 'on my way';
      (document.getElementById('composer') as HTMLFormElement).requestSubmit();
    }, a.name);
    await waitFor(async () => (await bubble(a.page, 'call me').getAttribute('data-state')) === 'read', 10000, 'a sees b read its messages');
    for (const e of allErrors) expect(e).toEqual([]);
  });
});

describe('web client: keyboard', () => {
  it('shortcuts: Ctrl+K finds a conversation, Alt+↑/↓ moves between them, ↑ edits the last message, Esc cancels, ? lists them', async () => {
    const a = await user('kb');
    const b = await user('kbb');
    const c = await user('kbc');
    await openChatWith(a.page, b.name);
    await sendText(a.page, 'to b');
    await openChatWith(a.page, c.name);
    await sendText(a.page, 'to c first');
    await sendText(a.page, 'to c last');
    await a.page.waitForSelector('#msg-list li.msg.mine:has(.body:text-is("to c last"))[data-state]:not([data-state=pending])');

    // ↑ in the empty composer edits my last message; Esc cancels the edit.
    await a.page.focus('#composer-input');
    await a.page.keyboard.press('ArrowUp');
    await a.page.waitForSelector('#edit-bar:not([hidden])');
    expect(await a.page.inputValue('#composer-input')).toBe('to c last');
    await a.page.keyboard.press('Escape');
    await a.page.waitForSelector('#edit-bar', { state: 'hidden' });
    expect(await a.page.inputValue('#composer-input')).toBe('');
    // ↑ then an edit sent with Enter.
    await a.page.keyboard.press('ArrowUp');
    await a.page.fill('#composer-input', 'to c, edited');
    await a.page.keyboard.press('Enter');
    await a.page.waitForSelector('#msg-list li.msg:has(.body:text-is("to c, edited")) .meta:has-text("edited")');

    // Message actions by keyboard: the ⋯ button opens them; Reply; Esc cancels the reply.
    const more = bubble(a.page, 'to c first').locator('.more');
    expect(await more.getAttribute('aria-label')).toBe('Actions for the message from you');
    await more.focus();
    await a.page.keyboard.press('Enter');
    expect(await more.getAttribute('aria-expanded')).toBe('true');
    await a.page.keyboard.press('Tab'); // into the actions: the first reaction
    expect(await a.page.evaluate(() => document.activeElement?.closest('.msg-actions') !== null)).toBe(true);
    await bubble(a.page, 'to c first').locator('button[data-action=reply]').focus();
    await a.page.keyboard.press('Enter');
    await a.page.waitForSelector('#reply-bar:not([hidden])');
    expect(await a.page.evaluate(() => document.activeElement?.id)).toBe('composer-input');
    await a.page.keyboard.press('Escape');
    await a.page.waitForSelector('#reply-bar', { state: 'hidden' });
    // Esc closes open actions too, and the focus goes back to their button.
    await more.focus();
    await a.page.keyboard.press('Enter');
    await bubble(a.page, 'to c first').locator('button[data-action=reply]').focus();
    await a.page.keyboard.press('Escape');
    expect(await more.getAttribute('aria-expanded')).toBe('false');
    expect(await a.page.evaluate(() => document.activeElement?.classList.contains('more'))).toBe(true);

    // Alt+↓ / Alt+↑: the next and previous conversation in the list (newest first: c, then b).
    await a.page.keyboard.press('Alt+ArrowDown');
    await a.page.waitForSelector(`#chat-title:text-is("${b.name}")`);
    await a.page.keyboard.press('Alt+ArrowUp');
    await a.page.waitForSelector(`#chat-title:text-is("${c.name}")`);

    // Ctrl+K: the filter; typing narrows the list, Enter opens the first match.
    await a.page.keyboard.press('Control+k');
    expect(await a.page.evaluate(() => document.activeElement?.id)).toBe('conv-filter');
    await a.page.keyboard.type(b.name.slice(0, -1));
    await waitFor(async () => (await a.page.$$eval('#conv-list li.conv .title', (l) => l.map((e) => e.textContent))).join() === b.name, 5000, 'the list filtered');
    await a.page.keyboard.press('Enter');
    await a.page.waitForSelector(`#chat-title:text-is("${b.name}")`);
    await a.page.fill('#conv-filter', '');
    await a.page.dispatchEvent('#conv-filter', 'input');

    // Conversations are reachable with Tab and open with Enter.
    await a.page.locator(`#conv-list li.conv:has(.title:text-is("${c.name}"))`).focus();
    await a.page.keyboard.press('Enter');
    await a.page.waitForSelector(`#chat-title:text-is("${c.name}")`);

    // ? (outside a text box) opens the list of shortcuts; Esc closes it.
    await a.page.locator('#help-btn').focus();
    await a.page.keyboard.press('Shift+Slash');
    await a.page.waitForSelector('#help-dialog[open]');
    expect(await a.page.textContent('#help-dialog')).toContain('Edit your last message');
    await expectAccessible(a.page, 'help dialog');
    await a.page.keyboard.press('Escape');
    await a.page.waitForSelector('#help-dialog:not([open])', { state: 'attached' });
    // Typing ? in the composer types it.
    await a.page.focus('#composer-input');
    await a.page.keyboard.type('?');
    expect(await a.page.inputValue('#composer-input')).toBe('?');
    expect(await a.page.$eval('#help-dialog', (d) => (d as HTMLDialogElement).open)).toBe(false);
    for (const e of allErrors) expect(e).toEqual([]);
  });
});

/** Presses Tab (Shift+Tab with back) until the focused element matches selector; fails after max presses. */
async function tabTo(page: Page, selector: string, opts: { back?: boolean; max?: number } = {}): Promise<void> {
  const max = opts.max ?? 80;
  for (let i = 0; i < max; i++) {
    if (await page.evaluate((sel) => document.activeElement?.matches(sel) ?? false, selector)) return;
    await page.keyboard.press(opts.back ? 'Shift+Tab' : 'Tab');
  }
  const at = await page.evaluate(() => document.activeElement?.outerHTML.slice(0, 120));
  throw new Error(`${max} Tab presses did not reach ${selector} (focus on ${at})`);
}

describe('web client: the members panel and People by keyboard alone', () => {
  it('dark theme: Tab reaches each, Enter acts, Esc closes and gives the focus back; axe-core finds nothing serious in either', async () => {
    const a = await user('kg', { colorScheme: 'dark' });
    const b = await user('kgb', { colorScheme: 'dark' });
    const c = await user('kgc', { colorScheme: 'dark' });
    for (const u of [a, b, c]) u.page.on('dialog', (d) => void d.accept()); // removals ask first
    await a.page.click('#new-group-btn');
    await a.page.fill('#group-name', 'keys');
    await a.page.fill('#group-members', `${b.name}, ${c.name}`);
    await a.page.click('#group-ok');
    await a.page.waitForSelector('#chat-title:text-is("keys")');
    await b.page.locator('#conv-list li.conv:has(.title:text-is("keys"))').waitFor();

    // From the composer, Shift+Tab back to the header's Members button; Enter opens the panel.
    const dlg = '#members-dialog';
    await a.page.focus('#composer-input');
    await tabTo(a.page, '#members-btn', { back: true });
    await a.page.keyboard.press('Enter');
    await a.page.waitForSelector(`${dlg}[open] li.gp-member[data-user="${b.name}"]`);
    await expectAccessible(a.page, 'members panel, dark');
    // Manage B → Make admin, by keyboard.
    await tabTo(a.page, `${dlg} button.gp-manage[aria-label="Manage ${b.name}"]`);
    await a.page.keyboard.press('Enter');
    await tabTo(a.page, `${dlg} button[data-action=role][data-key="role|${b.name}"]`);
    await a.page.keyboard.press('Enter');
    await a.page.waitForSelector(`${dlg} li.gp-member[data-user="${b.name}"][data-role=admin]`);
    // Mute C: the select takes the arrow keys, the button Enter.
    await tabTo(a.page, `${dlg} button.gp-manage[aria-label="Manage ${c.name}"]`);
    await a.page.keyboard.press('Enter');
    await tabTo(a.page, `${dlg} select[data-key="mutefor|${c.name}"]`);
    await tabTo(a.page, `${dlg} button[data-action=mute][data-key="mute|${c.name}"]`);
    await a.page.keyboard.press('Enter');
    await a.page.locator(`${dlg} li.gp-member[data-user="${c.name}"] .gp-muted`).waitFor();
    // Rename: Shift+Tab back up to the name, type, Enter submits.
    await tabTo(a.page, `${dlg} .gp-rename input`, { back: true });
    await a.page.keyboard.press('Control+a');
    await a.page.keyboard.type('keys renamed');
    await a.page.keyboard.press('Enter');
    await b.page.locator('#conv-list li.conv:has(.title:text-is("keys renamed"))').waitFor();
    await expectAccessible(a.page, 'members panel with a member\'s actions open, dark');
    // Esc closes it; the focus goes back to where it opened.
    await a.page.keyboard.press('Escape');
    await a.page.waitForSelector(`${dlg}:not([open])`, { state: 'attached' });
    expect(await a.page.evaluate(() => document.activeElement?.id)).toBe('members-btn');

    // People: Tab from the conversation filter to the sidebar's People button.
    await a.page.focus('#conv-filter');
    await tabTo(a.page, '#people-btn', { back: true });
    await a.page.keyboard.press('Enter');
    const pp = '#people-dialog';
    await a.page.waitForSelector(`${pp}[open]`);
    expect(await a.page.evaluate(() => document.activeElement?.closest('form')?.className)).toBe('pp-request'); // the name box
    await a.page.keyboard.type(b.name);
    await tabTo(a.page, `${pp} button[value=request]`);
    await a.page.keyboard.press('Enter');
    await a.page.locator(`${pp} .pp-outgoing li:has(.pp-name:text-is("${b.name}"))`).waitFor();
    // B accepts with the keyboard: the button says how many requests wait.
    await b.page.focus('#conv-filter');
    await tabTo(b.page, '#people-btn[aria-label="People: 1 friend request"]', { back: true });
    // The count sits on the button's corner: the signed-in name beside the buttons stays whole.
    expect(await b.page.textContent('#people-btn .pp-badge')).toBe('1');
    expect(await ellipsized(b.page, '#me-name')).toMatchObject({ clipped: false, text: b.name });
    await b.page.keyboard.press('Enter');
    await b.page.waitForSelector(`${pp}[open] .pp-incoming li`);
    await expectAccessible(b.page, 'People with a request, dark');
    await tabTo(b.page, `${pp} button[data-action=accept]`);
    await b.page.keyboard.press('Enter');
    await b.page.locator(`${pp} .pp-friends li:has(.pp-name:text-is("${a.name}"))`).waitFor();
    await a.page.locator(`${pp} .pp-friends li:has(.pp-name:text-is("${b.name}"))`).waitFor();
    await expectAccessible(a.page, 'People with a contact, dark');
    // A opens the chat with B from the contact, by keyboard.
    await tabTo(a.page, `${pp} .pp-friends button[data-action=chat]`);
    await a.page.keyboard.press('Enter');
    await a.page.waitForSelector(`#chat-title:text-is("${b.name}")`);
    await b.page.keyboard.press('Escape');
    await b.page.waitForSelector(`${pp}:not([open])`, { state: 'attached' });
    expect(await b.page.evaluate(() => document.activeElement?.id)).toBe('people-btn');
    for (const e of allErrors) expect(e).toEqual([]);
  });
});

describe('web client: themes and accessibility', () => {
  for (const scheme of ['light', 'dark'] as const) {
    it(`${scheme}: sign-in, the conversation list with an open chat, and the dialogs pass axe-core (no serious or critical violations)`, async () => {
      const ctx = await browser.newContext({ viewport: { width: 1100, height: 760 }, colorScheme: scheme });
      contexts.push(ctx);
      const { page, errors } = await newPage(ctx, srv.http);
      const bg = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      const lum = (css: string) => {
        const [r, g, b] = css.match(/\d+/g)!.map(Number);
        return (0.2126 * r! + 0.7152 * g! + 0.0722 * b!) / 255;
      };
      // The theme follows the system's.
      if (scheme === 'dark') expect(lum(bg)).toBeLessThan(0.2);
      else expect(lum(bg)).toBeGreaterThan(0.8);
      await expectAccessible(page, `${scheme} sign-in`);

      const name = uniqueName('ax');
      await signUp(page, name);
      const peer = await user('axp');
      await openChatWith(peer.page, name);
      await sendText(peer.page, 'hello, are you there?');
      await sendText(peer.page, 'a second line from me');
      await page.locator('#conv-list li.conv').waitFor();
      await openConversation(page, peer.name);
      await sendText(page, `@${peer.name} yes, here!`);
      await page.waitForSelector('#msg-list li.msg.mine[data-state]:not([data-state=pending])');
      await page.click(`#msg-list li.msg:has(.body:text-is("hello, are you there?"))`); // its actions open
      await expectAccessible(page, `${scheme} conversation`);

      await page.click('#new-chat-btn');
      await expectAccessible(page, `${scheme} new chat dialog`);
      await page.keyboard.press('Escape');
      await page.click('#new-group-btn');
      await expectAccessible(page, `${scheme} new group dialog`);
      await page.keyboard.press('Escape');
      await page.click('#help-btn');
      await expectAccessible(page, `${scheme} help dialog`);
      await page.keyboard.press('Escape');
      // The message's actions are still open (the dialogs took the Esc presses).
      await page.click('#msg-list li.msg.open:has(.body:text-is("hello, are you there?")) button[data-action=report]');
      await page.waitForSelector('#report-dialog[open]');
      await expectAccessible(page, `${scheme} report dialog`);
      await page.keyboard.press('Escape');
      expect(errors).toEqual([]);
    });
  }
});

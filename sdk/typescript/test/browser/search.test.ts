import { afterAll, afterEach, beforeAll, describe, expect, it, inject } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startServer, waitFor, type RunningServer } from '../helpers/server.js';
import { expectAccessible, launch, newPage, openConversation, sendText, signIn } from '../helpers/browser.js';
import { closeClients, connect, newUser, type TestUser } from '../helpers/users.js';

// Message search in the web client (search.js): the dialog, its results with
// the matched words marked, paging, and opening a result far back in history;
// what the server leaves out (a recall, a group's messages from before one
// joined) stays out; a server with search off says so.
let srv: RunningServer;
let browser: Browser;
const contexts: BrowserContext[] = [];
const allErrors: string[][] = [];

beforeAll(async () => {
  [srv, browser] = await Promise.all([startServer(inject('parleyBin')), launch()]);
});
afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await srv?.dispose();
});
afterEach(() => closeClients());

/** A browser page signed in as u (registered by the test). */
async function pageFor(s: RunningServer, u: TestUser): Promise<Page> {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 760 } });
  contexts.push(ctx);
  const { page, errors } = await newPage(ctx, s.http);
  allErrors.push(errors);
  await signIn(page, u.id, u.password);
  await page.waitForSelector('#banner', { state: 'hidden' });
  return page;
}

const dlg = '#search-dialog';

/** Searches from the dialog (opened with the shortcut) and waits for the answer. */
async function search(page: Page, query: string, phrase = false): Promise<void> {
  if (!(await page.$(`${dlg}[open]`))) {
    await page.keyboard.press('Control+Shift+F');
    await page.waitForSelector(`${dlg}[open]`);
  }
  await page.fill('#search-input', query);
  if ((await page.isChecked('#search-phrase')) !== phrase) await page.click('#search-phrase');
  await page.press('#search-input', 'Enter');
  await page.waitForSelector(`${dlg}:not([aria-busy])`);
}

/** The results shown: conversation, sender, the snippet, and its marked words. */
const results = (page: Page) =>
  page.$$eval(`${dlg} .search-hit`, (els) =>
    els.map((e) => ({
      conv: e.querySelector('.sh-conv')?.textContent ?? '',
      from: e.querySelector('.sh-from')?.textContent ?? '',
      snippet: e.querySelector('.sh-snippet')?.textContent ?? '',
      marks: Array.from(e.querySelectorAll(".sh-snippet mark")).map((m) => m.textContent ?? ''),
      seq: Number((e as HTMLElement).dataset.seq),
    })),
  );

/** Searches again until query shows n results (the index follows the store a moment later). */
async function searchUntil(page: Page, query: string, n: number, phrase = false): Promise<Awaited<ReturnType<typeof results>>> {
  let got: Awaited<ReturnType<typeof results>> = [];
  await waitFor(
    async () => {
      await search(page, query, phrase);
      got = await results(page);
      return got.length === n;
    },
    15_000,
    `"${query}" to show ${n} results`,
  );
  return got;
}

const status = (page: Page) => page.textContent('#search-status');

describe('web client: message search', () => {
  it('finds words in several scripts, marks them, pages, opens a result far back in history; a recalled message is not found', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    // Bob writes from another device (the SDK in Node): the first message of
    // 80, then filler, then text in other scripts.
    const b = connect(srv, bob);
    await b.waitReady(5000);
    await b.sendText(alice.id, '🎉🚲 Wir treffen uns an der Straße um neun');
    for (let i = 2; i <= 77; i++) await b.sendText(alice.id, `filler message ${i}`);
    await b.sendText(alice.id, '我们明天在图书馆门口见面');
    await b.sendText(alice.id, 'Встреча у старого моста');
    const last = await b.sendText(alice.id, 'Rendez-vous à l’hôtel <b>tonight</b>');
    // Alice's phone got them all: the web client, new, starts from there and
    // loads older history only as needed.
    const phone = connect(srv, alice);
    await waitFor(async () => (await phone.conversations()).find((c) => c.conversationId === last.conversationId)?.deliveredSeq === last.seq, 10_000, 'delivered to the phone');
    phone.close();

    const page = await pageFor(srv, alice);
    await openConversation(page, bob.id);
    await sendText(page, 'the lighthouse code is 4711');
    await page.waitForSelector('#msg-list li.msg.mine:has(.body:text-is("the lighthouse code is 4711"))[data-state]:not([data-state=pending])');
    expect(await page.$('#msg-list li.msg[data-seq="1"]')).toBeNull(); // far back: not loaded

    // Before any search: the dialog invites one; it is accessible, in the light and dark themes.
    await page.keyboard.press('Control+Shift+F');
    await page.waitForSelector(`${dlg}[open]`);
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('search-input');
    expect(await status(page)).toBe('Find messages in your conversations.');

    // Words: accents and case do not matter; the match is marked after emoji and ß.
    const [strasse] = await searchUntil(page, 'STRASSE', 1);
    expect(strasse).toMatchObject({ conv: bob.id, seq: 1, marks: ['Straße'] });
    expect(strasse!.snippet).toContain('🎉🚲 Wir treffen uns an der Straße');
    expect(await status(page)).toBe('1 message found.');
    await expectAccessible(page, 'search results (light)');
    await page.emulateMedia({ colorScheme: 'dark' });
    await expectAccessible(page, 'search results (dark)');
    await page.emulateMedia({ colorScheme: 'light' });

    // Chinese by substring, Cyrillic by word; markup in a message stays text.
    expect((await searchUntil(page, '图书', 1))[0]!.marks.join('')).toContain('图书');
    expect((await searchUntil(page, 'моста', 1))[0]!.marks).toEqual(['моста']);
    const [html] = await searchUntil(page, 'tonight', 1);
    expect(html!.snippet).toContain('<b>tonight</b>');
    expect(await page.$(`${dlg} .sh-snippet b`)).toBeNull();
    // A phrase must be in order: none found says so.
    await searchUntil(page, 'an der straße', 1, true);
    await search(page, 'straße der an', true);
    expect(await results(page)).toEqual([]);
    expect(await status(page)).toBe('No messages match.');

    // Paging: 20 at a time, "More" adds the next page and moves the focus to it.
    const first = await searchUntil(page, 'filler', 20);
    expect(first.map((h) => h.seq)).toEqual(Array.from({ length: 20 }, (_, i) => 77 - i)); // newest first
    expect(await status(page)).toContain('20 messages found, more');
    await page.click('#search-more');
    await waitFor(async () => (await results(page)).length === 40, 10_000, 'the second page');
    expect((await results(page))[20]!.seq).toBe(57);
    expect(await page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.seq)).toBe('57');
    expect(await status(page)).toContain('40 messages found');

    // The recall: found before, not after.
    const [secret] = await searchUntil(page, 'lighthouse', 1);
    expect(secret).toMatchObject({ from: 'You', marks: ['lighthouse'] });
    await page.keyboard.press('Escape');
    await page.waitForSelector(`${dlg}:not([open])`, { state: 'attached' });
    await page.click('#msg-list li.msg.mine:has(.body:text-is("the lighthouse code is 4711"))');
    await page.click('#msg-list li.msg.open button[data-action=recall]');
    await page.waitForSelector('#msg-list li.msg.recalled');
    await searchUntil(page, 'lighthouse', 0);
    expect(await status(page)).toBe('No messages match.');

    // Open message 1 of 81 by keyboard: ↓ from the box to the result, Enter. The view pages
    // back to it, scrolls it into view, flashes and focuses it.
    await searchUntil(page, 'strasse', 1);
    await page.press('#search-input', 'ArrowDown');
    expect(await page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.seq)).toBe('1');
    await page.keyboard.press('Enter');
    await page.waitForSelector(`${dlg}:not([open])`, { state: 'attached' });
    const target = page.locator('#msg-list li.msg[data-seq="1"]');
    await target.waitFor();
    expect(await target.locator('.body').textContent()).toBe('🎉🚲 Wir treffen uns an der Straße um neun');
    await waitFor(async () => (await page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset.seq)) === '1', 10_000, 'message 1 focused');
    await waitFor(
      async () =>
        page.evaluate(() => {
          const box = document.getElementById('messages')!.getBoundingClientRect();
          const m = document.querySelector('#msg-list li.msg[data-seq="1"]')!.getBoundingClientRect();
          return m.top >= box.top - 1 && m.bottom <= box.bottom + 1;
        }),
      10_000,
      'message 1 scrolled into view',
    );
    expect(await page.$$eval('#msg-list li.msg', (l) => l.length)).toBeGreaterThanOrEqual(80); // the history between is loaded, in order
    expect(await page.$eval('#chat-title', (e) => e.textContent)).toBe(bob.id);

    // Searching the open conversation only: the option names it.
    await page.keyboard.press('Control+Shift+F');
    await page.waitForSelector(`${dlg}[open]`);
    expect(await page.textContent('#search-scope-open')).toBe(`This conversation (${bob.id})`);
    await page.selectOption('#search-scope', 'open');
    await searchUntil(page, 'моста', 1);
    await page.keyboard.press('Escape');
    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('a member who joined a group later does not find what was said before', async () => {
    const ann = await newUser(srv, 'ann');
    const ben = await newUser(srv, 'ben');
    const cat = await newUser(srv, 'cat');
    const a = connect(srv, ann);
    await a.waitReady(5000);
    const g = await a.createGroup({ name: 'harbour trip', userIds: [ben.id] });
    await a.sendText(g.conversationId, 'harbour plans before cat joined');
    await a.addMembers(g.conversationId, [cat.id]);
    await a.sendText(g.conversationId, 'harbour plans after cat joined');
    // Ann finds both: the index has them.
    await waitFor(async () => (await a.search('harbour')).hits.length === 2, 10_000, 'ann finds both');

    const page = await pageFor(srv, cat);
    const [hit] = await searchUntil(page, 'harbour', 1);
    expect(hit).toMatchObject({ conv: 'harbour trip', from: ann.id, snippet: 'harbour plans after cat joined', marks: ['harbour'] });
    // "Search this conversation" of a group one reads works the same.
    await page.keyboard.press('Escape');
    await openConversation(page, 'harbour trip');
    await page.click('#search-btn');
    await page.waitForSelector(`${dlg}[open]`);
    await page.selectOption('#search-scope', 'open');
    await search(page, 'plans');
    expect((await results(page)).map((r) => r.snippet)).toEqual(['harbour plans after cat joined']);
    for (const e of allErrors) expect(e).toEqual([]);
  });
});

describe('web client: search off', () => {
  it('says search is off', async () => {
    const off = await startServer(inject('parleyBin'), undefined, { config: 'search: off\n' });
    try {
      const u = await newUser(off, 'dora');
      const page = await pageFor(off, u);
      await page.click('#search-btn');
      await page.waitForSelector(`${dlg}[open]`);
      await page.press('#search-input', 'Enter'); // nothing typed
      expect(await status(page)).toBe('Type the words to find.');
      await search(page, 'anything');
      expect(await status(page)).toBe('Search is not available: it is off on this server, or this search took too long (try rarer words).');
      expect(await results(page)).toEqual([]);
      await expectAccessible(page, 'search off');
    } finally {
      await off.dispose();
    }
  });
});

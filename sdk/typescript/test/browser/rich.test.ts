import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import WebSocket from 'ws';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { ParleyClient, directConversationId, login, register } from '../../src/index.js';
import { startServer, uniqueName, waitFor, type RunningServer } from '../helpers/server.js';
import { launch, newPage, openChatWith, openConversation, screenshot, sendText, signUp } from '../helpers/browser.js';

// Rich messages in the web client: reactions, replies, mentions, pins,
// threads and streamed messages, seen live by another user and after a reload.
let srv: RunningServer;
let browser: Browser;
const contexts: BrowserContext[] = [];
const allErrors: string[][] = [];
const sdkClients: ParleyClient[] = [];

beforeAll(async () => {
  [srv, browser] = await Promise.all([startServer(inject('parleyBin')), launch()]);
});
afterAll(async () => {
  for (const c of sdkClients) c.close();
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await srv?.dispose();
});

async function user(prefix: string, viewport = { width: 1100, height: 760 }): Promise<{ ctx: BrowserContext; page: Page; name: string; errors: string[] }> {
  const ctx = await browser.newContext({ viewport });
  contexts.push(ctx);
  const { page, errors } = await newPage(ctx, srv.http);
  allErrors.push(errors);
  const name = uniqueName(prefix);
  await signUp(page, name);
  return { ctx, page, name, errors };
}

async function createGroup(page: Page, name: string, members: string[]): Promise<void> {
  await page.click('#new-group-btn');
  await page.fill('#group-name', name);
  await page.fill('#group-members', members.join(', '));
  await page.click('#group-ok');
  await page.waitForSelector(`#chat-title:text-is("${name}")`);
}

/** A selector part matching an element whose whole text is t (mentions split a body into several text nodes, which :text-is does not join). */
const fullText = (t: string) => `:text-matches("${('^' + t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&') + '$').replace(/\\/g, '\\\\').replace(/"/g, '\\"')}")`;

/** The message bubble (main timeline) whose text is t. */
const bubble = (page: Page, t: string) => page.locator(`#msg-list li.msg:has(> .body${fullText(t)})`);

/** Opens a message's actions (a tap) and clicks one. */
async function act(page: Page, t: string, action: string): Promise<void> {
  await openActions(page, t);
  await page.click(`#msg-list li.msg.open button[data-action=${action}]`);
}

/** Shows a message's actions (a tap, unless they show already). */
async function openActions(page: Page, t: string): Promise<void> {
  if (!((await bubble(page, t).getAttribute('class')) ?? '').split(' ').includes('open')) await bubble(page, t).click();
  await bubble(page, t).and(page.locator('.open')).waitFor();
}

/** A message's reaction chips: emoji -> [count, mine]. */
async function chips(page: Page, t: string): Promise<Record<string, [number, boolean]>> {
  return bubble(page, t).evaluate((li) => {
    const out: Record<string, [number, boolean]> = {};
    for (const c of Array.from(li.querySelectorAll<HTMLElement>('.reactions .chip'))) {
      out[c.dataset.emoji!] = [Number(c.querySelector('.count')!.textContent), c.classList.contains('mine')];
    }
    return out;
  });
}

async function waitChips(page: Page, t: string, want: Record<string, [number, boolean]>, what: string): Promise<void> {
  await waitFor(async () => JSON.stringify(await chips(page, t).catch(() => ({}))) === JSON.stringify(want), 10000, what);
}

describe('rich messages in the web client (Chromium)', () => {
  it('one user reacts, replies and mentions; the other sees it live and after a reload', async () => {
    const ann = await user('ann');
    const ben = await user('ben');
    await createGroup(ann.page, 'lunch crew', [ben.name]);
    await sendText(ann.page, 'lunch today?');
    await sendText(ann.page, 'or tomorrow');
    await openConversation(ben.page, 'lunch crew');
    await bubble(ben.page, 'or tomorrow').waitFor();

    // Ben reacts with the picker; Ann sees the count live.
    await openActions(ben.page, 'lunch today?');
    await ben.page.click('#msg-list li.msg.open .picker button[data-react="👍"]');
    await waitChips(ben.page, 'lunch today?', { '👍': [1, true] }, 'ben sees his 👍');
    await waitChips(ann.page, 'lunch today?', { '👍': [1, false] }, 'ann sees ben’s 👍 live');
    // Ann adds hers by clicking the chip; both see two.
    await bubble(ann.page, 'lunch today?').locator('.chip[data-emoji="👍"]').click();
    await waitChips(ann.page, 'lunch today?', { '👍': [2, true] }, 'ann’s 👍 is counted');
    await waitChips(ben.page, 'lunch today?', { '👍': [2, true] }, 'ben sees two');
    // Ben adds a second emoji and takes it back.
    await openActions(ben.page, 'or tomorrow');
    await ben.page.click('#msg-list li.msg.open .picker button[data-react="🎉"]');
    await waitChips(ann.page, 'or tomorrow', { '🎉': [1, false] }, 'ann sees 🎉');
    await bubble(ben.page, 'or tomorrow').locator('.chip[data-emoji="🎉"]').click();
    await waitChips(ann.page, 'or tomorrow', {}, 'the 🎉 is gone for ann');

    // Ben replies to "lunch today?": the quote shows above his message for both.
    await act(ben.page, 'lunch today?', 'reply');
    await ben.page.waitForSelector('#reply-bar:not([hidden]) #reply-text:text-is("lunch today?")');
    await sendText(ben.page, 'yes, at noon');
    await ben.page.waitForSelector('#reply-bar', { state: 'hidden' });
    for (const p of [ben.page, ann.page]) {
      const quote = bubble(p, 'yes, at noon').locator('.reply-quote');
      await quote.waitFor();
      expect(await quote.locator('.quote-text').textContent()).toBe('lunch today?');
    }
    expect(await bubble(ann.page, 'yes, at noon').locator('.quote-from').textContent()).toBe('You');
    // A click on the quote brings the original into view, flashing.
    await bubble(ann.page, 'yes, at noon').locator('.reply-quote').click();
    await ann.page.waitForSelector('#msg-list li.msg.flash:has(> .body:text-is("lunch today?"))');

    // Ann goes to another conversation; Ben mentions her with the @ picker.
    await openChatWith(ann.page, ben.name);
    await ben.page.click('#composer-input');
    await ben.page.keyboard.type('@' + ann.name.slice(0, 3));
    await ben.page.waitForSelector(`#mention-list:not([hidden]) li[data-user="${ann.name}"]`);
    expect(await ben.page.$$eval('#mention-list li', (els) => els.map((e) => (e as HTMLElement).dataset.user))).not.toContain(ben.name);
    await ben.page.keyboard.press('Enter'); // picks the highlighted member, does not send
    expect(await ben.page.inputValue('#composer-input')).toBe(`@${ann.name} `);
    await ben.page.keyboard.type('bring the menu');
    await ben.page.keyboard.press('Enter');
    const mentionText = `@${ann.name} bring the menu`;
    await bubble(ben.page, mentionText).waitFor();
    // Ann: an "@" badge on the group in her list, then the message highlighted.
    const row = ann.page.locator('#conv-list li.conv:has(.title:text-is("lunch crew"))');
    await row.locator('.badge.mention:text-is("@1")').waitFor();
    await screenshot(ann.page, 'rich-mention-badge');

    // Both reload: what they saw comes back from the server.
    await ann.page.reload();
    await ann.page.waitForSelector('#banner', { state: 'hidden' });
    await ann.page.locator('#conv-list li.conv:has(.title:text-is("lunch crew")) .badge.mention:text-is("@1")').waitFor();
    await openConversation(ann.page, 'lunch crew');
    await bubble(ann.page, mentionText).waitFor();
    expect(await bubble(ann.page, mentionText).getAttribute('class')).toContain('mentioned');
    expect(await bubble(ann.page, mentionText).locator('.mention.you').textContent()).toBe('@' + ann.name);
    await waitChips(ann.page, 'lunch today?', { '👍': [2, true] }, 'ann’s chips after a reload');
    expect(await bubble(ann.page, 'yes, at noon').locator('.quote-text').textContent()).toBe('lunch today?');
    // Read now: the badge is gone.
    await ann.page.locator('#conv-list li.conv:has(.title:text-is("lunch crew")) .badge.mention').waitFor({ state: 'detached' });
    await screenshot(ann.page, 'rich-ann-after-reload');

    await ben.page.reload();
    await ben.page.waitForSelector('#banner', { state: 'hidden' });
    await openConversation(ben.page, 'lunch crew');
    await waitChips(ben.page, 'lunch today?', { '👍': [2, true] }, 'ben’s chips after a reload');
    expect(await bubble(ben.page, 'or tomorrow').locator('.chip').count()).toBe(0);
    expect(await bubble(ben.page, 'yes, at noon').locator('.quote-text').textContent()).toBe('lunch today?');
    // Ann's reaction after the reload reaches Ben live.
    await openActions(ann.page, 'or tomorrow');
    await ann.page.click('#msg-list li.msg.open .picker button[data-react="❤️"]');
    await waitChips(ben.page, 'or tomorrow', { '❤️': [1, false] }, 'ben sees ❤️ after reloading');

    // Ann recalls the original: Ben's quote says so.
    await act(ann.page, 'lunch today?', 'recall');
    await ben.page.waitForSelector('#msg-list li.msg .reply-quote.recalled .quote-text:text-is("Message recalled")');
    await screenshot(ben.page, 'rich-ben');
    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('pins show in a bar for everyone; a thread opens in a panel with its replies; counts follow', async () => {
    const ann = await user('pia');
    const ben = await user('tom');
    await createGroup(ann.page, 'planning', [ben.name]);
    await sendText(ann.page, 'the plan');
    await sendText(ann.page, 'other talk');
    await openConversation(ben.page, 'planning');
    await bubble(ben.page, 'other talk').waitFor();

    // The owner pins; a plain member has no pin action.
    await act(ann.page, 'the plan', 'pin');
    for (const p of [ann.page, ben.page]) {
      await p.waitForSelector('#pinned-bar:not([hidden]) .pin-latest:text-is("the plan")');
    }
    await openActions(ben.page, 'the plan');
    expect(await ben.page.locator('#msg-list li.msg.open button[data-action=pin]').count()).toBe(0);
    await ben.page.waitForSelector('#msg-list li.sys:text-is("' + ann.name + ' pinned a message")');

    // Ben replies in a thread.
    await act(ben.page, 'the plan', 'thread');
    await ben.page.waitForSelector('#thread-panel:not([hidden]) #thread-root .body:text-is("the plan")');
    await ben.page.fill('#thread-input', 'step one');
    await ben.page.press('#thread-input', 'Enter');
    await ben.page.fill('#thread-input', 'step two');
    await ben.page.press('#thread-input', 'Enter');
    await ben.page.waitForSelector('#thread-list li.msg:not(.pending) .body:text-is("step two")');
    // Not in the main timeline; the root counts them, for both.
    expect(await ben.page.locator('#msg-list .body:text-is("step one")').count()).toBe(0);
    for (const p of [ben.page, ann.page]) {
      await bubble(p, 'the plan').locator('.thread-link:text-matches("^2 replies")').waitFor();
    }
    expect(await ann.page.locator('#msg-list .body:text-is("step one")').count()).toBe(0);
    // Ann opens the thread from the count and answers there.
    await bubble(ann.page, 'the plan').locator('.thread-link').click();
    await ann.page.waitForSelector('#thread-list .body:text-is("step two")');
    expect(await ann.page.$$eval('#thread-list li.msg .body', (els) => els.map((e) => e.textContent))).toEqual(['step one', 'step two']);
    await ann.page.fill('#thread-input', 'agreed');
    await ann.page.press('#thread-input', 'Enter');
    await ben.page.waitForSelector('#thread-list .body:text-is("agreed")');
    await bubble(ben.page, 'the plan').locator('.thread-link:text-matches("^3 replies")').waitFor();
    await screenshot(ben.page, 'rich-thread');

    // After a reload: the pin and the thread's summary come from the server.
    await ben.page.reload();
    await ben.page.waitForSelector('#banner', { state: 'hidden' });
    await openConversation(ben.page, 'planning');
    await ben.page.waitForSelector('#pinned-bar:not([hidden]) .pin-latest:text-is("the plan")');
    await bubble(ben.page, 'the plan').locator('.thread-link:text-matches("^3 replies")').waitFor();
    expect(await ben.page.locator('#msg-list .body:text-is("agreed")').count()).toBe(0);
    await bubble(ben.page, 'the plan').locator('.thread-link').click();
    await ben.page.waitForSelector('#thread-list .body:text-is("agreed")');
    expect(await ben.page.$$eval('#thread-list li.msg .body', (els) => els.map((e) => e.textContent))).toEqual(['step one', 'step two', 'agreed']);
    await ben.page.click('#thread-close');
    await ben.page.waitForSelector('#thread-panel', { state: 'hidden' });

    // The pinned bar lists the pins; unpinning from it clears it everywhere.
    await ann.page.click('#pinned-toggle');
    await ann.page.click('#pinned-list li.pin button[data-action=unpin]');
    for (const p of [ann.page, ben.page]) await p.waitForSelector('#pinned-bar', { state: 'hidden' });
    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('a bot’s streamed message shows live in one bubble with a cursor, then as the stored message; incomplete is marked', async () => {
    const viewer = await user('val');
    const botName = uniqueName('bot');
    const t = await register({ baseUrl: srv.http }, botName, 'pw-bot-secret');
    const res = await fetch(`${srv.http}/v1/admin/users/${encodeURIComponent(t.user_id)}`, {
      method: 'PATCH',
      headers: { 'X-Api-Key': srv.adminKey(), 'Content-Type': 'application/json' },
      body: JSON.stringify({ bot: true }),
    });
    expect(res.ok).toBe(true);
    const { token } = await login({ baseUrl: srv.http }, botName, 'pw-bot-secret');
    const bot = new ParleyClient({ url: srv.ws, token, deviceId: 'bot-dev', deviceType: 'node', WebSocket });
    sdkClients.push(bot);
    await bot.waitReady(5000);
    await bot.sendText(viewer.name, 'hello, ask me anything');
    await openConversation(viewer.page, botName);

    const st = await bot.openStream({ to: viewer.name });
    await st.append('Thinking');
    await viewer.page.waitForSelector('#msg-list li.msg.streaming .body:has-text("Thinking") .cursor');
    await st.append(' about it');
    await st.append(' carefully.');
    await viewer.page.waitForSelector('#msg-list li.msg.streaming .body:has-text("Thinking about it carefully.")');
    expect(await viewer.page.locator('#msg-list li.msg.streaming').count()).toBe(1); // one bubble
    await screenshot(viewer.page, 'rich-streaming');
    await st.finish();
    await bubble(viewer.page, 'Thinking about it carefully.').waitFor();
    expect(await viewer.page.locator('#msg-list li.msg.streaming').count()).toBe(0);

    const ab = await bot.openStream({ to: viewer.name });
    await ab.append('I was about to');
    await viewer.page.waitForSelector('#msg-list li.msg.streaming .body:has-text("I was about to")');
    await ab.abandon();
    await viewer.page.waitForSelector('#msg-list li.msg.incomplete:has(> .body:text-is("I was about to")) .incomplete-note');
    expect(await viewer.page.locator('#msg-list li.msg.streaming').count()).toBe(0);
    await viewer.page.reload();
    await viewer.page.waitForSelector('#banner', { state: 'hidden' });
    await openConversation(viewer.page, botName);
    await viewer.page.waitForSelector('#msg-list li.msg.incomplete:has(> .body:text-is("I was about to"))');
    await bubble(viewer.page, 'Thinking about it carefully.').waitFor();

    // Markup in what others write shows as text: a reaction "emoji" (any 1-32 bytes without
    // spaces), streamed text, a reply's quote of it.
    const evil = '<img/src=x/onerror=__x=1>'; // 25 bytes
    const hello = (await viewer.page.getAttribute(`#msg-list li.msg:has(> .body:text-is("hello, ask me anything"))`, 'data-seq'))!;
    await bot.react(directConversationId(t.user_id, viewer.name), Number(hello), evil);
    const chip = bubble(viewer.page, 'hello, ask me anything').locator('.chip .emoji');
    await chip.waitFor();
    expect(await chip.textContent()).toBe(evil);
    const hs = await bot.openStream({ to: viewer.name, replyTo: Number(hello) });
    await hs.append('<b>not bold</b> ' + evil);
    await viewer.page.waitForSelector('#msg-list li.msg.streaming .body:has-text("<b>not bold</b>")');
    const done = await hs.finish();
    await bubble(viewer.page, '<b>not bold</b> ' + evil).waitFor();
    await bot.sendText(viewer.name, 'quoting it', { replyTo: done.seq });
    await bubble(viewer.page, 'quoting it').locator('.quote-text').waitFor();
    expect(await bubble(viewer.page, 'quoting it').locator('.quote-text').textContent()).toBe('<b>not bold</b> ' + evil);
    expect(await viewer.page.locator('#msg-list b, #msg-list img').count()).toBe(0);
    expect(await viewer.page.evaluate(() => (window as unknown as { __x?: number }).__x)).toBeUndefined();
    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('is usable at phone width: the thread panel takes the screen, chips and quotes fit', async () => {
    const peer = uniqueName('pal');
    const pt = await register({ baseUrl: srv.http }, peer, 'pw-pal-secret');
    const p = await user('phoebe', { width: 375, height: 700 });
    await openChatWith(p.page, peer);
    const long = 'a fairly long message that will be quoted and reacted to on a narrow phone screen';
    await sendText(p.page, long);
    await bubble(p.page, long).locator('.meta .state').waitFor();
    await act(p.page, long, 'reply');
    await sendText(p.page, 'quoted');
    await bubble(p.page, 'quoted').locator('.reply-quote').waitFor();
    await openActions(p.page, long);
    await p.page.click('#msg-list li.msg.open .picker button[data-react="😂"]');
    await bubble(p.page, long).locator('.chip[data-emoji="😂"]').waitFor();
    await act(p.page, long, 'thread');
    await p.page.waitForSelector('#thread-panel:not([hidden])');
    const panel = await p.page.locator('#thread-panel').boundingBox();
    expect(panel!.width).toBeGreaterThanOrEqual(370);
    const overflow = await p.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    const send = await p.page.locator('#thread-send').boundingBox();
    expect(send!.x + send!.width).toBeLessThanOrEqual(375);
    await screenshot(p.page, 'rich-phone-thread');
    await p.page.click('#thread-close');
    void pt;
    for (const e of allErrors) expect(e).toEqual([]);
  });
});

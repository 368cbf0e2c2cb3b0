import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { createRequire } from 'node:module';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startServer, uniqueName, type RunningServer } from '../helpers/server.js';
import { launch, newPage, openChatWith, sendText, signUp } from '../helpers/browser.js';

// People in the web client (people.js): contacts with presence and last
// seen, friend requests both ways, removing, blocking, live on both sides.
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

interface User {
  page: Page;
  name: string;
}

async function user(prefix: string): Promise<User> {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 760 } });
  contexts.push(ctx);
  const { page, errors } = await newPage(ctx, srv.http);
  allErrors.push(errors);
  page.on('dialog', (d) => d.accept()); // removing and blocking a contact ask first
  const name = uniqueName(prefix);
  await signUp(page, name);
  return { page, name };
}

const dlg = '#people-dialog';
const item = (page: Page, list: string, u: string) => page.locator(`${dlg} .pp-${list} li[data-user="${u}"]`);

async function openPeople(page: Page): Promise<void> {
  await page.click('#people-btn');
  await page.waitForSelector(`${dlg}[open]`);
}

async function request(page: Page, to: string, note = ''): Promise<void> {
  await page.fill(`${dlg} input[name=user]`, to);
  await page.fill(`${dlg} input[name=note]`, note);
  await page.click(`${dlg} button[value=request]`);
}

/** The user ids in one of the dialog's lists. */
const names = (page: Page, list: string) => page.$$eval(`${dlg} .pp-${list} li[data-user]`, (els) => els.map((e) => (e as HTMLElement).dataset.user));

describe('People in the web client (Chromium)', () => {
  it('a friend request with a note shows live at the other side; accepted, both lists update; presence, last seen, chat', async () => {
    const a = await user('ada');
    const b = await user('bea');
    await openPeople(a.page);
    expect(await a.page.isVisible(`${dlg} .pp-friends .pp-empty`)).toBe(true);

    // The note is the requester's text: shown as text, never as markup.
    const note = '<b>Ada</b> from the climbing club';
    await request(a.page, b.name, note);
    await a.page.waitForSelector(`${dlg} .pp-status:text-is("Friend request sent to ${b.name}.")`);
    await item(a.page, 'outgoing', b.name).waitFor();

    // B's People button counts the request at once, without opening anything.
    await b.page.waitForSelector('#people-btn .pp-badge:text-is("1")');
    expect(await b.page.getAttribute('#people-btn', 'aria-label')).toBe('People: 1 friend request');
    await openPeople(b.page);
    const req = item(b.page, 'incoming', a.name);
    expect(await req.locator('.pp-note').textContent()).toBe(note);
    expect(await req.locator('.pp-note b').count()).toBe(0);
    const require = createRequire(import.meta.url);
    await b.page.addScriptTag({ path: require.resolve('axe-core/axe.min.js') });
    const violations = await b.page.evaluate(async (sel) => {
      // @ts-expect-error axe is the global the script defines
      const r = await window.axe.run(sel, { resultTypes: ['violations'] });
      return r.violations.filter((v: { impact: string }) => v.impact === 'serious' || v.impact === 'critical').map((v: { id: string }) => v.id);
    }, dlg);
    expect(violations).toEqual([]);

    // B accepts: both sides list each other as contacts, online.
    await req.locator('button[data-action=accept]').click();
    await item(b.page, 'friends', a.name).locator('.pp-seen:text-is("online")').waitFor();
    await b.page.waitForSelector('#people-btn .pp-badge', { state: 'hidden' });
    await item(a.page, 'friends', b.name).locator('.pp-seen:text-is("online")').waitFor();
    expect(await names(a.page, 'outgoing')).toEqual([]);
    expect(await names(b.page, 'incoming')).toEqual([]);

    // B goes away: A sees when B was last seen.
    await b.page.close();
    await item(a.page, 'friends', b.name).locator('.pp-seen:text-is("last seen just now")').waitFor();
    expect(await item(a.page, 'friends', b.name).locator('.dot').getAttribute('data-presence')).toBe('offline');

    // A chat starts from the contact.
    await item(a.page, 'friends', b.name).locator('button[data-action=chat]').click();
    await a.page.waitForSelector(dlg, { state: 'hidden' });
    await a.page.waitForSelector(`#chat-title:text-is("${b.name}")`);

    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('cancel, decline and remove show live on the other side; a blocked user’s messages are refused until unblocked', async () => {
    const a = await user('abe');
    const b = await user('bo');
    const c = await user('cy');
    await openPeople(a.page);
    await openPeople(b.page);
    await openPeople(c.page);

    // A withdraws a request: it leaves B's screen.
    await request(a.page, b.name);
    await item(b.page, "incoming", a.name).waitFor();
    await item(a.page, 'outgoing', b.name).locator('button[data-action=cancel]').click();
    await item(b.page, 'incoming', a.name).waitFor({ state: 'detached' });
    await item(a.page, 'outgoing', b.name).waitFor({ state: 'detached' });

    // C declines A's request: it leaves A's screen.
    await request(a.page, c.name, 'hi');
    await item(c.page, 'incoming', a.name).locator('button[data-action=decline]').click();
    await item(a.page, 'outgoing', c.name).waitFor({ state: 'detached' });
    await item(c.page, 'incoming', a.name).waitFor({ state: 'detached' });

    // Asking someone who asked you makes you friends at once; removing ends it on both screens.
    await request(b.page, a.name);
    await item(a.page, 'incoming', b.name).waitFor();
    await request(a.page, b.name);
    await item(a.page, 'friends', b.name).waitFor();
    await item(b.page, 'friends', a.name).waitFor();
    await item(a.page, 'friends', b.name).locator('button[data-action=remove]').click();
    await item(b.page, 'friends', a.name).waitFor({ state: 'detached' });
    await item(a.page, 'friends', b.name).waitFor({ state: 'detached' });

    // A blocks B: B's message to A is refused (as any refusal) and A never gets it.
    await a.page.fill(`${dlg} input[name=user]`, b.name);
    await a.page.click(`${dlg} button[value=block]`);
    await item(a.page, 'blocked', b.name).waitFor();
    await b.page.keyboard.press('Escape');
    await openChatWith(b.page, a.name);
    await sendText(b.page, 'are you there?');
    await b.page.waitForSelector('#msg-list li.pending[data-state=failed]:has(.why:text-is("permission denied"))');
    // B's friend request goes nowhere either.
    await openPeople(b.page);
    await request(b.page, a.name, 'please');
    await item(b.page, 'outgoing', a.name).waitFor();

    // A unblocks B: B's next message arrives.
    await item(a.page, 'blocked', b.name).locator('button[data-action=unblock]').click();
    await item(a.page, 'blocked', b.name).waitFor({ state: 'detached' });
    expect(await names(a.page, 'incoming')).toEqual([]); // the request sent while blocked was dropped
    await b.page.keyboard.press('Escape');
    await sendText(b.page, 'hello again');
    await a.page.keyboard.press('Escape');
    await a.page.waitForSelector(`#conv-list li.conv:has(.title:text-is("${b.name}")) .last:text-is("hello again")`);
    await a.page.click(`#conv-list li.conv:has(.title:text-is("${b.name}"))`);
    await a.page.waitForSelector('#msg-list li.msg .body:text-is("hello again")');
    expect(await a.page.locator('#msg-list li.msg .body:text-is("are you there?")').count()).toBe(0);

    for (const e of allErrors) expect(e).toEqual([]);
  });
});

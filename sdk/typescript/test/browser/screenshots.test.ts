// The screenshots of docs/web-client.md, taken from a real server and
// Chromium. Opt-in: PARLEY_SCREENSHOTS=1 writes them to docs/img/ (commit the
// result); without it this file runs nothing.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { repoRoot, startServer, waitFor, type RunningServer } from '../helpers/server.js';
import { launch, newPage, openChatWith, openConversation, screenshot, sendText, signUp } from '../helpers/browser.js';

const on = process.env.PARLEY_SCREENSHOTS === '1';
const out = join(repoRoot, 'docs/img');
const DESKTOP = { width: 1280, height: 800 };
const PHONE = { width: 390, height: 844 };

let srv: RunningServer;
let browser: Browser;
const contexts: BrowserContext[] = [];

describe.runIf(on)('screenshots for docs/web-client.md', () => {
  beforeAll(async () => {
    [srv, browser] = await Promise.all([startServer(inject('parleyBin')), launch()]);
    mkdirSync(out, { recursive: true });
  });
  afterAll(async () => {
    for (const c of contexts) await c.close().catch(() => {});
    await browser?.close();
    await srv?.dispose();
  });

  async function person(name: string): Promise<Page> {
    const ctx = await browser.newContext({ viewport: DESKTOP });
    contexts.push(ctx);
    const { page } = await newPage(ctx, srv.http);
    await signUp(page, name);
    return page;
  }

  /** Saves the page as docs/img/<name>.png (checked not blank), in the given theme. */
  async function shot(page: Page, name: string, scheme: 'light' | 'dark'): Promise<void> {
    await page.emulateMedia({ colorScheme: scheme });
    await page.mouse.move(0, page.viewportSize()!.height - 1); // no hover effects
    await page.evaluate(() => document.fonts.ready);
    await new Promise((r) => setTimeout(r, 300)); // smooth scrolls and transitions settle
    const png = await screenshot(page, name);
    await page.screenshot({ path: join(out, name + '.png') });
    expect(png.length).toBeLessThan(400_000);
  }

  it('the main screens at desktop and phone widths, light and dark', async () => {
    // The sign-in screen.
    const ctx = await browser.newContext({ viewport: DESKTOP });
    contexts.push(ctx);
    const { page: signin } = await newPage(ctx, srv.http);
    await signin.fill('#auth-user', 'maya');
    await shot(signin, 'web-signin-desktop-light', 'light');

    const ben = await person('ben');
    const cat = await person('cat');
    const maya = await person('maya');

    // A group with a few runs of messages, a reply and reactions.
    await maya.click('#new-group-btn');
    await maya.fill('#group-name', 'Weekend trip');
    await maya.fill('#group-members', 'ben, cat');
    await maya.click('#group-ok');
    await maya.waitForSelector('#chat-title:text-is("Weekend trip")');
    await sendText(maya, 'Who is in for the coast on Saturday?');
    for (const p of [ben, cat]) {
      await p.locator('#conv-list li.conv:has(.title:text-is("Weekend trip"))').waitFor();
      await openConversation(p, 'Weekend trip');
    }
    await sendText(ben, 'Me! I can drive.');
    await sendText(ben, 'The car takes four, with bags.');
    // (No emoji: the machines that take these may have no emoji font.)
    await cat.waitForSelector('#msg-list .body:text-is("The car takes four, with bags.")');
    await sendText(cat, 'Count me in, I will bring the map.');
    await maya.waitForSelector('#msg-list .body:text-is("Count me in, I will bring the map.")');
    await maya.click('#msg-list li.msg:has(.body:text-is("Me! I can drive."))');
    await maya.click('#msg-list li.msg.open button[data-action=reply]');
    await sendText(maya, 'Perfect, leaving at 8 then.');
    await sendText(maya, 'I will bring the snacks.');

    // A 1:1 with unread messages, so the list shows a badge.
    await openChatWith(ben, 'maya');
    await sendText(ben, 'Do you still have my tent?');
    await sendText(ben, 'No rush, just for Saturday.');
    await openChatWith(cat, 'maya');
    await sendText(cat, 'Photos from last time are up!');
    await maya.locator('#conv-list li.conv:has(.title:text-is("ben")) .badge.unread:text-is("2")').waitFor();
    await maya.waitForSelector('#msg-list li.msg.mine:has(.body:text-is("I will bring the snacks."))[data-state]:not([data-state=pending])');
    await waitFor(async () => (await maya.title()) === '(3) Parley', 10000, 'the title counts the unread');

    for (const scheme of ['light', 'dark'] as const) await shot(maya, `web-chat-desktop-${scheme}`, scheme);
    await maya.click('#help-btn');
    await shot(maya, 'web-shortcuts-desktop-dark', 'dark');
    await maya.keyboard.press('Escape');

    // People: cat is a contact, ben's request (with a note) waits.
    const people = async (p: Page) => {
      await p.click('#people-btn');
      await p.waitForSelector('#people-dialog[open]');
    };
    await people(cat);
    await cat.fill('#people-dialog .pp-request input[name=user]', 'maya');
    await cat.click('#people-dialog button[value=request]');
    await people(maya);
    await maya.click('#people-dialog .pp-incoming button[data-action=accept]');
    await maya.locator('#people-dialog .pp-friends li:has(.pp-name:text-is("cat"))').waitFor();
    await people(ben);
    await ben.fill('#people-dialog .pp-request input[name=user]', 'maya');
    await ben.fill('#people-dialog .pp-request input[name=note]', 'Ben from the climbing club');
    await ben.click('#people-dialog button[value=request]');
    await maya.locator('#people-dialog .pp-incoming li:has(.pp-name:text-is("ben"))').waitFor();
    await maya.locator('#people-dialog .pp-friends .pp-seen:text-is("online")').waitFor();
    await maya.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    for (const scheme of ['light', 'dark'] as const) await shot(maya, `web-people-desktop-${scheme}`, scheme);
    await maya.keyboard.press('Escape');

    // The group's members panel as its owner, one member's actions open.
    await openConversation(maya, 'Weekend trip');
    await maya.click('#members-btn');
    await maya.locator('#members-dialog li.gp-member[data-user="ben"]').waitFor();
    await maya.click('#members-dialog li.gp-member[data-user="ben"] .gp-manage');
    await maya.locator('#members-dialog li.gp-member[data-user="ben"] button[data-action=role]').waitFor();
    await maya.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    for (const scheme of ['light', 'dark'] as const) await shot(maya, `web-members-desktop-${scheme}`, scheme);

    // Phone: the members panel, the list, People, a conversation.
    await maya.setViewportSize(PHONE);
    await shot(maya, 'web-members-phone-light', 'light');
    await maya.keyboard.press('Escape');
    await maya.click('#back-btn');
    for (const scheme of ['light', 'dark'] as const) await shot(maya, `web-list-phone-${scheme}`, scheme);
    await people(maya);
    await maya.locator('#people-dialog .pp-incoming li').waitFor();
    await maya.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    await shot(maya, 'web-people-phone-dark', 'dark');
    await maya.keyboard.press('Escape');
    await openConversation(maya, 'ben');
    await sendText(maya, 'Yes, I will bring it along.');
    await maya.waitForSelector('#msg-list li.msg.mine:has(.body:text-is("Yes, I will bring it along."))[data-state]:not([data-state=pending])');
    for (const scheme of ['light', 'dark'] as const) await shot(maya, `web-chat-phone-${scheme}`, scheme);
  });
});

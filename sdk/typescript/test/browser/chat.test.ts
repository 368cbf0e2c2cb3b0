import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { register, rpc } from '../../src/index.js';
import { startServer, uniqueName, waitFor, type RunningServer } from '../helpers/server.js';
import { bubbles, launch, newPage, openChatWith, openConversation, screenshot, sendText, signIn, signUp } from '../helpers/browser.js';

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

async function user(prefix: string, viewport = { width: 1100, height: 760 }): Promise<{ ctx: BrowserContext; page: Page; name: string; errors: string[] }> {
  const ctx = await browser.newContext({ viewport });
  contexts.push(ctx);
  const { page, errors } = await newPage(ctx, srv.http);
  allErrors.push(errors);
  const name = uniqueName(prefix);
  await signUp(page, name);
  return { ctx, page, name, errors };
}

const msgState = (page: Page, text: string) =>
  page.$eval(`#msg-list li.msg.mine:has(.body:text-is("${text}"))`, (e) => (e as HTMLElement).dataset.state ?? '').catch(() => '');

describe('web client in Chromium', () => {
  it('two users chat; one closes the page, misses messages, comes back and sees them all, in order, once', async () => {
    const a = await user('alice');
    const b = await user('bob');

    await openChatWith(a.page, b.name);
    await sendText(a.page, 'hi bob');
    await waitFor(async () => (await msgState(a.page, 'hi bob')) === 'sent' || (await msgState(a.page, 'hi bob')) === 'delivered', 10000, 'sent');

    // Bob sees the conversation with an unread badge and the last message, opens it, reads it.
    const row = b.page.locator(`#conv-list li.conv:has(.title:text-is("${a.name}"))`);
    await row.locator('.badge.unread:text-is("1")').waitFor();
    expect(await row.locator('.last').textContent()).toBe('hi bob');
    await openConversation(b.page, a.name);
    expect(await bubbles(b.page)).toEqual(['hi bob']);
    await waitFor(async () => (await msgState(a.page, 'hi bob')) === 'read', 10000, 'alice sees "read"');

    // Presence: each sees the other online.
    await a.page.waitForSelector('#chat-dot.online');

    // Typing indicator.
    await b.page.type('#composer-input', 'hi al');
    await a.page.waitForSelector(`#typing:text("${b.name} is typing")`);
    await b.page.fill('#composer-input', '');
    await sendText(b.page, 'hi alice');
    await a.page.waitForSelector('#msg-list li.msg:not(.mine) .body:text-is("hi alice")');
    await a.page.waitForSelector('#typing:empty');

    // Bob closes his page; Alice writes several messages meanwhile.
    await b.page.close();
    await a.page.waitForSelector('#chat-dot:not(.online)');
    const missed = ['m1', 'm2', 'm3', 'm4', 'm5'];
    for (const t of missed) await sendText(a.page, t);
    await waitFor(async () => (await msgState(a.page, 'm5')) === 'sent', 10000, 'm5 sent');
    expect(await msgState(a.page, 'm1')).toBe('sent'); // stored, not delivered: bob is away

    // Bob comes back in a new tab of the same browser profile and signs in
    // (the account is kept per tab; cursors per profile).
    const { page: b2, errors: b2errors } = await newPage(b.ctx, srv.http);
    allErrors.push(b2errors);
    await signIn(b2, b.name);
    const row2 = b2.locator(`#conv-list li.conv:has(.title:text-is("${a.name}"))`);
    await row2.locator('.last:text-is("m5")').waitFor();
    await openConversation(b2, a.name);
    await waitFor(async () => (await bubbles(b2)).length >= 7, 10000, 'bob sees the history');
    await new Promise((r) => setTimeout(r, 500)); // a duplicate would show up here
    expect(await bubbles(b2)).toEqual(['hi bob', 'hi alice', ...missed]);
    const seqs = await b2.$$eval('#msg-list li.msg', (els) => els.map((e) => Number((e as HTMLElement).dataset.seq)));
    expect(seqs).toEqual([...seqs].sort((x, y) => x - y));
    expect(new Set(seqs).size).toBe(seqs.length);

    // Alice's messages turn delivered, then read.
    await waitFor(async () => (await msgState(a.page, 'm5')) === 'read', 10000, 'm5 read');
    await screenshot(a.page, 'two-users-alice');
    await screenshot(b2, 'two-users-bob-back');

    // The server goes away: a reconnecting banner, sends stay pending, then everything goes through.
    await srv.stop();
    await a.page.waitForSelector('#banner:not([hidden]):has-text("Reconnecting")');
    await sendText(a.page, 'while down');
    await a.page.waitForSelector('#msg-list li.pending[data-state=pending]:has(.body:text-is("while down"))');
    await screenshot(a.page, 'reconnecting-banner');
    await srv.restart();
    await a.page.waitForSelector('#banner', { state: 'hidden', timeout: 20000 });
    await waitFor(async () => ['sent', 'delivered', 'read'].includes(await msgState(a.page, 'while down')), 15000, 'pending send went through');
    await b2.waitForSelector('#msg-list .body:text-is("while down")', { timeout: 20000 });
    expect(await bubbles(b2)).toEqual(['hi bob', 'hi alice', ...missed, 'while down']);
    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('three users in a group: read states change, edit and recall show on the other screens', async () => {
    const a = await user('ann');
    const b = await user('ben');
    const c = await user('cat');

    // Ann creates the group with the dialog.
    await a.page.click('#new-group-btn');
    await a.page.fill('#group-name', 'trip');
    await a.page.fill('#group-members', `${b.name}, ${c.name}`);
    await a.page.click('#group-ok');
    await a.page.waitForSelector('#chat-title:text-is("trip")');
    await a.page.waitForSelector('#chat-sub:text-is("3 members")');

    // Ben opens it; Cat does not yet.
    await b.page.locator('#conv-list li.conv:has(.title:text-is("trip"))').waitFor();
    await openConversation(b.page, 'trip');
    await sendText(a.page, 'hello group');
    await sendText(a.page, 'typo mesage');
    await b.page.waitForSelector('#msg-list .body:text-is("typo mesage")');
    await waitFor(async () => (await a.page.textContent('#msg-list li.msg.mine:has(.body:text-is("typo mesage")) .state')) === 'Read by 1', 10000, 'read by 1');
    // Cat has an unread badge for the two messages (events such as the
    // group's creation are not unread messages), opens the group: now read by two.
    await c.page.locator('#conv-list li.conv:has(.title:text-is("trip")) .badge.unread:text-is("2")').waitFor();
    await openConversation(c.page, 'trip');
    await waitFor(async () => (await a.page.textContent('#msg-list li.msg.mine:has(.body:text-is("typo mesage")) .state')) === 'Read by 2', 10000, 'read by 2');
    expect(await bubbles(c.page)).toEqual(['hello group', 'typo mesage']);
    expect(await c.page.textContent('#msg-list li.msg:has(.body:text-is("hello group")) .from')).toBe(a.name);

    // Edit.
    await a.page.click('#msg-list li.msg.mine:has(.body:text-is("typo mesage"))');
    await a.page.click('#msg-list li.msg.open button[data-action=edit]');
    expect(await a.page.inputValue('#composer-input')).toBe('typo mesage');
    await a.page.fill('#composer-input', 'typo message');
    await a.page.press('#composer-input', 'Enter');
    for (const p of [a.page, b.page, c.page]) {
      await p.waitForSelector('#msg-list li.msg:has(.body:text-is("typo message")) .meta:has-text("edited")');
    }
    // Recall.
    await a.page.click('#msg-list li.msg.mine:has(.body:text-is("hello group"))');
    await a.page.click('#msg-list li.msg.open button[data-action=recall]');
    for (const p of [a.page, b.page, c.page]) {
      await p.waitForSelector('#msg-list li.msg.recalled .body:text-is("Message recalled")');
      expect(await bubbles(p)).toEqual(['Message recalled', 'typo message']);
    }
    // Ben replies; the others see it in order.
    await sendText(b.page, 'count me in');
    await c.page.waitForSelector('#msg-list .body:text-is("count me in")');
    expect(await bubbles(c.page)).toEqual(['Message recalled', 'typo message', 'count me in']);

    // Ann adds a fourth member.
    const dan = uniqueName('dan');
    await register({ baseUrl: srv.http }, dan, 'pw-dan-secret');
    await a.page.click('#add-members-btn');
    await a.page.fill('#group-members', dan);
    await a.page.click('#group-ok');
    await b.page.waitForSelector(`#msg-list li.sys:text("added ${dan}")`);
    await a.page.waitForSelector('#chat-sub:text-is("4 members")');
    await screenshot(a.page, 'group-ann');
    await screenshot(c.page, 'group-cat');
    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('two windows of one browser profile can be two different users', async () => {
    const ctx = await browser.newContext({ viewport: { width: 900, height: 700 } });
    contexts.push(ctx);
    const one = await newPage(ctx, srv.http);
    const two = await newPage(ctx, srv.http);
    allErrors.push(one.errors, two.errors);
    const u1 = uniqueName('win');
    const u2 = uniqueName('dow');
    await signUp(one.page, u1);
    await signUp(two.page, u2);
    await openChatWith(one.page, u2);
    await sendText(one.page, 'same browser, other window');
    await two.page.locator(`#conv-list li.conv:has(.title:text-is("${u1}"))`).click();
    await two.page.waitForSelector('#msg-list .body:text-is("same browser, other window")');
    expect(await one.page.textContent('#me-name')).toBe(u1);
    expect(await two.page.textContent('#me-name')).toBe(u2);
    await one.page.reload(); // a reload keeps the tab signed in
    await one.page.waitForSelector('#app:not([hidden])');
    expect(await one.page.textContent('#me-name')).toBe(u1);
  });

  it('history loads as you scroll up', async () => {
    const sender = uniqueName('sam');
    const t = await register({ baseUrl: srv.http }, sender, 'pw-sam-secret');
    const r = await user('rita');
    for (let i = 1; i <= 75; i++) {
      await rpc({ baseUrl: srv.http }, t.token, 'send', { clientMsgId: 'h' + i, to: r.name, contentType: 'text', payload: new TextEncoder().encode('msg ' + i) });
    }
    await r.page.locator(`#conv-list li.conv:has(.title:text-is("${sender}")) .badge:text-is("75")`).waitFor();
    // Everything arrived live; a reload resumes from the saved cursors, so
    // the conversation's messages are no longer in memory and come from history.
    await r.page.reload();
    await r.page.waitForSelector('#banner', { state: 'hidden' });
    await r.page.locator(`#conv-list li.conv:has(.title:text-is("${sender}")) .badge:text-is("75")`).waitFor();
    await openConversation(r.page, sender);
    await r.page.waitForSelector('#msg-list .body:text-is("msg 75")');
    const first = await bubbles(r.page);
    expect(first.length).toBeLessThan(75); // not everything at once
    expect(first.at(-1)).toBe('msg 75');
    await waitFor(async () => {
      await r.page.$eval('#messages', (e) => (e.scrollTop = 0));
      return (await bubbles(r.page))[0] === 'msg 1';
    }, 15000, 'scrolled to the beginning');
    expect(await bubbles(r.page)).toEqual(Array.from({ length: 75 }, (_, i) => 'msg ' + (i + 1)));
    await r.page.waitForSelector('#older:text-is("Beginning of the conversation")');
  });

  it('is usable at phone width (375 px)', async () => {
    const peer = uniqueName('pat');
    await register({ baseUrl: srv.http }, peer, 'pw-pat-secret');
    const p = await user('phil', { width: 375, height: 700 });
    expect(await p.page.isVisible('#conv-list')).toBe(true);
    await openChatWith(p.page, peer);
    expect(await p.page.isVisible('.sidebar')).toBe(false);
    expect(await p.page.isVisible('#composer-input')).toBe(true);
    await sendText(p.page, 'hello from a phone with a fairly long message that has to wrap onto several lines');
    await waitFor(async () => (await msgState(p.page, 'hello from a phone with a fairly long message that has to wrap onto several lines')) === 'sent');
    const overflow = await p.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(overflow).toBeLessThanOrEqual(0);
    const box = await p.page.locator('#send-btn').boundingBox();
    expect(box!.x + box!.width).toBeLessThanOrEqual(375);
    await screenshot(p.page, 'phone-chat');
    await p.page.click('#back-btn');
    expect(await p.page.isVisible('#conv-list li.conv')).toBe(true);
    expect(await p.page.isVisible('#composer-input')).toBe(false);
    await screenshot(p.page, 'phone-list');

    // A group's header: its name shows whole beside the timer and Members (the subtitle gives way).
    await p.page.click('#new-group-btn');
    await p.page.fill('#group-name', 'Weekend trip');
    await p.page.fill('#group-members', peer);
    await p.page.click('#group-ok');
    await p.page.waitForSelector('#chat-title:text-is("Weekend trip")');
    await p.page.waitForSelector('#members-btn:visible');
    // (scrollWidth rounds: a text a fraction of a pixel too wide is ellipsized and reads as fitting.)
    const title = await p.page.$eval('#chat-title', (e) => {
      const r = document.createRange();
      r.selectNodeContents(e);
      const width = e.getBoundingClientRect().width;
      return { whole: r.getBoundingClientRect().width <= width + 0.01, width };
    });
    expect(title.whole, `the group's name is clipped to ${title.width} px`).toBe(true);
    const bar = await p.page.$eval('#chat .bar', (e) => e.scrollWidth - e.clientWidth);
    expect(bar).toBeLessThanOrEqual(0);
  });
});

import { afterAll, afterEach, beforeAll, describe, expect, it, inject } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { startServer, waitFor, type RunningServer } from '../helpers/server.js';
import { launch, newPage, openConversation, signIn } from '../helpers/browser.js';
import { closeClients, connect, newUser, type TestUser } from '../helpers/users.js';

// Disappearing messages in the web client: the header's timer shows and sets
// the conversation's setting, the event is shown in the timeline, and a
// message that disappears leaves the view when its time comes.
let srv: RunningServer;
let browser: Browser;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  [srv, browser] = await Promise.all([startServer(inject('parleyBin')), launch()]);
});
afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await srv?.dispose();
});
afterEach(() => closeClients());

async function pageFor(s: RunningServer, u: TestUser): Promise<{ page: Page; errors: string[] }> {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 760 } });
  contexts.push(ctx);
  const { page, errors } = await newPage(ctx, s.http);
  await signIn(page, u.id, u.password);
  await page.waitForSelector('#banner', { state: 'hidden' });
  return { page, errors };
}

describe('web client: disappearing messages', () => {
  it('sets the timer from the header, shows it, and drops a message from view when it expires', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    const b = connect(srv, bob);
    await b.waitReady(5000);
    const first = await b.sendText(alice.id, 'this one stays');
    const { page, errors } = await pageFor(srv, alice);
    await openConversation(page, bob.id);
    await page.waitForSelector('#msg-list li.msg:has(.body:text-is("this one stays"))');
    expect(await page.inputValue('#disappear-select')).toBe('0');

    await page.selectOption('#disappear-select', '30');
    await page.waitForSelector('#msg-list :text("You set disappearing messages to 30 seconds")');
    // Bob's side sees the timer in the conversation list.
    await waitFor(async () => (await b.conversations()).find((c) => c.conversationId === first.conversationId)?.disappearingSeconds === 30, 10_000, 'the timer in bob\'s list');

    const gone = await b.sendText(alice.id, 'this one vanishes');
    await page.waitForSelector('#msg-list li.msg:has(.body:text-is("this one vanishes"))');
    const m = (await b.history(first.conversationId)).messages!.find((x) => x.seq === gone.seq)!;
    expect(m.expiresAt).toBe(m.serverTime! + 30_000);
    // Gone from view once its time has passed (the page checks every second).
    await page.waitForSelector('#msg-list li.msg:has(.body:text-is("this one vanishes"))', { state: 'detached', timeout: 45_000 });
    expect(await page.$('#msg-list li.msg:has(.body:text-is("this one stays"))')).not.toBeNull();
    expect(errors).toEqual([]);
  }, 90_000);
});

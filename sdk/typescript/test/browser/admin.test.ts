import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import type { Browser } from 'playwright-core';
import { startServer, waitFor, type RunningServer } from '../helpers/server.js';
import { launch, screenshot, watchErrors } from '../helpers/browser.js';
import { closeClients, connect, newUser } from '../helpers/users.js';

let srv: RunningServer;
let browser: Browser;
beforeAll(async () => {
  [srv, browser] = await Promise.all([startServer(inject('parleyBin')), launch()]);
});
afterAll(async () => {
  closeClients();
  await browser?.close();
  await srv?.dispose();
});

describe('admin page in Chromium', () => {
  it('opens with the admin API key and shows live figures', async () => {
    const ctx = await browser.newContext({ viewport: { width: 1200, height: 900 } });
    const page = await ctx.newPage();
    const errors = watchErrors(page);
    await page.goto(srv.http + '/admin');

    // A wrong key is refused.
    await page.fill('#key', 'not-the-key-0123456789');
    await page.click('#keyform button');
    await page.waitForSelector('#loginerr:has-text("refused")');

    await page.fill('#key', srv.adminKey());
    await page.click('#keyform button');
    await page.waitForSelector('[data-metric="connections"]', { state: 'visible' });
    const metric = async (name: string) => (await page.textContent(`[data-metric="${name}"]`))?.trim() ?? '';
    const names = await page.$$eval('[data-metric]', (els) => els.map((e) => (e as HTMLElement).dataset.metric!));
    expect(names).toEqual(expect.arrayContaining(['connections', 'messages_per_second', 'deliveries_per_second']));
    // Every figure turns from a placeholder into a number.
    await waitFor(async () => {
      for (const n of names) if (!/^\d[\d.,]*/.test(await metric(n))) return false;
      return true;
    }, 10000, 'numbers in every [data-metric]');
    const before = parseInt(await metric('connections'), 10);

    // Live: clients connect and chat; the figures follow.
    const [a, b] = await Promise.all([newUser(srv, 'ada'), newUser(srv, 'bo')]);
    const ca = connect(srv, a);
    const cb = connect(srv, b);
    await Promise.all([ca.waitReady(5000), cb.waitReady(5000)]);
    await waitFor(async () => parseInt(await metric('connections'), 10) >= before + 2, 15000, 'connections figure rises');
    let sent = 0;
    await waitFor(async () => {
      await ca.sendText(b.id, 'tick ' + ++sent);
      return parseFloat(await metric('messages_per_second')) > 0;
    }, 15000, 'messages per second above 0');
    await screenshot(page, 'admin-live');
    expect(errors).toEqual([]);
    await ctx.close();
  });
});

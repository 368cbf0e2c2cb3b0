import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import type { Browser } from 'playwright-core';
import { startServer, waitFor, type RunningServer } from '../helpers/server.js';
import { launch, screenshot, watchErrors } from '../helpers/browser.js';
import { closeClients, connect, inbox, newUser } from '../helpers/users.js';
import type { SendAck } from '../../src/types.js';

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

  it('the reports queue: pages of open reports with the reported text, resolve, dismiss, delete, ban; the audit log', async () => {
    const [spammer, bob] = await Promise.all([newUser(srv, 'spam'), newUser(srv, 'bob')]);
    const cs = connect(srv, spammer);
    const cb = connect(srv, bob);
    const bGot = inbox(cb);
    let spammerClosed: Error | null = null;
    cs.on('closed', (e) => (spammerClosed = e));
    await Promise.all([cs.waitReady(5000), cb.waitReady(5000)]);
    // 52 reports: more than one page of the queue (the page asks for 50).
    const evil = 'click <img src=x onerror="window.pwned=1"> now & win 🎁';
    const acks: SendAck[] = [];
    for (let i = 1; i <= 52; i++) acks.push(await cs.sendText(bob.id, i === 2 ? evil : 'spam ' + i));
    for (const [i, a] of acks.entries()) {
      await cb.reportMessage(a.conversationId, a.seq, ['spam', 'abuse', 'other'][i % 3]!, i === 1 ? '<b>not bold</b>' : undefined);
    }
    const conv = acks[0]!.conversationId;

    const ctx = await browser.newContext({ viewport: { width: 1300, height: 900 } });
    const page = await ctx.newPage();
    const errors = watchErrors(page);
    page.on('dialog', (d) => void d.accept()); // the confirmations of delete and ban
    await page.goto(srv.http + '/admin');
    await page.fill('#key', srv.adminKey());
    await page.click('#keyform button');
    const rows = page.locator('#rrows tr[data-report]');
    await waitFor(async () => (await rows.count()) === 50, 10000, 'the first page of reports');
    await page.click('#rmore');
    await waitFor(async () => (await rows.count()) === 52, 10000, 'the second page');
    await page.waitForSelector('#rmore', { state: 'hidden' });
    expect(await page.textContent('#rcount')).toBe('(52 open)');

    // What a row shows, as text: reporter, reason, note, conversation/seq, the message decoded.
    const row = (seq: number) => page.locator(`#rrows tr[data-report]:has(td:text-is("${conv} #${seq}"))`);
    const r2 = row(acks[1]!.seq);
    const cells = await r2.locator('> td').allTextContents();
    expect(cells.slice(1, 5)).toEqual([bob.id, 'abuse', '<b>not bold</b>', `${conv} #${acks[1]!.seq}`]);
    expect(await r2.locator('[data-field=message]').textContent()).toBe(evil);
    expect(await r2.locator('td').nth(5).textContent()).toBe(`from ${spammer.id}${evil}`);
    expect(await page.locator('#rrows img, #rrows b').count()).toBe(0); // user text is never markup
    expect(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned)).toBeUndefined();
    expect(await row(acks[0]!.seq).locator('[data-field=message]').textContent()).toBe('spam 1');
    await screenshot(page, 'admin-reports');

    const report = async (seq: number) => {
      const res = await fetch(`${srv.http}/v1/admin/reports?status=all&limit=1000`, { headers: { 'X-Api-Key': srv.adminKey() } });
      const body = (await res.json()) as { reports: Array<{ id: string; seq: number; status: string; resolution?: string; closed_by?: string }> };
      return body.reports.find((r) => r.seq === seq)!;
    };

    // Resolve with a note, dismiss without: the rows leave the queue.
    const act = async (seq: number, action: string, note?: string) => {
      if (note !== undefined) await row(seq).locator('input').fill(note);
      await row(seq).locator(`button[data-action=${action}]`).click();
    };
    await act(acks[0]!.seq, 'resolve', 'warned the sender');
    await row(acks[0]!.seq).waitFor({ state: 'detached' });
    expect(await report(acks[0]!.seq)).toMatchObject({ status: 'resolved', resolution: 'warned the sender' });
    await act(acks[2]!.seq, 'dismiss');
    await row(acks[2]!.seq).waitFor({ state: 'detached' });
    expect((await report(acks[2]!.seq)).status).toBe('dismissed');
    expect(await page.textContent('#rcount')).toBe('(50 open)');

    // Delete message: a moderated recall reaches bob.
    await act(acks[3]!.seq, 'delete');
    await row(acks[3]!.seq).locator('[data-field=status]:text-is("message deleted for everyone")').waitFor();
    await waitFor(() => bGot.find((m) => m.kind === 'MESSAGE_KIND_RECALL' && m.event?.targetSeq === acks[3]!.seq && m.event?.moderated), 10000, 'the moderated recall');

    // Ban the sender, deleting their last 24 hours: their session is closed, their other messages deleted.
    await row(acks[4]!.seq).locator('select').selectOption('24');
    await act(acks[4]!.seq, 'ban');
    const banStatus = row(acks[4]!.seq).locator('[data-field=status]');
    await banStatus.filter({ hasText: 'banned' }).waitFor();
    expect(await banStatus.textContent()).toMatch(new RegExp(`^banned ${spammer.id}: 1 session\\(s\\) closed on this node, the others on theirs, 51 message\\(s\\) deleted$`));
    await waitFor(() => spammerClosed, 10000, 'the banned user is signed out');
    expect((spammerClosed as Error | null)?.message).toMatch(/TOKEN_REVOKED/);

    // The audit log, newest first: the ban, the delete, the dismissal, the resolution.
    await waitFor(async () => {
      await page.click('#rrefresh');
      await new Promise((r) => setTimeout(r, 200));
      return (await page.locator('#arows tr[data-audit]').count()) >= 4;
    }, 10000, 'four audit entries');
    const audit = await page.$$eval('#arows tr[data-audit]', (trs) => trs.map((tr) => Array.from(tr.children, (td) => td.textContent ?? '')));
    expect(audit.slice(0, 4).map((c) => c[2])).toEqual([
      'POST /v1/admin/users/{id}/ban',
      'DELETE /v1/admin/conversations/{id}/messages/{seq}',
      'POST /v1/admin/reports/{id}/dismiss',
      'POST /v1/admin/reports/{id}/resolve',
    ]);
    expect(audit[0]![3]).toBe(`/v1/admin/users/${spammer.id}/ban`);
    expect(JSON.parse(audit[0]![4]!)).toMatchObject({ remove_messages_hours: 24, messages_removed: 51 });
    expect(audit[3]![4]).toContain('warned the sender');
    // After a refresh the queue holds what is still open.
    expect(await rows.count()).toBe(50); // 52 less the resolved and the dismissed one
    await screenshot(page, 'admin-reports-after');
    expect(errors).toEqual([]);
    await ctx.close();
  });
});

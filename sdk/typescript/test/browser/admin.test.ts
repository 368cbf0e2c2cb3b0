import { createRequire } from 'node:module';
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

  it('the console manages users, groups and messages, and shows nodes, queues and the store size', async () => {
    const key = srv.adminKey();
    const adminFetch = async (path: string, init: RequestInit = {}) => {
      const res = await fetch(srv.http + path, { ...init, headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json', ...(init.headers ?? {}) } });
      return { status: res.status, body: (await res.json().catch(() => ({}))) as any };
    };
    const [ann, ben, cal] = await Promise.all([newUser(srv, 'mgr'), newUser(srv, 'mgr'), newUser(srv, 'mgr')]);
    const ca = connect(srv, ann);
    const cb = connect(srv, ben);
    const bGot = inbox(cb);
    let annClosed: Error | null = null;
    ca.on('closed', (e) => (annClosed = e));
    await Promise.all([ca.waitReady(5000), cb.waitReady(5000)]);
    const evil = 'hi <img src=x onerror="window.pwned=1"> & 你好';
    const ack = await ca.sendText(ben.id, evil);
    const conv = ack.conversationId;
    const bin = await adminFetch('/v1/admin/messages', { method: 'POST', body: JSON.stringify({ from: ben.id, to: ann.id, client_msg_id: 'console-img', content_type: 'image/png', payload: Buffer.from([137, 80, 78, 71, 0, 1, 2]).toString('base64') }) });
    expect(bin).toMatchObject({ status: 201 });
    const created = await adminFetch('/v1/admin/groups', { method: 'POST', body: JSON.stringify({ owner: ann.id, name: 'crew <i>', user_ids: [ben.id, cal.id] }) });
    expect(created).toMatchObject({ status: 201 });
    const group: string = created.body.conversationId;

    const ctx = await browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const page = await ctx.newPage();
    const errors = watchErrors(page);
    page.on('dialog', (d) => void d.accept());
    await page.goto(srv.http + '/admin');
    await page.fill('#key', key);
    await page.press('#key', 'Enter');
    await page.waitForSelector('#main:not(.hidden)');

    // Search: three users start with ann's id but for its last characters; the page lists them by id.
    await page.fill('#uprefix', 'mgr');
    await page.press('#uprefix', 'Enter');
    await page.locator(`#urows tr[data-user="${ann.id}"]`).waitFor();
    const listed = await page.$$eval('#urows tr[data-user]', (trs) => trs.map((t) => (t as HTMLElement).dataset.user!));
    expect(listed).toEqual(expect.arrayContaining([ann.id, ben.id, cal.id]));
    expect(listed).toEqual([...listed].sort());
    await page.fill('#uprefix', ann.id);
    await page.click('#uform button');
    await waitFor(async () => (await page.locator('#urows tr[data-user]').count()) === 1, 5000, 'one user listed');

    // View: devices online, groups with roles, conversations.
    await page.locator(`#urows tr[data-user="${ann.id}"] button[data-action=view]`).click();
    await page.waitForSelector('#udetail:not(.hidden)');
    expect(await page.textContent('#uname')).toBe('User ' + ann.id);
    const fact = (k: string) => page.locator(`#ufacts tr[data-fact="${k}"] td`).nth(1).textContent();
    expect(await fact('last seen')).toBe('online now');
    expect(await fact('state')).toBe('active');
    expect(await page.locator('#usessions tr[data-session]').count()).toBe(1);
    expect(await page.locator(`#ugroups tr[data-group="${group}"] td`).allTextContents()).toEqual([group, 'crew <i>', 'owner', 'Open']);
    await page.locator(`#uconvs tr[data-conversation="${conv}"]`).waitFor();
    await screenshot(page, 'admin-user');

    // Kick: ann's device is signed out with KICKED.
    await page.locator('#usessions button[data-action=kick]').click();
    await waitFor(() => annClosed, 10000, 'the kicked client closes');
    expect(String(annClosed)).toMatch(/KICKED/);
    await page.locator('#usessions td:text-is("no device online")').waitFor();
    expect((await adminFetch(`/v1/admin/users/${ann.id}/sessions`)).body.sessions).toEqual([]);

    // Disable, then enable again.
    await page.click('#udisable');
    await page.locator('#udisable[data-action=enable]').waitFor();
    expect((await adminFetch(`/v1/admin/users/${ann.id}`)).body.disabled).toBe(true);
    expect(await fact('state')).toBe('disabled (cannot sign in)');
    await page.click('#udisable');
    await page.locator('#udisable[data-action=disable]').waitFor();
    expect((await adminFetch(`/v1/admin/users/${ann.id}`)).body.disabled).toBe(false);

    // Mint a token: shown once, and it works.
    await page.fill('#mintttl', '600');
    await page.click('#mintform button');
    await page.waitForSelector('#minted:not(.hidden)');
    const token = await page.inputValue('#mintedtoken');
    expect(token.length).toBeGreaterThan(20);
    const convs = await fetch(srv.http + '/v1/conversations', { headers: { Authorization: 'Bearer ' + token } });
    expect(convs.status).toBe(200);
    expect(page.url()).not.toContain(key); // the key stays out of the URL
    expect(page.url()).not.toContain(token);

    // Reset the password: the new one logs in, the old one does not.
    await page.fill('#newpw', 'brand-new-password-1');
    await page.click('#pwform button');
    await page.locator('#ustatus:has-text("password reset")').waitFor();
    const login = (password: string) => fetch(srv.http + '/v1/login', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ username: ann.id, password }) });
    expect((await login('brand-new-password-1')).status).toBe(200);
    expect((await login(ann.password)).status).toBe(401);
    expect((await fetch(srv.http + '/v1/conversations', { headers: { Authorization: 'Bearer ' + token } })).status).toBe(401);

    // Groups: search, members with roles, remove one, dissolve.
    await page.fill('#gprefix', group);
    await page.press('#gprefix', 'Enter');
    await page.locator(`#grows tr[data-group="${group}"] button[data-action=view]`).click();
    await page.waitForSelector('#gdetail:not(.hidden)');
    const memberRoles = await page.$$eval('#gmembers tr[data-member]', (trs) => trs.map((t) => [(t as HTMLElement).dataset.member, t.children[1]!.textContent]));
    expect(new Map(memberRoles as [string, string][])).toEqual(new Map([[ann.id, 'owner'], [ben.id, 'member'], [cal.id, 'member']]));
    await page.locator(`#gmembers tr[data-member="${cal.id}"] button[data-action=remove]`).click();
    await page.locator(`#gmembers tr[data-member="${cal.id}"]`).waitFor({ state: 'detached' });
    const ms = (await adminFetch(`/v1/admin/groups/${encodeURIComponent(group)}/members`)).body.members.map((m: { userId: string }) => m.userId);
    expect(ms.sort()).toEqual([ann.id, ben.id].sort());
    await page.click('#gdissolve');
    await page.locator('#gstatus:text-is("group dissolved")').waitFor();
    expect((await adminFetch(`/v1/admin/groups/${encodeURIComponent(group)}`)).body.dissolved).toBe(true);
    await screenshot(page, 'admin-group');

    // History of the 1:1 conversation, newest first: text as text, binary by type and size; recall.
    await page.locator(`#uconvs tr[data-conversation="${conv}"] button[data-action=history]`).click();
    const hrow = (seq: number) => page.locator(`#hrows tr[data-seq="${seq}"]`);
    await hrow(ack.seq).waitFor();
    expect(await hrow(ack.seq).locator('[data-field=message]').textContent()).toBe(evil);
    expect(await hrow(ack.seq + 1).locator('[data-field=message]').textContent()).toBe('[image/png, 7 bytes]');
    const seqs = await page.$$eval('#hrows tr[data-seq]', (trs) => trs.map((t) => Number((t as HTMLElement).dataset.seq)));
    expect(seqs).toEqual([ack.seq + 1, ack.seq]);
    expect(await page.locator('#hrows img').count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { pwned?: number }).pwned)).toBeUndefined();
    await hrow(ack.seq).locator('button[data-action=recall]').click();
    await hrow(ack.seq).locator('[data-field=message]:text-is("(recalled)")').waitFor();
    const page1 = (await adminFetch(`/v1/admin/conversations/${encodeURIComponent(conv)}/messages?limit=10`)).body;
    expect(page1.messages.find((m: { seq: string }) => Number(m.seq) === ack.seq).recalled).toBe(true);
    await waitFor(() => bGot.find((m) => m.kind === 'MESSAGE_KIND_RECALL' && m.event?.targetSeq === ack.seq), 10000, 'the recall reaches ben');

    // Operations: this node's row, the queues, the store's size.
    await page.locator('#noderows tr[data-node="0"]').waitFor();
    expect(await page.locator('#noderows tr[data-node="0"] td').first().textContent()).toBe('0 (this node)');
    await page.locator('#qwebhook tr[data-queue="webhook events dropped"]').waitFor();
    await waitFor(async () => /\d+(\.\d+)? (B|KiB|MiB|GiB)$/.test((await page.locator('#node tr:has(td:text-is("store size")) td').nth(1).textContent()) ?? ''), 15000, 'the store size');

    // Accessibility of the console's sections (axe-core, WCAG 2 A and AA).
    const require = createRequire(import.meta.url);
    await page.addScriptTag({ path: require.resolve('axe-core/axe.min.js') });
    const violations = await page.evaluate(async () => {
      const axe = (window as unknown as { axe: { run: (c: unknown, o: unknown) => Promise<{ violations: Array<{ id: string; nodes: Array<{ target: string[] }> }> }> } }).axe;
      const r = await axe.run({ include: [['#users'], ['#groups'], ['#history'], ['#nodes'], ['#queues']] }, { runOnly: ['wcag2a', 'wcag2aa'] });
      return r.violations.map((v) => v.id + ': ' + v.nodes.map((n) => n.target.join(' ')).join(', '));
    });
    expect(violations).toEqual([]);
    await screenshot(page, 'admin-console');
    expect(errors).toEqual([]);
    await ctx.close();
  });
});

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { fromBase64, text } from '../../src/index.js';
import { startServer, uniqueName, waitFor, type RunningServer } from '../helpers/server.js';
import { bubbles, launch, newPage, openChatWith, openConversation, screenshot, sendText, signUp } from '../helpers/browser.js';

// The web client's side of moderation, against a real server with the word
// filter (a rejecting list) and a before-send hook in this process that
// refuses texts starting with "bad" with a reason of its own.
let srv: RunningServer;
let browser: Browser;
let hook: Server;
const contexts: BrowserContext[] = [];
const allErrors: string[][] = [];
const HOOK_REASON = 'No spam here, please <b>really</b>'; // markup in a reason must show as text

beforeAll(async () => {
  hook = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      const ev = JSON.parse(body) as { text?: string };
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify(ev.text?.startsWith('bad') ? { action: 'reject', code: 'spam', reason: HOOK_REASON } : { action: 'allow' }));
    });
  });
  await new Promise<void>((r) => hook.listen(0, '127.0.0.1', r));
  const hookUrl = `http://127.0.0.1:${(hook.address() as AddressInfo).port}/hook`;
  [srv, browser] = await Promise.all([
    startServer(inject('parleyBin'), undefined, {
      config: [
        'word_filter_lists:',
        '  - name: banned',
        '    action: reject',
        '    words: ["forbidden phrase"]',
        'moderation_hooks:',
        '  - name: app',
        `    url: ${hookUrl}`,
        '    events: [message.direct, message.group]',
        '    secret: browser-hook-secret-0123456789',
        '    policy: fail_open',
        '    timeout: 3s',
        '',
      ].join('\n'),
    }),
    launch(),
  ]);
});
afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await srv?.dispose();
  await new Promise((r) => hook?.close(r));
});

async function user(prefix: string): Promise<{ page: Page; name: string; errors: string[] }> {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 760 } });
  contexts.push(ctx);
  const { page, errors } = await newPage(ctx, srv.http);
  allErrors.push(errors);
  const name = uniqueName(prefix);
  await signUp(page, name);
  return { page, name, errors };
}

async function admin<T>(method: string, path: string): Promise<T> {
  const res = await fetch(srv.http + path, { method, headers: { 'X-Api-Key': srv.adminKey() } });
  const out = (await res.json()) as T;
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(out)}`);
  return out;
}

interface Report {
  id: string;
  reporter: string;
  conversation_id: string;
  seq: number;
  reason: string;
  note?: string;
  message: { from?: string; payload?: string } | null;
}

async function openReports(): Promise<Report[]> {
  const out: Report[] = [];
  let after = '';
  do {
    const page = await admin<{ reports: Report[]; next?: string }>('GET', `/v1/admin/reports?status=open${after ? '&after=' + encodeURIComponent(after) : ''}`);
    out.push(...page.reports);
    after = page.next ?? '';
  } while (after);
  return out;
}

const msg = (page: Page, body: string) => page.locator(`#msg-list li.msg:has(.body:text-is("${body}"))`);

describe('moderation in the web client (Chromium)', () => {
  it('reports another user’s message with a reason and a note; the report reaches the admin API', async () => {
    const a = await user('ann');
    const b = await user('bea');
    await openChatWith(a.page, b.name);
    await sendText(a.page, 'send me your password');
    await msg(a.page, 'send me your password').and(a.page.locator('[data-state]:not([data-state=pending])')).waitFor();

    // Her own message has no Report action.
    await msg(a.page, 'send me your password').click();
    await a.page.waitForSelector('#msg-list li.msg.open button[data-action=recall]');
    expect(await a.page.locator('#msg-list li.msg.open button[data-action=report]').count()).toBe(0);

    await b.page.locator(`#conv-list li.conv:has(.title:text-is("${a.name}"))`).waitFor();
    await openConversation(b.page, a.name);
    await msg(b.page, 'send me your password').click();
    await b.page.click('#msg-list li.msg.open button[data-action=report]');
    await b.page.waitForSelector('#report-dialog[open]');
    expect(await b.page.textContent('#report-quote')).toBe(`${a.name}: send me your password`);
    expect(await b.page.$$eval('#report-reason option', (os) => os.map((o) => (o as HTMLOptionElement).value))).toEqual(['spam', 'abuse', 'other']);
    await b.page.selectOption('#report-reason', 'abuse');
    await b.page.fill('#report-note', 'phishing <script>alert(1)</script>');
    await screenshot(b.page, 'report-dialog');
    await b.page.click('#report-ok');
    await b.page.waitForSelector('#report-dialog', { state: 'hidden' });
    await msg(b.page, 'send me your password').and(b.page.locator('[data-reported=true]')).waitFor();
    expect(await msg(b.page, 'send me your password').locator('.reported').textContent()).toBe('Reported');

    // The moderators see it: GET /v1/admin/reports with the admin key.
    const r = await waitFor(async () => (await openReports()).find((x) => x.reporter === b.name), 10000, 'the report in the open queue');
    expect(r).toMatchObject({ reason: 'abuse', note: 'phishing <script>alert(1)</script>' });
    expect(r.conversation_id).toBe([a.name, b.name].sort().join(':').replace(/^/, 'p:'));
    expect(r.message?.from).toBe(a.name);
    expect(text(fromBase64(r.message!.payload!))).toBe('send me your password');

    // Reported once: the action is gone from that message.
    await msg(b.page, 'send me your password').click();
    expect(await b.page.locator('#msg-list li.msg.open button[data-action=report]').count()).toBe(0);
    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('a rejected send shows the reason to the sender; the word filter’s refusal is worded by the page', async () => {
    const a = await user('cid');
    const b = await user('dot');
    await openChatWith(a.page, b.name);
    await sendText(a.page, 'hello there');
    await sendText(a.page, 'bad offer, click here');
    const rejected = a.page.locator('#msg-list li.msg.pending[data-state=rejected]:has(.body:text-is("bad offer, click here"))');
    await rejected.waitFor();
    expect(await rejected.locator('.meta').textContent()).toBe(`Not sent: ${HOOK_REASON}`);
    expect(await rejected.locator('.meta b').count()).toBe(0); // the reason is text, not markup
    expect(await rejected.locator('.meta').getAttribute('role')).toBe('alert');

    await sendText(a.page, 'a forbidden phrase here');
    const filtered = a.page.locator('#msg-list li.msg.pending[data-state=rejected]:has(.body:text-is("a forbidden phrase here"))');
    await filtered.waitFor();
    expect(await filtered.locator('.why').textContent()).toBe('it contains words that are not allowed here');
    await screenshot(a.page, 'rejected-send');

    // Neither reached the other side; the next message does.
    await sendText(a.page, 'sorry, all good');
    await b.page.locator(`#conv-list li.conv:has(.title:text-is("${a.name}"))`).waitFor();
    await openConversation(b.page, a.name);
    await waitFor(async () => (await bubbles(b.page)).includes('sorry, all good'), 10000, 'bob sees the good message');
    expect(await bubbles(b.page)).toEqual(['hello there', 'sorry, all good']);
    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('a message a moderator deleted shows as "Removed by a moderator", live and after a reload', async () => {
    const a = await user('eve');
    const b = await user('fay');
    await openChatWith(a.page, b.name);
    await sendText(a.page, 'against the rules');
    await sendText(a.page, 'fine message');
    await b.page.locator(`#conv-list li.conv:has(.title:text-is("${a.name}"))`).waitFor();
    await openConversation(b.page, a.name);
    await waitFor(async () => (await bubbles(b.page)).length === 2, 10000, 'both messages');
    const seq = Number(await msg(b.page, 'against the rules').getAttribute('data-seq'));
    const conversationId = [a.name, b.name].sort().join(':').replace(/^/, 'p:');
    await admin('DELETE', `/v1/admin/conversations/${encodeURIComponent(conversationId)}/messages/${seq}`);
    for (const p of [a.page, b.page]) {
      await p.waitForSelector('#msg-list li.msg.recalled.moderated .body:text-is("Removed by a moderator")');
      await p.waitForSelector('#msg-list li.sys:text-is("A moderator removed a message")');
      expect(await bubbles(p)).toEqual(['Removed by a moderator', 'fine message']);
    }
    await screenshot(b.page, 'moderated-recall');
    // From history after a reload: the event is read with the message.
    await b.page.reload();
    await b.page.waitForSelector('#app:not([hidden])');
    await b.page.waitForSelector('#msg-list li.msg.recalled.moderated .body:text-is("Removed by a moderator")');
    expect(await bubbles(b.page)).toEqual(['Removed by a moderator', 'fine message']);
    for (const e of allErrors) expect(e).toEqual([]);
  });
});

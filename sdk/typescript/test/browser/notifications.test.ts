// Web Push notifications in the web client, end to end: the page's
// Notifications toggle, a real Parley server sending by Web Push, a push
// service (test/helpers/webpush.ts) that checks and decrypts what arrives,
// the client's real service worker showing it, and the /admin Push
// notifications section.
//
// What is not the real thing: PushManager.subscribe/getSubscription in the
// page hand out a subscription whose endpoint is the local push service and
// whose private key the test holds (a real browser's would name Google's
// push service, which cannot be reached from here); and the push service's
// message reaches the worker through DevTools (ServiceWorker.deliverPushMessage),
// as the browser's push client would deliver it.
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import type { Browser, BrowserContext, Page, Worker } from 'playwright-core';
import { webPushKey } from '../../src/index.js';
import { startServer, uniqueName, waitFor, type RunningServer } from '../helpers/server.js';
import { launch, newPage, screenshot, signIn, signUp, watchErrors } from '../helpers/browser.js';
import { closeClients, connect, newUser, type TestUser } from '../helpers/users.js';
import { checkPush, pushManagerStub, startPushService, type CheckedPush, type PushRequest, type PushService, type TestSubscription } from '../helpers/webpush.js';
import type { ParleyClient } from '../../src/client.js';

const SUBJECT = 'mailto:ops@example.com';

let srv: RunningServer;
let browser: Browser;
let push: PushService;
let vapidKey: string;
const contexts: BrowserContext[] = [];

beforeAll(async () => {
  push = await startPushService();
  [srv, browser] = await Promise.all([
    startServer(inject('parleyBin'), undefined, {
      config: ['webpush_allow_private: true', 'push_delay: 1s', 'push_coalesce: 1s', `webpush_subject: "${SUBJECT}"`].join('\n') + '\n',
      env: { SSL_CERT_FILE: push.caFile },
    }),
    launch(),
  ]);
  vapidKey = await webPushKey({ baseUrl: srv.http });
});
afterAll(async () => {
  closeClients();
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await srv?.dispose();
  await push?.close();
});

interface AdminDevice {
  device_id: string;
  kind: string;
  token: string;
  updated_at: string;
  log: { conversation_id: string; seq: string; outcome: string; status: number; test?: boolean }[];
}

async function admin<T>(path: string, method = 'GET'): Promise<T> {
  const r = await fetch(srv.http + path, { method, headers: { 'X-Api-Key': srv.adminKey() } });
  expect(r.status, `${method} ${path}`).toBe(200);
  return (await r.json()) as T;
}
const pushDevices = async (uid: string) => (await admin<{ devices: AdminDevice[] }>(`/v1/admin/users/${uid}/push`)).devices;

/** A browser profile allowed to show notifications, whose PushManager hands out sub. */
async function profile(sub: TestSubscription): Promise<BrowserContext> {
  const ctx = await browser.newContext({ viewport: { width: 1000, height: 700 } });
  contexts.push(ctx);
  await ctx.grantPermissions(['notifications'], { origin: srv.http });
  await ctx.addInitScript(pushManagerStub, sub.keys());
  return ctx;
}

const toggle = (page: Page) => page.locator('#notify-toggle');
const status = async (page: Page) => ((await page.textContent('#notify-status')) ?? '').trim();

/** The toggle settled (enabled) in the given state. */
async function settled(page: Page, on: boolean): Promise<void> {
  await page.waitForSelector(`#notify-toggle:not([disabled])${on ? ':checked' : ':not(:checked)'}`);
}

/** Waits for a push to sub whose payload has the given seq; returns it checked and decrypted. */
async function pushFor(sub: TestSubscription, seq: number): Promise<{ req: PushRequest; checked: CheckedPush }> {
  return waitFor(
    () => {
      for (const req of push.received(sub)) {
        const checked = checkPush(req, sub, vapidKey, SUBJECT); // throws on any fault
        if (checked.payload.seq === String(seq)) return { req, checked };
      }
      return null;
    },
    20_000,
    `a push for seq ${seq}`,
  );
}

/** The service worker's notifications, seen from a page. */
function notifications(page: Page, tag?: string) {
  return page.evaluate(async (t) => {
    const reg = await navigator.serviceWorker.getRegistration('/');
    const ns = reg ? await reg.getNotifications(t ? { tag: t } : undefined) : [];
    return ns.map((n) => ({ title: n.title, body: n.body, tag: n.tag, data: n.data as Record<string, unknown> }));
  }, tag);
}

describe('Web Push notifications in Chromium', () => {
  // One user's browser, followed through the tests below in order.
  let sub: TestSubscription;
  let ctx: BrowserContext;
  let name = '';
  let device = '';
  let sender: TestUser;
  let cs: ParleyClient;
  let conv = '';
  let first: CheckedPush;

  it('turning Notifications on registers this browser; a message while it is closed reaches the push service, encrypted for it', async () => {
    sub = push.subscribe();
    ctx = await profile(sub);
    const { page, errors } = await newPage(ctx, srv.http);
    name = uniqueName('nina');
    await signUp(page, name);
    device = await page.evaluate(() => JSON.parse(localStorage.getItem('parley.device') ?? '""') as string);
    expect(device).toMatch(/^web-/);

    await settled(page, false);
    expect(await pushDevices(name)).toEqual([]);
    await toggle(page).click();
    await settled(page, true);
    expect(await status(page)).toMatch(/^On/);
    // The app subscribed with the server's VAPID key, and registered the subscription for this device.
    expect(await page.evaluate(() => (window as unknown as { __push: { subscribe: string[] } }).__push.subscribe)).toEqual([vapidKey]);
    const [d] = await pushDevices(name);
    expect(d).toMatchObject({ device_id: device, kind: 'webpush', token: sub.endpoint.slice(0, 16) + '…' });
    expect((await pushDevices(name)).length).toBe(1);
    await screenshot(page, 'notifications-on');

    // The choice is remembered across reloads (the subscription is reused, not made again).
    await page.reload();
    await page.waitForSelector('#app:not([hidden])');
    await settled(page, true);
    expect(await status(page)).toMatch(/^On/);
    expect(await page.evaluate(() => (window as unknown as { __push: { subscribe: string[] } }).__push.subscribe)).toEqual([]);
    expect((await pushDevices(name)).map((x) => x.device_id)).toEqual([device]);
    expect(errors).toEqual([]);

    // The page closes: this device is offline. Another user writes.
    await page.close();
    sender = await newUser(srv, 'sam');
    cs = connect(srv, sender);
    const ack = await cs.sendText(name, 'are you there?');
    conv = ack.conversationId;
    const { checked } = await pushFor(sub, ack.seq);
    first = checked;
    expect(checked.payload).toEqual({ title: sender.id, body: 'are you there?', conversationId: conv, seq: String(ack.seq), count: 1, badge: 1 });
    expect(checked.urgency).toBe('high');
    expect(checked.ttl).toBeGreaterThan(0);
    expect(checked.topic).toBeDefined();
  });

  it('the service worker shows the pushed notification, one per conversation, the newest replacing the last', async () => {
    const page = await ctx.newPage();
    await page.goto(srv.http + '/');
    const cdp = await ctx.newCDPSession(page);
    const regs: { registrationId: string; scopeURL: string; isDeleted: boolean }[] = [];
    cdp.on('ServiceWorker.workerRegistrationUpdated', (e) => regs.push(...e.registrations));
    await cdp.send('ServiceWorker.enable');
    const reg = await waitFor(() => regs.find((r) => r.scopeURL === srv.http + '/' && !r.isDeleted), 10_000, 'the worker registration');
    const deliver = (payload: Record<string, unknown>) =>
      cdp.send('ServiceWorker.deliverPushMessage', { origin: srv.http, registrationId: reg.registrationId, data: JSON.stringify(payload) });

    await deliver(first.payload);
    const [n] = await waitFor(async () => {
      const ns = await notifications(page);
      return ns.length ? ns : null;
    }, 10_000, 'a notification');
    expect(n).toEqual({ title: sender.id, body: 'are you there?', tag: conv, data: expect.objectContaining({ conversationId: conv, seq: first.payload.seq, badge: 1 }) });

    // Two more messages while away: their notification (coalesced or not) replaces the first.
    await cs.sendText(name, 'hello?');
    const ack = await cs.sendText(name, 'anyone home?');
    const { checked } = await pushFor(sub, ack.seq);
    expect(checked.payload).toMatchObject({ title: sender.id, conversationId: conv, seq: String(ack.seq) });
    expect(checked.payload.body).not.toBe('are you there?');
    await deliver(checked.payload);
    await waitFor(async () => (await notifications(page, conv))[0]?.body === checked.payload.body, 10_000, 'the newer notification');
    expect(await notifications(page)).toEqual([expect.objectContaining({ title: sender.id, body: checked.payload.body, tag: conv })]);
    await cdp.detach();
    await page.close();
  });

  it('clicking the notification opens its conversation in the open tab', async () => {
    const { page, errors } = await newPage(ctx, srv.http);
    await signIn(page, name);
    await page.waitForSelector('#banner', { state: 'hidden' });
    expect(await page.locator('#chat').getAttribute('class')).toContain('none'); // no conversation open
    await settled(page, true);
    const worker = await waitFor(() => ctx.serviceWorkers().find((w: Worker) => w.url() === srv.http + '/sw.js'), 10_000, 'the service worker');
    // A headless browser has no notification to click: dispatch the event it
    // would dispatch, for the notification the worker showed.
    const clicked = await worker.evaluate(async (tag: string) => {
      const sw = self as unknown as { registration: ServiceWorkerRegistration; dispatchEvent(e: Event): boolean };
      const NotificationEvent = (self as unknown as { NotificationEvent: new (type: string, init: { notification: Notification }) => Event }).NotificationEvent;
      const [n] = await sw.registration.getNotifications({ tag });
      if (!n) return false;
      try {
        sw.dispatchEvent(new NotificationEvent('notificationclick', { notification: n }));
      } catch {
        // waitUntil refuses an event the browser did not make; the handler ran.
      }
      return true;
    }, conv);
    expect(clicked).toBe(true);
    await page.waitForSelector(`#chat-title:text-is("${sender.id}")`);
    expect(await page.$$eval('#msg-list li.msg .body', (els) => els.map((e) => e.textContent))).toEqual(['are you there?', 'hello?', 'anyone home?']);
    await waitFor(async () => (await notifications(page, conv)).length === 0, 10_000, 'the clicked notification closed');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('a tab opened at /#c=<conversation> (a click with no tab open) shows that conversation once signed in', async () => {
    const page = await ctx.newPage();
    const errors = watchErrors(page);
    await page.goto(srv.http + '/#c=' + encodeURIComponent(conv));
    await signIn(page, name);
    await page.waitForSelector(`#chat-title:text-is("${sender.id}")`);
    expect(new URL(page.url()).hash).toBe('');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('/admin lists the device with its push log, and "Send test notification" shows the push service\'s answer', async () => {
    const page = await (await browser.newContext({ viewport: { width: 1200, height: 1000 } })).newPage();
    contexts.push(page.context());
    await page.goto(srv.http + '/admin');
    await page.fill('#key', srv.adminKey());
    await page.click('#keyform button');
    await page.waitForSelector('#main:not(.hidden)');
    await page.fill('#nuser', name);
    await page.click('#notifform button:text-is("Show devices")');
    const row = page.locator(`#ndevices tr[data-device="${device}"]`);
    await row.waitFor();
    const cells = await row.locator('td').allTextContents();
    expect(cells.slice(0, 3)).toEqual(['webpush', device, sub.endpoint.slice(0, 16) + '…']);
    expect(cells[3]).not.toBe('');
    const attempt = page.locator(`table[data-attempts-of="${device}"] tr[data-attempt="${conv}/${first.payload.seq}"]`);
    expect(await attempt.locator('[data-field=outcome]').textContent()).toBe('sent (201)');

    const before = push.received(sub).length;
    await page.click('#ntest');
    const answer = page.locator(`#ntestrows tr[data-test-device="${device}"]`);
    await answer.waitFor();
    expect(await answer.locator('[data-field=outcome]').textContent()).toBe('sent');
    expect(await answer.locator('[data-field=status]').textContent()).toBe('201');
    // The push service got it, and it decrypts to the test notification.
    const got = push.received(sub).slice(before);
    expect(got.length).toBe(1);
    expect(checkPush(got[0]!, sub, vapidKey, SUBJECT).payload).toMatchObject({ title: 'Test notification' });
    // The device's log now has the test attempt too.
    await page.locator(`table[data-attempts-of="${device}"] tr[data-attempt="test"]`).waitFor();
    await page.locator('#notif').scrollIntoViewIfNeeded();
    await screenshot(page, 'admin-push');
  });

  it('turning Notifications off unregisters this browser and ends its subscription', async () => {
    const { page, errors } = await newPage(ctx, srv.http);
    await signIn(page, name);
    await settled(page, true);
    await toggle(page).click();
    await settled(page, false);
    expect(await status(page)).toBe('');
    expect(await page.evaluate(() => (window as unknown as { __push: { unsubscribe: number } }).__push.unsubscribe)).toBe(1);
    expect(await pushDevices(name)).toEqual([]);
    expect((await admin<{ devices: unknown[] }>(`/v1/admin/users/${name}/push/test`, 'POST')).devices).toEqual([]);
    // Off is remembered too.
    await page.reload();
    await page.waitForSelector('#app:not([hidden])');
    await settled(page, false);
    expect(await pushDevices(name)).toEqual([]);
    expect(errors).toEqual([]);
  });
});

describe('Notifications toggle where it cannot work', () => {
  it('permission denied by the browser: a message says so and nothing is registered', async () => {
    const sub = push.subscribe();
    const ctx = await browser.newContext(); // no permission granted: headless Chromium denies the request
    contexts.push(ctx);
    await ctx.addInitScript(pushManagerStub, sub.keys());
    const { page, errors } = await newPage(ctx, srv.http);
    const name = uniqueName('dora');
    await signUp(page, name);
    await settled(page, false);
    await toggle(page).click();
    await page.waitForSelector('#notify-status:has-text("blocked")');
    await settled(page, false);
    expect(await page.evaluate(() => Notification.permission)).toBe('denied');
    expect(await pushDevices(name)).toEqual([]);
    expect(errors).toEqual([]);
  });

  it('a server with Web Push off: the toggle is disabled and says why', async () => {
    const off = await startServer(inject('parleyBin'), undefined, { config: 'webpush_off: true\n' });
    try {
      const ctx = await browser.newContext();
      contexts.push(ctx);
      await ctx.grantPermissions(['notifications'], { origin: off.http });
      const { page, errors } = await newPage(ctx, off.http);
      await signUp(page, uniqueName('olga'));
      await page.waitForSelector('#notify-status:has-text("turned off")');
      expect(await toggle(page).isDisabled()).toBe(true);
      expect(await toggle(page).isChecked()).toBe(false);
      expect(await status(page)).toBe('This server has push notifications turned off.');
      expect(errors).toEqual([]);
    } finally {
      await off.dispose();
    }
  });

  it('a page on plain http (not localhost): the toggle is disabled and asks for https', async () => {
    // parley.test resolves to the server, but is not a secure origin as 127.0.0.1 is.
    const b = await launch(['--host-resolver-rules=MAP parley.test 127.0.0.1']);
    try {
      const page = await (await b.newContext()).newPage();
      const base = `http://parley.test:${srv.port}`;
      await page.goto(base + '/');
      expect(await page.evaluate(() => window.isSecureContext)).toBe(false);
      await signUp(page, uniqueName('ivan'));
      await page.waitForSelector('#notify-status:has-text("https://")');
      expect(await toggle(page).isDisabled()).toBe(true);
      expect(await toggle(page).isChecked()).toBe(false);
    } finally {
      await b.close();
    }
  });
});

// The checks above are only worth something if they can fail: a push for
// another subscription, signed with another key or for another subject, or
// altered on the way, is refused.
describe('the local push service checks what it gets', () => {
  it('refuses a wrong subject, key, signature, subscription or body', async () => {
    const sub = push.subscribe();
    const [to, from] = await Promise.all([newUser(srv, 'tia'), newUser(srv, 'flo')]);
    const ct = connect(srv, to);
    await ct.waitReady(5000);
    await ct.registerPush({ webpush: sub.keys() });
    ct.close(); // offline: the next message is pushed
    const ack = await connect(srv, from).sendText(to.id, 'check me');
    const { req, checked } = await pushFor(sub, ack.seq);
    expect(checked.payload).toMatchObject({ title: from.id, body: 'check me' });

    expect(() => checkPush(req, sub, vapidKey, 'mailto:someone@example.com')).toThrow(/sub/);
    expect(() => checkPush(req, push.subscribe(), vapidKey, SUBJECT)).toThrow();
    const otherKey = vapidKey.slice(0, 10) + (vapidKey[10] === 'A' ? 'B' : 'A') + vapidKey.slice(11);
    expect(() => checkPush(req, sub, otherKey, SUBJECT)).toThrow(/k=/);
    const auth = req.headers.authorization!;
    const forged = auth.replace(/(t=[^.]+\.[^.]+\.)(.)/, (_, head: string, c: string) => head + (c === 'A' ? 'B' : 'A'));
    expect(forged).not.toBe(auth);
    expect(() => checkPush({ ...req, headers: { ...req.headers, authorization: forged } }, sub, vapidKey, SUBJECT)).toThrow(/signature/);
    const body = Buffer.from(req.body);
    body[body.length - 20]! ^= 1;
    expect(() => checkPush({ ...req, body }, sub, vapidKey, SUBJECT)).toThrow();
  });
});

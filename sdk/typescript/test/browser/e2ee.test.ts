// End-to-end encryption in Chromium: the SDK's browser modules (as the
// server serves them) with keys in IndexedDB, and the web client's
// encrypted conversations.
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { register } from '../../src/index.js';
import { startServer, uniqueName, waitFor, type RunningServer } from '../helpers/server.js';
import { bubbles, expectAccessible, launch, newPage, openConversation, screenshot, sendText, signIn, signUp } from '../helpers/browser.js';

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

async function context(): Promise<BrowserContext> {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 760 } });
  contexts.push(ctx);
  return ctx;
}

// In the page: an SDK client and its E2EE layer over IndexedDB, on window.t.
// (A string: the test's own code is transformed by vitest, whose import() the page lacks.)
async function startDevice(page: Page, token: string, deviceId: string): Promise<void> {
  await page.evaluate(`(async () => {
    const sdk = await import('/parley-sdk.js');
    const mod = await import('/parley-e2ee.js');
    const client = new sdk.ParleyClient({ url: 'ws://' + location.host + '/ws', token: ${JSON.stringify(token)}, deviceId: ${JSON.stringify(deviceId)}, deviceType: 'web' });
    const store = new mod.IndexedDBKeyStore('parley-e2ee-test/' + ${JSON.stringify(deviceId)});
    const got = [];
    const e2ee = mod.createE2EE(client, { store, keyPackageTarget: 5, keyPackageLow: 2 });
    e2ee.on('message', (m) => got.push({ seq: m.seq, text: m.plaintext ? new TextDecoder().decode(m.plaintext) : '', error: m.e2eeError ? m.e2eeError.code : '' }));
    await e2ee.ready;
    window.t = { client, e2ee, store, got };
  })()`);
}

type T = { client: { userId: string }; e2ee: Record<string, (...a: unknown[]) => Promise<unknown>>; store: { keys(p: string): Promise<string[]> }; got: { seq: number; text: string; error: string }[] };
const inPage = <R,>(page: Page, f: (t: T, arg: string) => Promise<R> | R, arg = ''): Promise<R> =>
  page.evaluate(({ src, arg }) => new Function('t', 'arg', `return (${src})(t, arg)`)((window as unknown as { t: T }).t, arg), { src: f.toString(), arg }) as Promise<R>;

describe('end-to-end encryption in Chromium', () => {
  it('the SDK in two browsers: encrypted messages both ways, keys and state kept in IndexedDB across a reload', async () => {
    const a = await register({ baseUrl: srv.http }, uniqueName('alice'), 'pw-alice-secret');
    const b = await register({ baseUrl: srv.http }, uniqueName('bob'), 'pw-bob-secret');
    const pa = (await newPage(await context(), srv.http)).page;
    const bctx = await context();
    let pb = (await newPage(bctx, srv.http)).page;
    await startDevice(pa, a.token, 'alice-web');
    await startDevice(pb, b.token, 'bob-web');
    expect((await inPage(pb, (t) => t.store.keys('kp/'))).length).toBe(6); // 5 one-time and the last-resort package

    const conv = await inPage(pa, async (t, bob) => ((await t.e2ee.createDirect!(bob)) as { conversationId: string }).conversationId, b.user_id);
    await inPage(pa, (t, c) => t.e2ee.send!(c, 'hello from chromium'), conv);
    await waitFor(async () => (await inPage(pb, (t) => t.got.map((m) => m.text))).includes('hello from chromium'), 15_000, 'bob decrypts');
    await inPage(pb, (t, c) => t.e2ee.send!(c, 'hello back'), conv);
    await waitFor(async () => (await inPage(pa, (t) => t.got.map((m) => m.text))).includes('hello back'), 15_000, 'alice decrypts');

    // Bob reloads: the same device with the same IndexedDB reads its history
    // (from its store: MLS keys are used once) and decrypts what comes next.
    await pb.close();
    pb = (await newPage(bctx, srv.http)).page;
    await startDevice(pb, b.token, 'bob-web');
    const hist = await inPage(pb, async (t, c) => {
      const h = (await t.e2ee.history!(c, 0, 50)) as { messages: { plaintext?: Uint8Array }[] };
      return h.messages.filter((m) => m.plaintext).map((m) => new TextDecoder().decode(m.plaintext));
    }, conv);
    expect(hist).toEqual(['hello from chromium', 'hello back']);
    await inPage(pa, (t, c) => t.e2ee.send!(c, 'after your reload'), conv);
    await waitFor(async () => (await inPage(pb, (t) => t.got.map((m) => m.text))).includes('after your reload'), 15_000, 'bob decrypts after reload');
    expect(await inPage(pb, (t) => t.got.filter((m) => m.error).length)).toBe(0);
  });

  it('the web client: start an encrypted chat, a lock on it, messages shown decrypted on both sides', async () => {
    const actx = await context();
    const bctx = await context();
    const { page: pa, errors: ea } = await newPage(actx, srv.http);
    const { page: pb, errors: eb } = await newPage(bctx, srv.http);
    const alice = uniqueName('alice');
    const bob = uniqueName('bob');
    await signUp(pa, alice);
    await signUp(pb, bob);
    // Both devices have published their KeyPackages.
    for (const p of [pa, pb]) await p.waitForFunction(() => (window as unknown as { parleyE2EE?: { ready: Promise<void> } }).parleyE2EE?.ready.then(() => true));

    await pa.click('#new-chat-btn');
    await pa.fill('#new-chat-user', bob);
    await pa.check('#new-chat-e2ee');
    await expectAccessible(pa, 'new chat dialog with the encryption choice');
    await pa.click('#new-chat-form button[value=ok]');
    const title = `${alice} & ${bob}`;
    await pa.waitForSelector(`#chat-title:text-is("${title}")`);
    expect(await pa.isVisible('#chat-lock')).toBe(true);
    expect(await pa.isDisabled('#attach-btn')).toBe(true);
    await sendText(pa, 'secret hello');
    await pa.waitForSelector('#msg-list li.msg.mine .body:text-is("secret hello")');

    const row = pb.locator(`#conv-list li.conv:has(.title:text-is("${title}"))`);
    await row.waitFor();
    expect(await row.locator('.lock').count()).toBe(1);
    await openConversation(pb, title);
    await pb.waitForSelector('#msg-list li.msg .body:text-is("secret hello")');
    expect(await pb.isVisible('#chat-lock')).toBe(true);
    await sendText(pb, 'secret reply');
    await pa.waitForSelector('#msg-list li.msg:not(.mine) .body:text-is("secret reply")');
    expect(await bubbles(pa)).toEqual(['secret hello', 'secret reply']);
    await screenshot(pa, 'e2ee-chat');

    // Alice reloads: the same device (its IndexedDB) shows the history decrypted, with the lock,
    // also when she opens the conversation before the E2EE module has loaded (held back here).
    await pa.route('**/parley-e2ee.js', async (route) => {
      await new Promise((r) => setTimeout(r, 1500));
      await route.continue();
    });
    await pa.reload();
    await pa.waitForSelector('#app:not([hidden])');
    await openConversation(pa, title);
    await pa.waitForSelector('#msg-list li.msg .body:text-is("secret reply")');
    expect(await bubbles(pa)).toEqual(['secret hello', 'secret reply']);
    expect(await pa.isVisible('#chat-lock')).toBe(true);

    // Alice on a new device (another browser): it was not in the group when they were
    // sent, so they show as encrypted messages it cannot read, not as blanks or errors.
    const { page: pa2, errors: ea2 } = await newPage(await context(), srv.http);
    await signIn(pa2, alice);
    await openConversation(pa2, title);
    await pa2.waitForSelector('#msg-list li.msg .body:text-is("Encrypted message: sent before this device joined")');
    expect(await bubbles(pa2)).toEqual(['Encrypted message: sent before this device joined', 'Encrypted message: sent before this device joined']);
    expect(await pa2.isVisible('#chat-lock')).toBe(true);
    expect([...ea, ...eb, ...ea2]).toEqual([]);
  });
});

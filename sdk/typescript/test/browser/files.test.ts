import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { makePng } from '../helpers/png.js';
import { startServer, uniqueName, waitFor, type RunningServer } from '../helpers/server.js';
import { launch, newPage, openChatWith, openConversation, screenshot, signUp } from '../helpers/browser.js';

let srv: RunningServer;
let browser: Browser;
const contexts: BrowserContext[] = [];
const allErrors: string[][] = [];

beforeAll(async () => {
  [srv, browser] = await Promise.all([
    // Any image, text, audio, video or PDF; other files (opaque bytes) are refused.
    startServer(inject('parleyBin'), undefined, { config: 'media_allowed_types: ["image/*", "text/*", "audio/*", "video/*", "application/pdf"]\n' }),
    launch(),
  ]);
});
afterAll(async () => {
  for (const c of contexts) await c.close().catch(() => {});
  await browser?.close();
  await srv?.dispose();
});

async function user(prefix: string, viewport = { width: 1100, height: 760 }): Promise<{ page: Page; name: string; errors: string[] }> {
  const ctx = await browser.newContext({ viewport, acceptDownloads: true });
  contexts.push(ctx);
  const { page, errors } = await newPage(ctx, srv.http);
  allErrors.push(errors);
  const name = uniqueName(prefix);
  await signUp(page, name);
  return { page, name, errors };
}

/** A mono 16-bit PCM WAV of the given length (a tone). */
function makeWav(ms: number, rate = 8000): Buffer {
  const n = Math.round((rate * ms) / 1000);
  const b = Buffer.alloc(44 + n * 2);
  b.write('RIFF', 0);
  b.writeUInt32LE(36 + n * 2, 4);
  b.write('WAVEfmt ', 8);
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20); // PCM
  b.writeUInt16LE(1, 22); // mono
  b.writeUInt32LE(rate, 24);
  b.writeUInt32LE(rate * 2, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write('data', 36);
  b.writeUInt32LE(n * 2, 40);
  for (let i = 0; i < n; i++) b.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / rate)), 44 + i * 2);
  return b;
}

const draft = (page: Page, name: string) => page.locator(`#tray li.draft:has(.draft-name:text-is("${name}"))`);

/** Sends what the composer holds once its uploads are done. */
async function sendWhenUploaded(page: Page, text = ''): Promise<void> {
  await page.waitForSelector('#send-btn:not([disabled])');
  if (text) await page.fill('#composer-input', text);
  await page.click('#send-btn');
  await page.waitForSelector('#tray', { state: 'hidden' });
}

describe('files in the web client', () => {
  it('an image attached with the file picker: the peer sees its thumbnail in place and opens the full image', async () => {
    const a = await user('ada');
    const b = await user('bo');
    await openChatWith(a.page, b.name);

    const png = makePng(640, 480, 7);
    await a.page.setInputFiles('#file-input', { name: 'beach.png', mimeType: 'image/png', buffer: png });
    await draft(a.page, 'beach.png').and(a.page.locator('[data-status=done]')).waitFor();
    expect(await draft(a.page, 'beach.png').locator('.draft-status').textContent()).toMatch(/ready/);
    await sendWhenUploaded(a.page, 'the beach');
    // The sender's own message shows the picture too.
    await a.page.waitForSelector('#msg-list li.msg.mine:has(.body:text-is("the beach")) .att-image.loaded');

    const row = b.page.locator(`#conv-list li.conv:has(.title:text-is("${a.name}"))`);
    await row.locator('.last:text-is("the beach")').waitFor();
    await openConversation(b.page, a.name);
    const thumb = b.page.locator('#msg-list li.msg .att-image');
    await thumb.and(b.page.locator('.loaded')).waitFor();
    // The thumbnail (320 px wide), in a box of the image's proportions.
    expect(await thumb.locator('img').evaluate((i: HTMLImageElement) => i.naturalWidth)).toBe(320);
    const box = (await thumb.boundingBox())!;
    expect(Math.round(box.width)).toBe(240);
    expect(Math.round(box.height)).toBe(180);
    expect(await b.page.textContent('#msg-list li.msg:has(.att-image) .body')).toBe('the beach');
    await screenshot(b.page, 'files-image-peer');

    // The viewer: labelled by the file's name, focus inside, the full image loads; Esc closes it.
    await thumb.click();
    const viewer = b.page.getByRole('dialog', { name: 'beach.png' });
    await viewer.waitFor();
    await waitFor(() => b.page.$eval('#viewer-img', (i) => (i as HTMLImageElement).complete && (i as HTMLImageElement).naturalWidth > 0), 10000, 'the full image');
    expect(await b.page.$eval('#viewer-img', (i) => (i as HTMLImageElement).naturalWidth)).toBe(640);
    expect(await b.page.evaluate(() => !!document.activeElement?.closest('dialog#viewer'))).toBe(true);
    await screenshot(b.page, 'files-viewer');
    await b.page.keyboard.press('Escape');
    await viewer.waitFor({ state: 'hidden' });
    expect(await b.page.evaluate(() => document.activeElement?.classList.contains('att-image'))).toBe(true);
    // From the keyboard: Enter on the focused thumbnail opens it again; a click on the image closes it.
    await b.page.keyboard.press('Enter');
    await viewer.waitFor();
    await b.page.waitForFunction(() => (document.getElementById('viewer-img') as HTMLImageElement).naturalWidth > 0);
    await b.page.click('#viewer-img');
    await viewer.waitFor({ state: 'hidden' });
    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('a document is a download card that downloads the same bytes; audio plays in place', async () => {
    const a = await user('cy');
    const b = await user('di');
    await openChatWith(a.page, b.name);
    const notes = Buffer.from('Shopping list\n- bread\n- cheese\n'.repeat(50));
    const wav = makeWav(1500);
    await a.page.setInputFiles('#file-input', [
      { name: 'notes.txt', mimeType: 'text/plain', buffer: notes },
      { name: 'tone.wav', mimeType: 'audio/wav', buffer: wav },
    ]);
    await a.page.locator('#tray li.draft[data-status=done]').nth(1).waitFor();
    await sendWhenUploaded(a.page);

    await b.page.locator(`#conv-list li.conv:has(.title:text-is("${a.name}")) .last:text-is("📎 2 files")`).waitFor();
    await openConversation(b.page, a.name);
    const card = b.page.locator('#msg-list .att-file:has(.att-name:text-is("notes.txt"))');
    await card.waitFor();
    expect(await card.locator('.att-sub').textContent()).toBe('1.6 KB · text/plain');
    expect(await card.getAttribute('aria-label')).toBe('Download notes.txt, 1.6 KB');
    const [download] = await Promise.all([b.page.waitForEvent('download'), card.click()]);
    expect(download.suggestedFilename()).toBe('notes.txt');
    expect(readFileSync((await download.path())!).equals(notes)).toBe(true);

    // The audio player has the file: its length is known.
    await b.page.locator('#msg-list .att-audio.loaded').waitFor();
    const duration = await b.page.$eval('#msg-list .att-audio audio', (e) => (e as HTMLAudioElement).duration);
    expect(duration).toBeCloseTo(1.5, 1);
    await screenshot(b.page, 'files-card-audio');
    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('paste and drop attach files; a large one goes resumably; refused and cancelled ones say so', async () => {
    const a = await user('ed');
    const other = await user('gil');
    await openChatWith(a.page, other.name);

    // Paste an image from the clipboard into the message box.
    const shot = makePng(300, 200, 3);
    await a.page.evaluate((b64) => {
      const bytes = Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0));
      const dt = new DataTransfer();
      dt.items.add(new File([bytes], 'image.png', { type: 'image/png' }));
      document.getElementById('composer-input')!.dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true }));
    }, shot.toString('base64'));
    await draft(a.page, 'image.png').and(a.page.locator('[data-status=done]')).waitFor();

    // Drop files onto the conversation: an image of over 4 MiB (sent resumably, with tus) and a file of a refused type.
    const big = makePng(1500, 1400, 5);
    expect(big.length).toBeGreaterThan(4 << 20);
    await a.page.evaluate(
      ([bigB64, binB64]) => {
        const file = (b64: string, name: string, type: string) => new File([Uint8Array.from(atob(b64), (ch) => ch.charCodeAt(0))], name, { type });
        const dt = new DataTransfer();
        dt.items.add(file(bigB64!, 'panorama.png', 'image/png'));
        dt.items.add(file(binB64!, 'data.bin', 'application/octet-stream'));
        const target = document.getElementById('messages')!;
        target.dispatchEvent(new DragEvent('dragenter', { dataTransfer: dt, bubbles: true, cancelable: true }));
        if (!document.getElementById('chat')!.classList.contains('dropping')) throw new Error('no drop highlight');
        target.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
      },
      [big.toString('base64'), randomBytes(3000).toString('base64')],
    );
    expect(await a.page.$eval('#chat', (e) => e.classList.contains('dropping'))).toBe(false);
    await draft(a.page, 'data.bin').and(a.page.locator('.failed')).waitFor();
    expect(await draft(a.page, 'data.bin').locator('.draft-status').textContent()).toBe('This type of file is not allowed here.');
    await draft(a.page, 'panorama.png').and(a.page.locator('[data-status=done]')).waitFor({ timeout: 30000 });

    // A stalled upload: Send waits for it; its × cancels it.
    await a.page.route('**/v1/files?*', () => {}); // never answered
    await a.page.setInputFiles('#file-input', { name: 'slow.png', mimeType: 'image/png', buffer: makePng(50, 50, 9) });
    await draft(a.page, 'slow.png').and(a.page.locator('[data-status=uploading]')).waitFor();
    expect(await a.page.isDisabled('#send-btn')).toBe(true);
    await screenshot(a.page, 'files-tray');
    await draft(a.page, 'slow.png').getByRole('button', { name: 'Cancel slow.png' }).click();
    await draft(a.page, 'slow.png').waitFor({ state: 'detached' });
    await a.page.unroute('**/v1/files?*');

    // Send: the two images go; the refused file stays in the tray with its error until removed.
    await a.page.waitForSelector('#send-btn:not([disabled])');
    await a.page.click('#send-btn');
    await a.page.locator('#msg-list li.msg.mine .att-image.loaded').nth(1).waitFor({ timeout: 15000 });
    expect(await a.page.locator('#tray li.draft').count()).toBe(1);
    await draft(a.page, 'data.bin').getByRole('button', { name: 'Remove data.bin' }).click();
    await a.page.waitForSelector('#tray', { state: 'hidden' });

    await openConversation(other.page, a.name);
    await other.page.locator('#msg-list li.msg .att-image.loaded').nth(1).waitFor();
    const sizes = await other.page.$$eval('#msg-list li.msg .att-image', (els) => els.map((e) => [Math.round(e.getBoundingClientRect().width), Math.round(e.getBoundingClientRect().height)]));
    expect(sizes).toEqual([
      [240, 160],
      [240, 224],
    ]);
    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('fits a phone (375 px): the tray, images and cards stay inside the screen', async () => {
    const peer = await user('hal');
    const p = await user('ines', { width: 375, height: 700 });
    await openChatWith(p.page, peer.name);
    await p.page.setInputFiles('#file-input', [
      { name: 'a-very-long-file-name-for-a-small-screen-report-final-v2.txt', mimeType: 'text/plain', buffer: Buffer.from('report\n'.repeat(100)) },
      { name: 'tall.png', mimeType: 'image/png', buffer: makePng(300, 900, 2) },
    ]);
    await p.page.locator('#tray li.draft[data-status=done]').nth(1).waitFor();
    const overflow = () => p.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    expect(await overflow()).toBeLessThanOrEqual(0);
    await screenshot(p.page, 'files-phone-tray');
    await sendWhenUploaded(p.page, 'for you');
    await p.page.locator('#msg-list li.msg.mine .att-image.loaded').waitFor();
    await p.page.locator('#msg-list li.msg.mine .att-file').waitFor();
    expect(await overflow()).toBeLessThanOrEqual(0);
    const card = (await p.page.locator('#msg-list .att-file').boundingBox())!;
    expect(card.x + card.width).toBeLessThanOrEqual(375);
    const img = (await p.page.locator('#msg-list .att-image').boundingBox())!;
    expect([Math.round(img.width), Math.round(img.height)]).toEqual([80, 240]);
    await screenshot(p.page, 'files-phone-chat');
    for (const e of allErrors) expect(e).toEqual([]);
  });
});

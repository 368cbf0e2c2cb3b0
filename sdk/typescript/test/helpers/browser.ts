// Real Chromium (Debian's package) driven by playwright-core. Never downloads a browser.
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { expect } from 'vitest';

export const CHROMIUM = process.env.CHROMIUM_PATH || '/usr/bin/chromium';
export const shotsDir = resolve(import.meta.dirname, '../../test-results/screenshots');

/** Launches Chromium; extraArgs are added to its command line. */
export async function launch(extraArgs: string[] = []): Promise<Browser> {
  if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu', ...extraArgs],
  });
}

/** Page errors and console errors, except the network errors a server restart causes. */
export function watchErrors(page: Page): string[] {
  const errors: string[] = [];
  page.on('pageerror', (e) => errors.push('pageerror: ' + e.message));
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const t = m.text();
    if (/WebSocket connection to .* failed|ERR_CONNECTION_REFUSED|Failed to load resource/.test(t)) return;
    errors.push('console: ' + t);
  });
  return errors;
}

export async function newPage(ctx: BrowserContext, base: string): Promise<{ page: Page; errors: string[] }> {
  const page = await ctx.newPage();
  const errors = watchErrors(page);
  await page.goto(base + '/');
  return { page, errors };
}

/** Registers through the page's own form; resolves once the chat app shows. */
export async function signUp(page: Page, user: string, password = `pw-${user}-secret`): Promise<void> {
  await page.fill('#auth-user', user);
  await page.fill('#auth-pass', password);
  await page.click('#register-btn');
  await page.waitForSelector('#app:not([hidden])');
  await page.waitForSelector('#banner', { state: 'hidden' }); // connected and caught up
}

/** Signs in through the page's form. */
export async function signIn(page: Page, user: string, password = `pw-${user}-secret`): Promise<void> {
  await page.fill('#auth-user', user);
  await page.fill('#auth-pass', password);
  await page.click('#login-btn');
  await page.waitForSelector('#app:not([hidden])');
}

export async function openChatWith(page: Page, user: string): Promise<void> {
  await page.click('#new-chat-btn');
  await page.fill('#new-chat-user', user);
  await page.click('#new-chat-form button[value=ok]');
  await page.waitForSelector('#chat-title:text-is("' + user + '")');
}

export async function openConversation(page: Page, title: string): Promise<void> {
  await page.click(`#conv-list li.conv:has(.title:text-is("${title}"))`);
  await page.waitForSelector(`#chat-title:text-is("${title}")`);
}

export async function sendText(page: Page, text: string): Promise<void> {
  await page.fill('#composer-input', text);
  await page.press('#composer-input', 'Enter');
}

/** The texts of the message bubbles on screen, top to bottom. */
export function bubbles(page: Page): Promise<string[]> {
  return page.$$eval('#msg-list li.msg .body', (els) => els.map((e) => e.textContent ?? ''));
}

/** Takes a screenshot, saves it under test-results/screenshots, and checks it is not blank:
 *  many distinct colours and a good share of pixels differing from the background. */
export async function screenshot(page: Page, name: string): Promise<Buffer> {
  mkdirSync(shotsDir, { recursive: true });
  const png = await page.screenshot({ path: join(shotsDir, name + '.png') });
  // Analysed in a blank page of the same browser: the page under test may
  // have a Content-Security-Policy that refuses data: images.
  const blank = await page.context().newPage();
  const stats = await blank.evaluate(async (b64: string) => {
    const img = new Image();
    img.src = 'data:image/png;base64,' + b64;
    await img.decode();
    const c = document.createElement('canvas');
    c.width = img.width;
    c.height = img.height;
    const g = c.getContext('2d')!;
    g.drawImage(img, 0, 0);
    const d = g.getImageData(0, 0, c.width, c.height).data;
    const counts = new Map<number, number>();
    for (let i = 0; i < d.length; i += 4) {
      const k = (d[i]! << 16) | (d[i + 1]! << 8) | d[i + 2]!;
      counts.set(k, (counts.get(k) ?? 0) + 1);
    }
    let top = 0; // (a loop: spreading a photo's hundreds of thousands of colours overflows the stack)
    for (const n of counts.values()) if (n > top) top = n;
    return { colors: counts.size, nonBackground: 1 - top / (d.length / 4), width: img.width, height: img.height };
  }, png.toString('base64'));
  await blank.close();
  expect(stats.width).toBeGreaterThan(300);
  expect(stats.colors, `${name}: distinct colours`).toBeGreaterThan(50);
  expect(stats.nonBackground, `${name}: share of non-background pixels`).toBeGreaterThan(0.01);
  return png;
}

const AXE = resolve(import.meta.dirname, '../../node_modules/axe-core/axe.min.js');

/** Runs axe-core on the page (its open dialog, if any, included) and fails on any violation of
 *  impact serious or critical, listing each rule with the first elements it names. */
export async function expectAccessible(page: Page, what: string): Promise<void> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.addScriptTag({ path: AXE });
  const found = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: unknown, opts: unknown) => Promise<{ violations: { id: string; impact: string; help: string; nodes: { target: string[]; failureSummary?: string }[] }[] }> } }).axe;
    const r = await axe.run(document, { resultTypes: ['violations'] });
    return r.violations
      .filter((v) => v.impact === 'serious' || v.impact === 'critical')
      .map((v) => `${v.id} (${v.impact}): ${v.help}\n` + v.nodes.slice(0, 4).map((n) => `    ${n.target.join(' ')}: ${n.failureSummary ?? ''}`).join('\n'));
  });
  expect(found, `${what}: accessibility violations`).toEqual([]);
}

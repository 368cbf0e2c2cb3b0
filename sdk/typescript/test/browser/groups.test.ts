import { afterAll, beforeAll, describe, expect, it, inject } from 'vitest';
import { createRequire } from 'node:module';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { register } from '../../src/index.js';
import { startServer, uniqueName, type RunningServer } from '../helpers/server.js';
import { launch, newPage, openConversation, sendText, signUp } from '../helpers/browser.js';

// The members panel of a group in the web client (groups.js): each role sees
// the actions the server allows it, and the others' screens follow live.
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

interface User {
  page: Page;
  name: string;
}

/** A user signed up in a browser context of their own; before prepares the context (before the app opens its socket). */
async function user(prefix: string, before?: (ctx: BrowserContext) => Promise<void>): Promise<User> {
  const ctx = await browser.newContext({ viewport: { width: 1100, height: 760 } });
  contexts.push(ctx);
  if (before) await before(ctx);
  const { page, errors } = await newPage(ctx, srv.http);
  allErrors.push(errors);
  page.on('dialog', (d) => d.accept()); // the panel confirms removals, transfers, leaving, dissolving
  const name = uniqueName(prefix);
  await signUp(page, name);
  return { page, name };
}

async function createGroup(page: Page, name: string, members: string[]): Promise<void> {
  await page.click('#new-group-btn');
  await page.fill('#group-name', name);
  await page.fill('#group-members', members.join(', '));
  await page.click('#group-ok');
  await page.waitForSelector(`#chat-title:text-is("${name}")`);
}

const panel = '#members-dialog';
const row = (page: Page, u: string) => page.locator(`${panel} li.gp-member[data-user="${u}"]`);

async function openMembers(page: Page, withList = true): Promise<void> {
  await page.click('#members-btn');
  await page.waitForSelector(`${panel}[open]`);
  if (withList) await page.locator(`${panel} li.gp-member`).first().waitFor();
}

/** Opens a member's actions in the panel (unless open) and clicks one. */
async function manage(page: Page, u: string, action: string): Promise<void> {
  const r = row(page, u);
  if ((await r.locator('.gp-manage').getAttribute('aria-expanded')) !== 'true') await r.locator('.gp-manage').click();
  await r.locator(`button[data-action=${action}]`).click();
}

const roles = (page: Page) =>
  page.$$eval(`${panel} li.gp-member`, (els) => Object.fromEntries(els.map((e) => [(e as HTMLElement).dataset.user, (e as HTMLElement).dataset.role])));

/** Serious accessibility problems axe-core finds in the open dialog. */
async function axeViolations(page: Page, selector: string): Promise<string[]> {
  const require = createRequire(import.meta.url);
  await page.addScriptTag({ path: require.resolve('axe-core/axe.min.js') });
  return page.evaluate(async (sel) => {
    // @ts-expect-error axe is the global the script defines
    const r = await window.axe.run(sel, { resultTypes: ['violations'] });
    return r.violations.filter((v: { impact: string }) => v.impact === 'serious' || v.impact === 'critical').map((v: { id: string; help: string }) => `${v.id}: ${v.help}`);
  }, selector);
}

describe('group members panel in the web client (Chromium)', () => {
  it('owner and admin act where their role allows; a plain member sees no such actions; the others follow live', async () => {
    const a = await user('own');
    const b = await user('adm');
    const c = await user('mem');
    await createGroup(a.page, 'crew', [b.name, c.name]);
    await openConversation(b.page, 'crew');
    await openConversation(c.page, 'crew');

    // The owner: Add in the header, settings, Manage on every other member, Dissolve, no Leave.
    expect(await a.page.isVisible('#add-members-btn')).toBe(true);
    await openMembers(a.page);
    await a.page.waitForFunction((n) => document.querySelectorAll('#members-dialog li.gp-member').length === n, 3);
    expect(await roles(a.page)).toEqual({ [a.name]: 'owner', [b.name]: 'member', [c.name]: 'member' });
    expect(await a.page.isVisible(`${panel} .gp-settings`)).toBe(true);
    expect(await a.page.isVisible(`${panel} .gp-dissolve`)).toBe(true);
    expect(await a.page.isVisible(`${panel} .gp-leave`)).toBe(false);
    expect(await a.page.locator(`${panel} .gp-manage`).count()).toBe(2);
    expect(await axeViolations(a.page, panel)).toEqual([]);

    // A plain member: no Add (the group lets only admins add), no settings, no Manage, no Dissolve; Leave.
    expect(await b.page.isVisible('#add-members-btn')).toBe(false);
    await openMembers(b.page);
    expect(await roles(b.page)).toEqual({ [a.name]: 'owner', [b.name]: 'member', [c.name]: 'member' });
    for (const s of ['.gp-settings', '.gp-add', '.gp-dissolve', '.gp-manage']) expect(await b.page.isVisible(`${panel} ${s}`), s).toBe(false);
    expect(await b.page.isVisible(`${panel} .gp-leave`)).toBe(true);

    // The owner makes B an admin: B's panel follows, with the admin's actions (on members only).
    await manage(a.page, b.name, 'role');
    await b.page.waitForSelector(`${panel} li.gp-member[data-user="${b.name}"][data-role=admin]`);
    await b.page.waitForSelector(`${panel} .gp-status:text-is("You are now an admin.")`);
    await b.page.waitForSelector(`${panel} .gp-settings:visible`);
    expect(await row(b.page, c.name).locator('.gp-manage').count()).toBe(1);
    expect(await row(b.page, a.name).locator('.gp-manage').count()).toBe(0);
    await b.page.waitForSelector('#add-members-btn:visible');
    expect(await b.page.isVisible(`${panel} .gp-dissolve`)).toBe(false);
    await row(b.page, c.name).locator('.gp-manage').click();
    // An admin may not change roles or hand over the group.
    expect(await row(b.page, c.name).locator('button[data-action=role], button[data-action=transfer]').count()).toBe(0);

    // The owner renames the group: everyone's header follows.
    await a.page.fill(`${panel} .gp-rename input`, 'crew 2');
    await a.page.click(`${panel} .gp-rename button`);
    await b.page.waitForSelector('#chat-title:text-is("crew 2")');
    await b.page.waitForSelector(`${panel} #gp-title:text-is("crew 2")`);
    await c.page.waitForSelector('#chat-title:text-is("crew 2")');

    // The admin mutes C for an hour: C's message is refused.
    await manage(b.page, c.name, 'mute');
    await row(a.page, c.name).locator('.gp-muted').waitFor();
    await sendText(c.page, 'can I talk?');
    await c.page.waitForSelector('#msg-list li.pending[data-state=failed]:has(.why:text-is("muted"))');
    // Unmuted, C writes again.
    await manage(b.page, c.name, 'unmute');
    await row(a.page, c.name).locator('.gp-muted').waitFor({ state: 'detached' });
    await sendText(c.page, 'thanks');
    await a.page.waitForSelector('#msg-list li.msg .body:text-is("thanks")');

    // The admin removes C: C sees it at once, and can no longer write.
    await manage(b.page, c.name, 'remove');
    await row(a.page, c.name).waitFor({ state: 'detached' });
    await c.page.waitForSelector('#composer-input:disabled');
    await c.page.waitForSelector('#chat-sub:text-is("you were removed")');
    await openMembers(c.page, false); // a former member sees no list
    await c.page.waitForSelector(`${panel} .gp-sub:text-is("${b.name} removed you from this group.")`);
    expect(await c.page.locator(`${panel} li.gp-member`).count()).toBe(0);
    expect(await c.page.isVisible(`${panel} .gp-leave`)).toBe(false);

    // The owner adds C back from the panel: C may write again.
    await a.page.fill(`${panel} .gp-add input`, c.name);
    await a.page.click(`${panel} .gp-add button`);
    await row(a.page, c.name).waitFor();
    await c.page.waitForSelector('#composer-input:enabled');
    await c.page.waitForSelector(`${panel} li.gp-member[data-user="${c.name}"][data-role=member]`);

    // Mute everyone: a member's send is refused, an admin's is not.
    await a.page.click(`${panel} .gp-settings .switch`);
    await c.page.waitForSelector(`${panel} .gp-sub:has-text("everyone is muted")`);
    await c.page.keyboard.press('Escape');
    await c.page.waitForSelector(panel, { state: 'hidden' }); // Esc closes it
    await sendText(c.page, 'still muted?');
    await c.page.waitForSelector('#msg-list li.pending[data-state=failed]:has(.body:text-is("still muted?"))');
    await b.page.keyboard.press('Escape');
    await sendText(b.page, 'admins talk');
    await c.page.waitForSelector('#msg-list li.msg .body:text-is("admins talk")');

    // Mute-all off: C still may not add while only admins add; when every member may, C adds D.
    await a.page.click(`${panel} .gp-settings .switch`);
    await openMembers(c.page);
    await c.page.waitForSelector(`${panel} .gp-sub:text-is("You are a member")`);
    expect(await c.page.isVisible(`${panel} .gp-add`)).toBe(false);
    expect(await c.page.isVisible('#add-members-btn')).toBe(false);
    await a.page.selectOption(`${panel} [name=addPolicy]`, 'GROUP_ADD_POLICY_EVERYONE');
    await c.page.waitForSelector(`${panel} .gp-add:visible`);
    await c.page.waitForSelector('#add-members-btn:visible');
    const d = uniqueName('dan');
    await register({ baseUrl: srv.http }, d, `pw-${d}-secret`);
    await c.page.fill(`${panel} .gp-add input`, d);
    await c.page.click(`${panel} .gp-add button`);
    await row(a.page, d).waitFor();
    expect(await row(c.page, d).getAttribute('data-role')).toBe('member');

    for (const e of allErrors) expect(e).toEqual([]);
  });

  it('a refusal is said and the panel corrects itself; the owner hands over, leaves; the new owner dissolves', async () => {
    // B's screen misses the event that demotes B (dropped on the way), so B still sees an admin's actions.
    let dropRoleEvents = false;
    const b = await user('stale', async (ctx) => {
      await ctx.routeWebSocket(/\/ws$/, (ws) => {
        const server = ws.connectToServer();
        server.onMessage((m) => {
          if (dropRoleEvents && typeof m === 'string' && m.includes('MESSAGE_KIND_ROLE_CHANGED')) return;
          ws.send(m);
        });
      });
    });
    const a = await user('boss');
    const c = await user('heir');
    await createGroup(a.page, 'club', [b.name, c.name]);
    await openMembers(a.page);
    await manage(a.page, b.name, 'role');
    await openConversation(b.page, 'club');
    await openConversation(c.page, 'club');
    await openMembers(b.page);
    await b.page.waitForSelector(`${panel} li.gp-member[data-user="${b.name}"][data-role=admin]`);

    dropRoleEvents = true;
    await manage(a.page, b.name, 'role'); // back to member
    await row(a.page, b.name).and(a.page.locator('[data-role=member]')).waitFor();
    await manage(b.page, c.name, 'remove');
    await b.page.waitForSelector(`${panel} .gp-status.bad:has-text("Not allowed")`);
    // The panel read the group again: B is a member, without Manage.
    await b.page.waitForSelector(`${panel} li.gp-member[data-user="${b.name}"][data-role=member]`);
    expect(await b.page.locator(`${panel} .gp-manage`).count()).toBe(0);
    expect(await b.page.isVisible(`${panel} .gp-settings`)).toBe(false);
    expect(await row(a.page, c.name).count()).toBe(1); // C is still in
    dropRoleEvents = false;

    // The owner hands the group to C and becomes an admin, who may leave.
    await openMembers(c.page);
    await manage(a.page, c.name, 'transfer');
    await c.page.waitForSelector(`${panel} .gp-status:text-is("You are now the owner.")`);
    await c.page.waitForSelector(`${panel} .gp-dissolve:visible`);
    await a.page.waitForSelector(`${panel} li.gp-member[data-user="${a.name}"][data-role=admin]`);
    await a.page.waitForSelector(`${panel} .gp-leave:visible`);
    expect(await a.page.isVisible(`${panel} .gp-dissolve`)).toBe(false);
    await a.page.click(`${panel} .gp-leave`);
    await a.page.waitForSelector(`${panel} .gp-sub:text-is("You left this group.")`);
    await a.page.waitForSelector('#composer-input:disabled');
    await a.page.waitForSelector('#chat-sub:text-is("you left")');
    await row(c.page, a.name).waitFor({ state: 'detached' });

    // The new owner dissolves the group: the others' panels and composers follow.
    await c.page.click(`${panel} .gp-dissolve`);
    await b.page.waitForSelector(`${panel} .gp-status:text-is("${c.name} dissolved this group.")`);
    await b.page.waitForSelector(`${panel} .gp-sub:has-text("dissolved")`);
    await b.page.waitForSelector('#composer-input:disabled');
    await b.page.waitForSelector('#chat-sub:text-is("dissolved")');
    expect(await b.page.isVisible(`${panel} .gp-leave`)).toBe(false);
    await c.page.locator(`${panel} .gp-dissolve`).waitFor({ state: 'hidden' });

    for (const e of allErrors) expect(e).toEqual([]);
  });
});

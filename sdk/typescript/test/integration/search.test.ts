import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { ParleyError, type ParleyClient, type SearchMatch, type SearchOptions } from '../../src/index.js';
import { startServer, waitFor, type RunningServer } from '../helpers/server.js';
import { closeClients, connect, newUser } from '../helpers/users.js';

let srv: RunningServer;
beforeAll(async () => {
  srv = await startServer(inject('parleyBin'));
});
afterAll(async () => {
  await srv?.dispose();
});
afterEach(() => closeClients());

/** Every hit of a search, all pages. */
async function all(c: ParleyClient, query: string, opts: SearchOptions = {}): Promise<SearchMatch[]> {
  const out: SearchMatch[] = [];
  for await (const page of c.searchPages(query, opts)) out.push(...page.hits);
  return out;
}

/** Waits until query finds exactly `count` messages (the index follows the store a moment later). */
async function found(c: ParleyClient, query: string, count: number, opts: SearchOptions = {}): Promise<SearchMatch[]> {
  let last: SearchMatch[] = [];
  await waitFor(
    async () => {
      last = await all(c, query, opts);
      return last.length === count;
    },
    10_000,
    `"${query}" to find ${count} (found ${last.length})`,
  );
  return last;
}

/** The highlighted pieces of a hit, as the user would see them. */
const marked = (h: SearchMatch) => h.highlights.map((r) => h.snippet.slice(r.start, r.end));

describe('search against a real server', () => {
  it('finds words, CJK inside a run, phrases; highlights index the snippet after non-ASCII text', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    const a = connect(srv, alice);
    const b = connect(srv, bob);
    await Promise.all([a.waitReady(5000), b.waitReady(5000)]);
    const seqs: Record<string, number> = {};
    for (const t of [
      'Wir treffen uns an der Straße',
      '🎉🏮 the lantern parade starts at nine',
      '我们明天在图书馆门口见面',
      "Rendez-vous à l'Hôtel de Ville",
      'nine lanterns, not a parade',
    ])
      seqs[t] = (await a.sendText(bob.id, t)).seq;

    // Words, any order, case and accents ignored; the sender searches too.
    const [strasse] = await found(b, 'STRASSE', 1);
    expect(strasse!.seq).toBe(seqs['Wir treffen uns an der Straße']);
    expect(strasse!.from).toBe(alice.id);
    expect(strasse!.serverTime).toBeGreaterThan(Date.now() - 60_000);
    expect(marked(strasse!)).toEqual(['Straße']);
    const parade = await found(a, 'parade nine', 2);
    // Newest first.
    expect(parade.map((h) => h.seq)).toEqual([seqs['nine lanterns, not a parade'], seqs['🎉🏮 the lantern parade starts at nine']]);
    // Emoji (two UTF-16 units, four bytes each) before the match.
    const emoji = parade[1]!;
    expect(emoji.snippet).toContain('🎉🏮');
    expect(marked(emoji).sort()).toEqual(['nine', 'parade']);

    // Two Chinese characters inside a longer run.
    const [cjk] = await found(b, '图书', 1);
    expect(cjk!.seq).toBe(seqs['我们明天在图书馆门口见面']);
    expect(marked(cjk!).join('')).toContain('图书');
    await found(b, '东京', 0);

    // A phrase: the words in order.
    expect((await all(b, 'hotel de ville', { phrase: true })).map((h) => h.seq)).toEqual([seqs["Rendez-vous à l'Hôtel de Ville"]]);
    expect(await all(b, 'ville de hotel', { phrase: true })).toEqual([]);
    expect(await all(b, 'ville de hotel')).toHaveLength(1); // as words, any order
  });

  it('pages newest first without gaps or repeats, filters, and refuses bad requests', async () => {
    const alice = await newUser(srv, 'alice');
    const bob = await newUser(srv, 'bob');
    const carol = await newUser(srv, 'carol');
    const a = connect(srv, alice);
    const c = connect(srv, carol);
    await Promise.all([a.waitReady(5000), c.waitReady(5000)]);
    const sent: number[] = [];
    for (let i = 0; i < 23; i++) sent.push((await a.sendText(bob.id, `beacon number ${i}`)).seq);
    const conv = (await a.sendText(bob.id, 'beacon last')).conversationId;
    sent.push(sent[sent.length - 1]! + 1);
    await found(a, 'beacon', 24);

    const p1 = await a.search('beacon', { limit: 10 });
    expect(p1.hits).toHaveLength(10);
    expect(p1.next).toBeDefined();
    const p2 = await a.search('beacon', { limit: 10, before: p1.next });
    const p3 = await a.search('beacon', { limit: 10, before: p2.next });
    expect(p3.hits).toHaveLength(4);
    expect(p3.next).toBeUndefined();
    expect([...p1.hits, ...p2.hits, ...p3.hits].map((h) => h.seq)).toEqual([...sent].reverse());

    expect(await all(a, 'beacon', { conversationId: conv, from: bob.id })).toEqual([]);
    expect(await all(a, 'beacon', { conversationId: conv, from: alice.id, limit: 100 })).toHaveLength(24);
    expect(await all(c, 'beacon')).toEqual([]); // not carol's conversation

    const code = (p: Promise<unknown>) => p.then(() => 'ok', (e: unknown) => (e instanceof ParleyError ? e.code : String(e)));
    expect(await code(c.search('beacon', { conversationId: conv }))).toBe('ERROR_CODE_PERMISSION_DENIED');
    expect(await code(a.search(''))).toBe('ERROR_CODE_BAD_REQUEST');
    expect(await code(a.search('x'.repeat(257)))).toBe('ERROR_CODE_BAD_REQUEST');
    expect(await code(a.search('beacon', { limit: 101 }))).toBe('ERROR_CODE_BAD_REQUEST');
    expect(await code(a.search('beacon', { since: 2, until: 1 }))).toBe('ERROR_CODE_BAD_REQUEST');
  });
});

describe('search on a server with search off', () => {
  it('is refused with UNAVAILABLE at once', async () => {
    const off = await startServer(inject('parleyBin'), undefined, { config: 'search: off\n' });
    try {
      const u = await newUser(off, 'dora');
      const c = connect(off, u);
      await c.waitReady(5000);
      const t0 = Date.now();
      const err = await c.search('anything').catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ParleyError);
      expect((err as ParleyError).code).toBe('ERROR_CODE_UNAVAILABLE');
      expect(Date.now() - t0).toBeLessThan(2000); // not retried as a temporary error
    } finally {
      closeClients();
      await off.dispose();
    }
  });
});

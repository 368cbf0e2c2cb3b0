// Helpers for rich messages: applying reaction updates, mentions.
import type { Message, Reaction, ReactionUpdate } from './types.js';

/** What holds a message's reactions: a Message, or an app's own record of one. */
export interface ReactionHolder {
  reactions?: Reaction[];
  reactionVersion?: number;
}

/**
 * Applies a reaction update to a message (or anything holding its
 * `reactions` and `reactionVersion`) by the protocol's rule: an update older
 * than what the message holds is ignored; a newer one replaces the counts;
 * `me` is taken from personal updates only (from the others the `me` held is
 * kept for each emoji still there). An update of the version held changes
 * only `me`, and only when personal (the answer to your own react may arrive
 * after the update every member got). Returns whether anything changed.
 */
export function applyReaction(target: ReactionHolder, u: ReactionUpdate): boolean {
  const v = u.version ?? 0;
  const held = target.reactionVersion ?? 0;
  if (v < held || (v === held && !u.personal)) return false;
  const mine = new Set((target.reactions ?? []).filter((r) => r.me).map((r) => r.emoji));
  const next = (u.reactions ?? [])
    .filter((r) => (r.count ?? 0) > 0)
    .map((r): Reaction => {
      const me = u.personal ? !!r.me : mine.has(r.emoji);
      return me ? { emoji: r.emoji, count: r.count, me: true } : { emoji: r.emoji, count: r.count };
    });
  if (v === held && sameReactions(target.reactions ?? [], next)) return false;
  target.reactions = next.length ? next : undefined;
  target.reactionVersion = v;
  return true;
}

function sameReactions(a: Reaction[], b: Reaction[]): boolean {
  return a.length === b.length && a.every((r, i) => r.emoji === b[i]!.emoji && (r.count ?? 0) === (b[i]!.count ?? 0) && !!r.me === !!b[i]!.me);
}

/** Whether message m mentions userId: by name, or everyone (its sender excepted). */
export function mentionsUser(m: Pick<Message, 'mentions' | 'mentionAll' | 'from'>, userId: string): boolean {
  if (!userId || m.from === userId) return false;
  return !!m.mentionAll || !!m.mentions?.includes(userId);
}

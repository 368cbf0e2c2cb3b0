// Disappearing messages (docs/retention.md): the timers a conversation may
// have, and what a client needs to drop expired messages from view.
import type { Conversation, Message } from './types.js';

/** The disappearing-message timers the server accepts, in seconds (0: off);
 *  any other value is refused with ERROR_CODE_BAD_REQUEST. */
export const DISAPPEARING_TIMERS: readonly number[] = [0, 30, 300, 3600, 86400, 604800, 2419200];

/** Whether `seconds` is a timer the server accepts. */
export function isDisappearingTimer(seconds: number): boolean {
  return DISAPPEARING_TIMERS.includes(seconds);
}

/** Whether a message has disappeared by `now` (unix ms): drop it from view.
 *  The server no longer serves it from its `expiresAt` on. */
export function isExpired(m: Pick<Message, 'expiresAt'>, now: number = Date.now()): boolean {
  return (m.expiresAt ?? 0) !== 0 && m.expiresAt! <= now;
}

/** Milliseconds until a message disappears (undefined: it does not; 0:
 *  already gone). */
export function msUntilExpiry(m: Pick<Message, 'expiresAt'>, now: number = Date.now()): number | undefined {
  if (!m.expiresAt) return undefined;
  return Math.max(0, m.expiresAt - now);
}

/** A conversation's disappearing timer in seconds (0: off). */
export function disappearingSeconds(c: Pick<Conversation, 'disappearingSeconds'>): number {
  return c.disappearingSeconds ?? 0;
}

import type { DisconnectCode, ErrorCode } from './types.js';

/** What an error frame or body says besides its code and message. */
export interface ErrorDetails {
  /** ERROR_CODE_REJECTED: the text the app's moderation wants the sender to see. */
  reason?: string;
  /** ERROR_CODE_REJECTED: the rule that refused it ("word_filter" for the built-in filter). */
  rejectCode?: string;
}

/** The server refused a request (an `error` frame, or an HTTP error body). */
export class ParleyError extends Error {
  readonly code: ErrorCode | string;
  /**
   * Whether the same request may succeed later, as the server said
   * (`temporary` in the frame or body); undefined from servers that do not
   * send it. {@link isTemporary} falls back to the code then.
   */
  readonly temporary: boolean | undefined;
  /** The HTTP status of an HTTP answer (uploads, accounts, rpc); undefined for socket frames. */
  readonly status: number | undefined;
  /**
   * For ERROR_CODE_REJECTED (`rejected` over HTTP): the text the app's
   * moderation wants the sender to see; '' when it gave none (the word
   * filter gives none). Show it rather than a generic failure.
   */
  readonly reason: string;
  /**
   * For ERROR_CODE_REJECTED: the app's code for the rule that refused the
   * message ("word_filter" for the built-in word filter, the hook's own code
   * otherwise); '' for other errors.
   */
  readonly rejectCode: string;
  constructor(code: ErrorCode | string, message?: string, temporary?: boolean, status?: number, details: ErrorDetails = {}) {
    const reason = details.reason ?? '';
    const rejectCode = details.rejectCode ?? '';
    super(
      reason || rejectCode
        ? `parley: ${code}${rejectCode ? ' (' + rejectCode + ')' : ''}${reason ? ': ' + reason : ''}`
        : `parley: ${code}${message ? ': ' + message : ''}`,
    );
    this.name = 'ParleyError';
    this.code = code;
    this.temporary = temporary;
    this.status = status;
    this.reason = reason;
    this.rejectCode = rejectCode;
  }
}

/** Codes taken as temporary when a server does not send `temporary` (as
 *  the server's own table says; INTERNAL is not: damaged storage stays so). */
const temporaryCodes: ReadonlySet<string> = new Set([
  'ERROR_CODE_UNAVAILABLE',
  'ERROR_CODE_TOO_MANY_REQUESTS',
  'unavailable',
  'too_many_requests',
]);

/**
 * isTemporary reports whether err is a refusal after which the same request
 * may succeed: the server's `temporary`, or, from a server that does not send
 * it, a guess by the code.
 */
export function isTemporary(err: unknown): boolean {
  if (!(err instanceof ParleyError)) return false;
  return err.temporary ?? temporaryCodes.has(err.code);
}

/** The server closed the connection and said why (a `disconnect` frame). */
export class DisconnectError extends Error {
  readonly code: DisconnectCode;
  readonly reason: string;
  readonly reconnectAfterMs: number;
  constructor(code: DisconnectCode, reason = '', reconnectAfterMs = 0) {
    super(`parley: disconnected: ${code}${reason ? ' (' + reason + ')' : ''}`);
    this.name = 'DisconnectError';
    this.code = code;
    this.reason = reason;
    this.reconnectAfterMs = reconnectAfterMs;
  }
}

/** The connection (or the client) closed before the reply arrived. */
export class ClosedError extends Error {
  constructor(message = 'parley: connection closed') {
    super(message);
    this.name = 'ClosedError';
  }
}

/** No reply within the request timeout. */
export class TimeoutError extends Error {
  constructor(message = 'parley: request timed out') {
    super(message);
    this.name = 'TimeoutError';
  }
}

/**
 * isCode reports whether err is a ParleyError with this code. The HTTP API
 * (uploads, /v1/rpc) names the same refusals in snake_case
 * (`unsupported_media_type` for ERROR_CODE_UNSUPPORTED_MEDIA_TYPE): those
 * match too.
 */
export function isCode(err: unknown, code: ErrorCode): boolean {
  if (!(err instanceof ParleyError)) return false;
  return err.code === code || err.code === code.replace(/^ERROR_CODE_/, '').toLowerCase();
}

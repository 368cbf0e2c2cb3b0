import type { DisconnectCode, ErrorCode } from './types.js';

/** What an error frame or body says besides its code and message. */
export interface ErrorDetails {
  /** Over HTTP: the `code` of the error body as the server wrote it (snake_case). */
  apiCode?: string;
  /** ERROR_CODE_REJECTED: the text the app's moderation wants the sender to see. */
  reason?: string;
  /** ERROR_CODE_REJECTED: the rule that refused it ("word_filter" for the built-in filter). */
  rejectCode?: string;
}

/**
 * The server refused a request (an `error` frame, or an HTTP error answer),
 * or an HTTP request got no usable answer. `code` is one of the protocol's
 * ERROR_CODE_ names either way: the HTTP API's snake_case codes are mapped
 * to them ({@link errorCodeOfApi}), and `apiCode` keeps the one the server
 * wrote.
 */
export class ParleyError extends Error {
  /**
   * The protocol's code. (A server newer than this SDK may send one this
   * type does not list yet.)
   */
  readonly code: ErrorCode;
  /**
   * For an HTTP answer: the `code` of its error body as the server wrote it
   * (`conflict`, `invalid_credentials`, `not_found`, ...), which tells apart
   * refusals that share an ERROR_CODE (`invalid_credentials` and
   * `unauthenticated` are both ERROR_CODE_UNAUTHENTICATED). '' for socket
   * errors and for answers without such a body.
   */
  readonly apiCode: string;
  /**
   * Whether the same request may succeed later, as the server said
   * (`temporary` in the frame or body); undefined from servers that do not
   * send it. {@link isTemporary} falls back to the code then.
   */
  readonly temporary: boolean | undefined;
  /** The HTTP status of an HTTP answer (uploads, accounts, rpc); undefined for socket frames. */
  readonly status: number | undefined;
  /**
   * For ERROR_CODE_REJECTED: the text the app's
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
  constructor(code: ErrorCode, message?: string, temporary?: boolean, status?: number, details: ErrorDetails = {}) {
    const reason = details.reason ?? '';
    const rejectCode = details.rejectCode ?? '';
    const apiCode = details.apiCode ?? '';
    const what = apiCode && apiCode !== apiCodeOf(code) ? `${code} (${apiCode})` : code;
    super(
      reason || rejectCode
        ? `parley: ${what}${rejectCode ? ' (' + rejectCode + ')' : ''}${reason ? ': ' + reason : ''}`
        : `parley: ${what}${message ? ': ' + message : ''}`,
    );
    this.name = 'ParleyError';
    this.code = code;
    this.apiCode = apiCode;
    this.temporary = temporary;
    this.status = status;
    this.reason = reason;
    this.rejectCode = rejectCode;
  }
}

/** Codes taken as temporary when a server does not send `temporary` (as
 *  the server's own table says; INTERNAL is not: damaged storage stays so). */
const temporaryCodes: ReadonlySet<string> = new Set<ErrorCode>(['ERROR_CODE_UNAVAILABLE', 'ERROR_CODE_TOO_MANY_REQUESTS']);

/**
 * The HTTP API's error codes and the protocol's codes they stand for: one
 * per ERROR_CODE (the server's table, docs/protocol.md section 4), then the
 * codes of particular endpoints (section 1), each with the closest one.
 */
const apiCodes: ReadonlyMap<string, ErrorCode> = new Map(
  Object.entries({
    bad_request: 'ERROR_CODE_BAD_REQUEST',
    unauthenticated: 'ERROR_CODE_UNAUTHENTICATED',
    permission_denied: 'ERROR_CODE_PERMISSION_DENIED',
    too_many_requests: 'ERROR_CODE_TOO_MANY_REQUESTS',
    unavailable: 'ERROR_CODE_UNAVAILABLE',
    internal: 'ERROR_CODE_INTERNAL',
    too_large: 'ERROR_CODE_TOO_LARGE',
    muted: 'ERROR_CODE_MUTED',
    recall_window_passed: 'ERROR_CODE_RECALL_WINDOW_PASSED',
    group_full: 'ERROR_CODE_GROUP_FULL',
    conflict: 'ERROR_CODE_CONFLICT',
    quota_exceeded: 'ERROR_CODE_QUOTA_EXCEEDED',
    unsupported_media_type: 'ERROR_CODE_UNSUPPORTED_MEDIA_TYPE',
    rejected: 'ERROR_CODE_REJECTED',
    no_such_user: 'ERROR_CODE_NO_SUCH_USER',
    mls_stale_epoch: 'ERROR_CODE_MLS_STALE_EPOCH',
    mls_required: 'ERROR_CODE_MLS_REQUIRED',
    mls_invalid: 'ERROR_CODE_MLS_INVALID',
    // Codes of particular endpoints.
    invalid_credentials: 'ERROR_CODE_UNAUTHENTICATED', // login, password change
    registration_disabled: 'ERROR_CODE_PERMISSION_DENIED', // register
    user_disabled: 'ERROR_CODE_PERMISSION_DENIED', // admin tokens
    body_too_large: 'ERROR_CODE_TOO_LARGE', // a request body over its limit (413)
    not_found: 'ERROR_CODE_PERMISSION_DENIED', // a feature turned off (Web Push), an unknown admin resource (404)
  } satisfies Record<string, ErrorCode>),
);

/** The HTTP API's code of an ERROR_CODE: ERROR_CODE_GROUP_FULL → group_full. */
function apiCodeOf(code: ErrorCode): string {
  return code.replace(/^ERROR_CODE_/, '').toLowerCase();
}

/**
 * The protocol's code for an HTTP error answer: the one its `code` (the
 * HTTP API's snake_case code) stands for, or, for a code this SDK does not
 * know or an answer without one, the one its status suggests.
 */
export function errorCodeOfApi(apiCode: string, status: number): ErrorCode {
  const known = apiCodes.get(apiCode);
  if (known) return known;
  switch (status) {
    case 400:
      return 'ERROR_CODE_BAD_REQUEST';
    case 401:
      return 'ERROR_CODE_UNAUTHENTICATED';
    case 403:
    case 404:
      return 'ERROR_CODE_PERMISSION_DENIED';
    case 409:
      return 'ERROR_CODE_CONFLICT';
    case 413:
      return 'ERROR_CODE_TOO_LARGE';
    case 415:
      return 'ERROR_CODE_UNSUPPORTED_MEDIA_TYPE';
    case 429:
      return 'ERROR_CODE_TOO_MANY_REQUESTS';
    case 502:
    case 503:
    case 504:
      return 'ERROR_CODE_UNAVAILABLE';
    case 507:
      return 'ERROR_CODE_QUOTA_EXCEEDED';
  }
  return status >= 500 ? 'ERROR_CODE_INTERNAL' : 'ERROR_CODE_BAD_REQUEST';
}

/**
 * The error of a refused HTTP answer: the API's JSON error body
 * (`{"error":{"code","message","temporary","reason","reject_code"}}`), or
 * the plain "code: message" body of the resumable upload endpoint. Without
 * `temporary` in the body, 503 and 429 answers are temporary.
 */
export function httpError(status: number, body: string): ParleyError {
  let apiCode = '';
  let message = '';
  let temporary: boolean | undefined;
  const details: ErrorDetails = {};
  try {
    const j = JSON.parse(body) as {
      error?: { code?: unknown; message?: unknown; temporary?: unknown; reason?: unknown; reject_code?: unknown };
    };
    const e = j.error ?? {};
    if (typeof e.code === 'string') apiCode = e.code;
    if (typeof e.message === 'string') message = e.message;
    if (typeof e.temporary === 'boolean') temporary = e.temporary;
    // A `rejected` answer (the app's moderation): what to show, and the rule.
    if (typeof e.reason === 'string') details.reason = e.reason;
    if (typeof e.reject_code === 'string') details.rejectCode = e.reject_code;
  } catch {
    const m = /^([a-z_]+): (.*)$/s.exec(body.trim());
    if (m) [, apiCode, message] = m as unknown as [string, string, string];
    else message = body.trim().slice(0, 200);
  }
  details.apiCode = apiCode;
  temporary ??= status === 503 || status === 429;
  return new ParleyError(errorCodeOfApi(apiCode, status), message, temporary, status, details);
}

/** A request that got no answer (the network failed): ERROR_CODE_UNAVAILABLE, temporary, no status. */
export function networkError(message: string): ParleyError {
  return new ParleyError('ERROR_CODE_UNAVAILABLE', message, true);
}

/** An answer that lacks what it should carry: ERROR_CODE_INTERNAL, not temporary. */
export function badResponse(message: string, status?: number): ParleyError {
  return new ParleyError('ERROR_CODE_INTERNAL', message, false, status);
}

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
 * isCode reports whether err is a ParleyError with this code, from a socket
 * or over HTTP alike: `isCode(err, 'ERROR_CODE_CONFLICT')` after a register
 * whose name is taken, or after a pin of a pinned message.
 */
export function isCode(err: unknown, code: ErrorCode): boolean {
  return err instanceof ParleyError && err.code === code;
}

import type { DisconnectCode, ErrorCode } from './types.js';

/** The server refused a request (an `error` frame, or an HTTP error body). */
export class ParleyError extends Error {
  readonly code: ErrorCode | string;
  constructor(code: ErrorCode | string, message?: string) {
    super(`parley: ${code}${message ? ': ' + message : ''}`);
    this.name = 'ParleyError';
    this.code = code;
  }
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

/** isCode reports whether err is a ParleyError with this code. */
export function isCode(err: unknown, code: ErrorCode): boolean {
  return err instanceof ParleyError && err.code === code;
}

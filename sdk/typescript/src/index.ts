export { ParleyClient, MessageStream, newClientMsgId } from './client.js';
export type { ClientOptions, ClientEvents, ClientState, SendInput, SendOptions, StreamInput } from './client.js';
export { applyReaction, mentionsUser } from './rich.js';
export { utf16Ranges, snippetParts } from './search.js';
export { DISAPPEARING_TIMERS, isDisappearingTimer, isExpired, msUntilExpiry, disappearingSeconds } from './retention.js';
export type { SearchOptions, SearchPage, SearchMatch, StringRange, SnippetPart } from './search.js';
export type { ReactionHolder } from './rich.js';
export { Connection } from './connection.js';
export type { ConnectionOptions, WebSocketLike, WebSocketConstructor, WebSocketHandler } from './connection.js';
export { ParleyError, DisconnectError, ClosedError, TimeoutError, errorCodeOfApi, isCode, isTemporary } from './errors.js';
export type { ErrorDetails } from './errors.js';
export { encodeFrame, decodeFrame, toBase64, toBase64Url, fromBase64, utf8, text } from './codec.js';
export { register, login, logout, changePassword, rpc, webPushKey } from './http.js';
export { pushTargetBody, webPushTarget } from './push.js';
export { uploadFile, uploadResumable, upload, resolveFileUrl, RESUMABLE_ABOVE } from './media.js';
export type { TokenSource, UploadOptions, ResumableOptions, AutoUploadOptions } from './media.js';
export type { PushRegistration, SubscribeWebPushOptions, WebPushSubscription } from './push.js';
export type { TokenResponse, HttpOptions } from './http.js';
export { startExport, exportStatus, waitForExport, downloadExport, deleteAccount } from './account.js';
export type { ExportJob, AccountDeletion } from './account.js';
export * from './types.js';

/** The id of the 1:1 conversation between two users ("p:" + both ids in byte order). */
export function directConversationId(a: string, b: string): string {
  return a < b ? `p:${a}:${b}` : `p:${b}:${a}`;
}

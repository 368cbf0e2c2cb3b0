// Frame types of Parley's client protocol (proto/parley/v1/parley.proto), in
// the shape the SDK hands to the app: the canonical protobuf JSON mapping,
// except that
//   - sequence numbers, counts and unix-millisecond times are `number`s (the
//     wire carries 64-bit integers as strings; these all fit in 2^53);
//   - server-wide ids (`messageId`, `sessionId`) stay `string`s (they do not);
//   - `bytes` fields (`payload`, `body`) are `Uint8Array`s (base64 on the wire);
//   - file sizes and durations (`size`, `durationMs`) and `expiresAt` are
//     `number`s too (64-bit strings on the wire).
// Fields the server leaves at their zero value are absent, as in proto3 JSON.

export type MessageKind =
  | 'MESSAGE_KIND_UNSPECIFIED'
  | 'MESSAGE_KIND_NORMAL'
  | 'MESSAGE_KIND_RECALL'
  | 'MESSAGE_KIND_EDIT'
  | 'MESSAGE_KIND_GROUP_CREATED'
  | 'MESSAGE_KIND_MEMBERS_ADDED'
  | 'MESSAGE_KIND_MEMBERS_REMOVED'
  | 'MESSAGE_KIND_ROLE_CHANGED'
  | 'MESSAGE_KIND_MEMBER_MUTED'
  | 'MESSAGE_KIND_GROUP_UPDATED'
  | 'MESSAGE_KIND_OWNER_CHANGED'
  | 'MESSAGE_KIND_GROUP_DISSOLVED'
  /** event.targetSeq was pinned by `from` (Conversation.pins lists the pins). */
  | 'MESSAGE_KIND_PINNED'
  /** event.targetSeq was unpinned by `from`. */
  | 'MESSAGE_KIND_UNPINNED'
  /** Disappearing messages set to event.disappearingSeconds (0: off) by `from`. */
  | 'MESSAGE_KIND_DISAPPEARING_SET'
  /** An MLS Commit of an encrypted group changing no Parley membership
   *  (docs/e2ee.md): payload the Commit, mlsWelcome the Welcome it carries. */
  | 'MESSAGE_KIND_MLS_COMMIT';

export type GroupRole = 'GROUP_ROLE_UNSPECIFIED' | 'GROUP_ROLE_MEMBER' | 'GROUP_ROLE_ADMIN' | 'GROUP_ROLE_OWNER';
/** Who may add members: the owner and admins (the default), or every member. */
export type GroupAddPolicy = 'GROUP_ADD_POLICY_UNSPECIFIED' | 'GROUP_ADD_POLICY_ADMINS' | 'GROUP_ADD_POLICY_EVERYONE';
/** What members added later (or added again) read: from their addition on (the default), or everything. */
export type HistoryVisibility =
  | 'HISTORY_VISIBILITY_UNSPECIFIED'
  | 'HISTORY_VISIBILITY_SINCE_JOIN'
  | 'HISTORY_VISIBILITY_ALL';

export type ConversationType = 'CONVERSATION_TYPE_UNSPECIFIED' | 'CONVERSATION_TYPE_DIRECT' | 'CONVERSATION_TYPE_GROUP';

export type ContactState =
  | 'CONTACT_STATE_UNSPECIFIED'
  | 'CONTACT_STATE_FRIEND'
  | 'CONTACT_STATE_REQUEST_SENT'
  | 'CONTACT_STATE_REQUEST_RECEIVED';

export type ErrorCode =
  | 'ERROR_CODE_UNSPECIFIED'
  | 'ERROR_CODE_BAD_REQUEST'
  | 'ERROR_CODE_UNAUTHENTICATED'
  | 'ERROR_CODE_PERMISSION_DENIED'
  | 'ERROR_CODE_TOO_MANY_REQUESTS'
  | 'ERROR_CODE_UNAVAILABLE'
  | 'ERROR_CODE_MALFORMED_FRAME'
  | 'ERROR_CODE_FRAME_TOO_LARGE'
  | 'ERROR_CODE_UNKNOWN_FRAME'
  | 'ERROR_CODE_INTERNAL'
  | 'ERROR_CODE_TOO_LARGE'
  | 'ERROR_CODE_MUTED'
  | 'ERROR_CODE_RECALL_WINDOW_PASSED'
  | 'ERROR_CODE_GROUP_FULL'
  | 'ERROR_CODE_CONFLICT'
  | 'ERROR_CODE_QUOTA_EXCEEDED'
  | 'ERROR_CODE_UNSUPPORTED_MEDIA_TYPE'
  /** The app's moderation refused the message (its before-send hook or the
   *  word filter): see ErrorBody.reason and rejectCode. Not temporary. */
  | 'ERROR_CODE_REJECTED'
  /** A 1:1 send to a user id without an account, on a server where every
   *  user has one. Not temporary. */
  | 'ERROR_CODE_NO_SUCH_USER'
  /** End-to-end encrypted groups (docs/e2ee.md): a Commit for an epoch
   *  another Commit already ended; process the newer one first. */
  | 'ERROR_CODE_MLS_STALE_EPOCH'
  /** The conversation is end-to-end encrypted: only MLS messages go in. */
  | 'ERROR_CODE_MLS_REQUIRED'
  /** Not a valid MLS message for this conversation. */
  | 'ERROR_CODE_MLS_INVALID';

export type DisconnectCode =
  | 'DISCONNECT_CODE_UNSPECIFIED'
  | 'DISCONNECT_CODE_KICKED'
  | 'DISCONNECT_CODE_SLOW'
  | 'DISCONNECT_CODE_HEARTBEAT_TIMEOUT'
  | 'DISCONNECT_CODE_AUTH_TIMEOUT'
  | 'DISCONNECT_CODE_AUTH_FAILED'
  | 'DISCONNECT_CODE_PROTOCOL_ERROR'
  | 'DISCONNECT_CODE_SERVER_SHUTDOWN'
  | 'DISCONNECT_CODE_TOKEN_REVOKED'
  | 'DISCONNECT_CODE_TOO_MANY_REQUESTS'
  | 'DISCONNECT_CODE_INTERNAL';

export interface AuthOk {
  userId: string;
  sessionId: string;
  serverTime?: number;
  heartbeatSeconds?: number;
  maxFrameBytes?: number;
  protocolVersion?: string; // "MAJOR.MINOR"; absent: 1.0 (docs/protocol.md, Versions)
}

export interface SendAck {
  clientMsgId: string;
  conversationId: string;
  seq: number;
  messageId: string;
  serverTime?: number;
  duplicate?: boolean;
}

export interface GroupInfo {
  conversationId: string;
  name?: string;
  avatarUrl?: string;
  announcement?: string;
  owner?: string;
  openJoin?: boolean;
  muteAll?: boolean;
  memberCount?: number;
  dissolved?: boolean;
  createdAt?: number;
  /** As in force: never UNSPECIFIED from the server. */
  addPolicy?: GroupAddPolicy;
  historyVisibility?: HistoryVisibility;
  /** Every member may mention everyone (`mentionAll`); else only the owner and admins. */
  membersMentionAll?: boolean;
  /** End-to-end encrypted with MLS (docs/e2ee.md). */
  encrypted?: boolean;
}

export interface MessageEvent {
  targetSeq?: number;
  userIds?: string[];
  role?: GroupRole;
  mutedUntil?: number;
  group?: GroupInfo;
  /** On a RECALL: the message was removed by the app's moderators (an admin
   *  deleting it for everyone), not recalled by its sender. */
  moderated?: boolean;
  /** On a DISAPPEARING_SET: the new timer in seconds (0: off). */
  disappearingSeconds?: number;
}

/**
 * A file carried by a message, as the server describes it from the upload
 * (whatever the sender wrote): its bytes are fetched through a short-lived
 * URL ({@link FileUrlResult}, `ParleyClient.fileUrl`). Fields the server
 * does not know are absent.
 */
export interface Attachment {
  /** The file's id, from its upload. */
  id: string;
  /** The name it was uploaded with (display only; no path). */
  name?: string;
  /** Bytes. */
  size?: number;
  /** Sniffed from the file's bytes, not taken from the uploader. */
  contentType?: string;
  /** Images: pixels as displayed (EXIF orientation applied). */
  width?: number;
  height?: number;
  /** Audio and video (MP4 family): milliseconds. */
  durationMs?: number;
  /** A thumbnail exists: `fileUrl(..., thumbnail = true)` gives a JPEG of at most 320 pixels a side. */
  thumbnail?: boolean;
  /** A BlurHash placeholder (https://blurha.sh) to draw while an image loads. */
  blurhash?: string;
}

/** A file to attach to a send: only its id is read. */
export type AttachmentRef = Pick<Attachment, 'id'> & Partial<Attachment>;

/** A short-lived download URL (the answer to `fileUrl`). */
export interface FileUrlResult {
  /** Where to GET the file, without a token, with Range if wanted. The SDK
   *  resolves a relative URL against the server's HTTP origin. */
  url: string;
  /** Unix milliseconds after which the URL is refused. */
  expiresAt?: number;
}

export interface Message {
  conversationId: string;
  seq: number;
  messageId?: string;
  from?: string;
  to?: string;
  clientMsgId?: string;
  contentType?: string;
  payload?: Uint8Array;
  serverTime?: number;
  kind?: MessageKind;
  event?: MessageEvent;
  recalled?: boolean;
  editedAt?: number;
  /** Files the message carries, described by the server (a recalled message has none). */
  attachments?: Attachment[];
  /** The seq of the message this one answers (in the same conversation). */
  replyTo?: number;
  /** Users this message mentions. */
  mentions?: string[];
  /** It mentions everyone in the group. */
  mentionAll?: boolean;
  /** Set on a reply in a thread: the seq of the thread's root message. Thread
   *  replies are delivered like any message; show them in the thread, not
   *  in the main timeline. */
  threadRoot?: number;
  /** Filled in by the server with the message `replyTo` names, as it is when
   *  this one was sent to the reader (live or in a page). */
  replyPreview?: MessagePreview;
  /** On a thread root that has replies: the thread as it was when sent. */
  thread?: ThreadSummary;
  /** The reaction counts (`me` for the reader) as of `reactionVersion`;
   *  later changes come as `reaction` events ({@link applyReaction}). */
  reactions?: Reaction[];
  reactionVersion?: number;
  /** A streamed message: its stream's id (replace the text shown from the
   *  stream's chunks with this message). */
  streamId?: string;
  /** A streamed message whose sender stopped before finishing it. */
  incomplete?: boolean;
  /** Unix milliseconds: the message disappears then (sent while the
   *  conversation's disappearing timer was on; see {@link isExpired}). */
  expiresAt?: number;
  /** Encrypted groups: the MLS Welcome stored with a Commit (MEMBERS_ADDED,
   *  MLS_COMMIT), for the devices it adds. */
  mlsWelcome?: Uint8Array;
}

/** A short view of a message another one answers (Message.replyPreview). */
export interface MessagePreview {
  seq: number;
  from?: string;
  contentType?: string;
  /** The start of the payload: at most 256 bytes, cut at a UTF-8 character
   *  boundary. Absent when recalled or missing. */
  snippet?: Uint8Array;
  /** The payload was longer than the snippet. */
  truncated?: boolean;
  /** How many files the message carries. */
  attachments?: number;
  /** The original was recalled (or removed by moderators). */
  recalled?: boolean;
  /** The original is not there for the reader (deleted for them, from before
   *  what they may read, or never stored). */
  missing?: boolean;
  editedAt?: number;
}

/** The state of the thread under a root message. */
export interface ThreadSummary {
  replyCount?: number;
  lastReplySeq?: number;
  /** Unix milliseconds. */
  lastReplyAt?: number;
}

/** One emoji's count on a message. */
export interface Reaction {
  emoji: string;
  count?: number;
  /** The reader reacted with it (meaningful only where the update is personal). */
  me?: boolean;
}

/**
 * A message's reaction counts as of `version`. Of two updates of one message
 * keep the one with the higher version; take `me` only from a personal one
 * (the answer to react, a sync page, your other device's reaction); from the
 * others (sent to every member) keep the `me` you hold. {@link applyReaction}
 * does both.
 */
export interface ReactionUpdate {
  conversationId: string;
  seq: number;
  /** Every emoji with a count, oldest first; empty: no reactions left. */
  reactions?: Reaction[];
  version?: number;
  personal?: boolean;
}

/** The answer to syncReactions: personal updates, oldest change first. */
export interface ReactionPage {
  conversationId: string;
  updates?: ReactionUpdate[];
  /** More changes follow: ask again after the last update's version. */
  hasMore?: boolean;
  /** The conversation's reaction version when the page was read. */
  version?: number;
}

/** One pinned message of a conversation. */
export interface PinnedMessage {
  seq: number;
  pinnedBy?: string;
  /** Unix milliseconds. */
  pinnedAt?: number;
}

/** The answer to StreamOpen. */
export interface StreamOpened {
  /** Names the stream in StreamAppend, StreamFinish and StreamChunk. */
  streamId: string;
  conversationId: string;
}

/** Text appended to a stream, sent to the members online as it comes (never
 *  stored or synced: a device that was offline gets the finished message only). */
export interface StreamChunk {
  streamId: string;
  conversationId: string;
  from?: string;
  /** Bytes (UTF-8) of text before this chunk: a device that came online
   *  mid-stream sees it does not hold the start. */
  offset?: number;
  text?: string;
  contentType?: string;
  replyTo?: number;
  threadRoot?: number;
}

export interface Receipt {
  conversationId: string;
  userId: string;
  deliveredSeq?: number;
  readSeq?: number;
}

export interface Conversation {
  conversationId: string;
  type?: ConversationType;
  peer?: string;
  lastSeq?: number;
  lastMessage?: Message;
  deliveredSeq?: number;
  readSeq?: number;
  unreadCount?: number;
  peerDeliveredSeq?: number;
  peerReadSeq?: number;
  group?: GroupInfo;
  pinned?: boolean;
  muted?: boolean;
  clearedSeq?: number;
  left?: boolean;
  leftSeq?: number;
  /** Messages after readSeq that mention this user (or everyone), counted
   *  even when muted; at most 1000. */
  unreadMentions?: number;
  /** The pinned messages, oldest pin first. */
  pins?: PinnedMessage[];
  /** The conversation's reaction version: past the one a client holds,
   *  syncReactions brings the changes (the client does it on reconnect). */
  reactionVersion?: number;
  /** The disappearing-messages timer in seconds (absent or 0: off). */
  disappearingSeconds?: number;
  /** The lowest seq still stored: messages below it expired (retention). */
  firstSeq?: number;
}

export interface ConversationList {
  conversations?: Conversation[];
  nextPageToken?: string;
}

export interface MessagePage {
  conversationId: string;
  messages?: Message[];
  hasMore?: boolean;
  lastSeq?: number;
}

export interface ErrorBody {
  code: ErrorCode;
  message?: string;
  /** Whether the same request may succeed later; absent from older servers. */
  temporary?: boolean;
  /** With ERROR_CODE_REJECTED: the text the app wants the sender to see (may be absent). */
  reason?: string;
  /** With ERROR_CODE_REJECTED: the app's code for the rule that refused it
   *  ("word_filter" for the built-in word filter). */
  rejectCode?: string;
}

export interface Disconnect {
  code: DisconnectCode;
  reason?: string;
  reconnectAfterMs?: number;
}

export interface Member {
  userId: string;
  role?: GroupRole;
  mutedUntil?: number;
  joinedAt?: number;
}

export interface MemberPage {
  conversationId: string;
  members?: Member[];
  nextAfterUserId?: string;
}

export interface ReadCount {
  seq: number;
  count?: number;
  readers?: string[];
}

export interface ReadCountList {
  conversationId: string;
  counts?: ReadCount[];
}

export interface TypingEvent {
  conversationId: string;
  userId: string;
}

export interface Presence {
  userId: string;
  online?: boolean;
  lastSeen?: number;
}

export interface PresenceList {
  users?: Presence[];
}

export interface PresenceEvent {
  presence: Presence;
}

export interface Contact {
  userId: string;
  state?: ContactState;
  note?: string;
  updatedAt?: number;
}

export interface ContactList {
  contacts?: Contact[];
  blocked?: string[];
}

export interface ContactEvent {
  contact: Contact;
}

export interface HiddenEvent {
  conversationId: string;
  seqs?: number[];
  clearedSeq?: number;
}

export interface ConversationEvent {
  conversationId: string;
  pinned?: boolean;
  muted?: boolean;
  clearedSeq?: number;
}

export interface Push {
  op?: number;
  body?: Uint8Array;
  room?: string;
}

export interface RoomInfo {
  room: string;
  online?: number;
}

// ---- Offline push notifications ----

/** Apple Push Notification service. */
export interface ApnsTarget {
  /** The device token from registerForRemoteNotifications, in hex (64-200 characters). */
  deviceToken: string;
  /** The app's bundle id (the apns-topic). */
  topic: string;
  /** A development build (the APNs sandbox environment). */
  sandbox?: boolean;
}

/** Firebase Cloud Messaging (HTTP v1). */
export interface FcmTarget {
  /** The registration token from FirebaseMessaging.getToken. */
  token: string;
}

/** A browser's PushSubscription (subscribed with the server's VAPID key, {@link webPushKey}). */
export interface WebPushTarget {
  /** subscription.endpoint: an https URL. */
  endpoint: string;
  /** subscription.getKey('p256dh') in base64url: the 65-byte P-256 public key. */
  p256dh: string;
  /** subscription.getKey('auth') in base64url: the 16-byte authentication secret. */
  auth: string;
}

/**
 * Where the platform's push service reaches a device: exactly one of `apns`,
 * `fcm` or `webpush` (the `target` oneof of RegisterPush, as on the wire).
 * Narrow with `'apns' in t`.
 */
export type PushTarget =
  | { apns: ApnsTarget; fcm?: never; webpush?: never }
  | { fcm: FcmTarget; apns?: never; webpush?: never }
  | { webpush: WebPushTarget; apns?: never; fcm?: never };

/** The platforms a {@link PushTarget} can name. */
export type PushPlatform = 'apns' | 'fcm' | 'webpush';

/** RegisterPush: this device's push target, replacing any it had. Over a
 *  socket deviceId is empty (this session's device) or equal to it; over
 *  POST /v1/rpc it is required. */
export type RegisterPush = { deviceId?: string } & PushTarget;

/** What the service worker receives in a Web Push message (decrypted by the browser). */
export interface WebPushPayload {
  title?: string;
  body?: string;
  conversationId?: string;
  /** The newest message's seq (a string: the JSON form of a 64-bit integer). */
  seq?: string;
  /** How many messages the notification stands for. */
  count?: number;
  /** The user's unread count. */
  badge?: number;
}

// ---- Search (docs/search.md) ----

/** A position in the newest-first order of search hits: pass a page's
 *  `next` as the next search's `before`. Treat it as opaque. */
export interface SearchCursor {
  serverTime?: number;
  conversationId?: string;
  seq?: number;
}

/** [start, end) in bytes of a UTF-8 string (as on the wire), or, in what
 *  `ParleyClient.search` returns, in UTF-16 code units of a JS string. */
export interface TextRange {
  start?: number;
  end?: number;
}

/** One matching message as the server sends it: `highlights` are UTF-8
 *  byte ranges into `snippet` (`ParleyClient.search` converts them). */
export interface SearchHit {
  conversationId: string;
  seq: number;
  from?: string;
  serverTime?: number;
  /** The text around the match, at most 240 bytes of UTF-8, cut at character boundaries. */
  snippet?: string;
  highlights?: TextRange[];
}

/** The answer to a search frame. */
export interface SearchResults {
  hits?: SearchHit[];
  /** Set when more hits may follow: pass it as Search.before. */
  next?: SearchCursor;
}

/** The search frame: words (every one, any order; or with `phrase`, in this
 *  order) and filters; empty or zero filters mean any. */
export interface Search {
  /** 1-256 bytes. */
  query: string;
  phrase?: boolean;
  conversationId?: string;
  from?: string;
  contentType?: string;
  hasAttachment?: boolean;
  /** Unix ms, inclusive. */
  since?: number;
  until?: number;
  before?: SearchCursor;
  /** At most 100; 0: 20. */
  limit?: number;
}

/** Every frame the server sends; exactly one body field is set. */
export interface ServerFrame {
  id?: number;
  authOk?: AuthOk;
  pong?: { serverTime?: number };
  sendAck?: SendAck;
  message?: Message;
  receipt?: Receipt;
  conversations?: ConversationList;
  messages?: MessagePage;
  error?: ErrorBody;
  disconnect?: Disconnect;
  ok?: Record<string, never>;
  group?: GroupInfo;
  members?: MemberPage;
  readCounts?: ReadCountList;
  typing?: TypingEvent;
  presence?: PresenceList;
  presenceEvent?: PresenceEvent;
  contacts?: ContactList;
  contactEvent?: ContactEvent;
  hidden?: HiddenEvent;
  conversationEvent?: ConversationEvent;
  push?: Push;
  room?: RoomInfo;
  fileUrl?: FileUrlResult;
  reaction?: ReactionUpdate;
  reactions?: ReactionPage;
  streamOpened?: StreamOpened;
  streamChunk?: StreamChunk;
  searchResults?: SearchResults;
  keyPackageCount?: KeyPackageCount;
  claimedKeyPackages?: { keyPackages?: ClaimedKeyPackage[] };
  mlsState?: MlsState;
}

/** One-time KeyPackages a device has left on the server (docs/e2ee.md). */
export interface KeyPackageCount {
  count?: number;
  lastResort?: boolean;
}

/** A KeyPackage (an MLSMessage) claimed for one device of a user. */
export interface ClaimedKeyPackage {
  userId: string;
  deviceId: string;
  keyPackage: Uint8Array;
  lastResort?: boolean;
}

/** The server's view of a conversation's MLS state. */
export interface MlsState {
  conversationId: string;
  encrypted?: boolean;
  /** The epoch the next Commit must be made in. */
  epoch?: number;
}

export interface Send {
  clientMsgId: string;
  to?: string;
  conversationId?: string;
  contentType?: string;
  payload?: Uint8Array;
  /** Up to 10 files this user uploaded (only the ids are read). */
  attachments?: AttachmentRef[];
  /** The seq of the message (in the same conversation) this one answers. */
  replyTo?: number;
  /** Users mentioned: at most 50, each one who may read the conversation. */
  mentions?: string[];
  /** Mentions everyone in a group (the owner and admins, or every member
   *  when the group's membersMentionAll is set). */
  mentionAll?: boolean;
  /** The seq of a thread's root message: this is a reply in that thread. */
  threadRoot?: number;
  /** Plain text the server may search beside an opaque payload (≤ 4,096 bytes). */
  searchText?: string;
}

/** Edit: replaces the content of your own message. */
export interface Edit {
  conversationId: string;
  seq: number;
  contentType?: string;
  payload?: Uint8Array;
  clientMsgId?: string;
  /** Replaces the message's search text (see Send.searchText). */
  searchText?: string;
}

/** StreamOpen: starts a streamed message (users with the bot role only). */
export interface StreamOpen {
  clientMsgId?: string;
  to?: string;
  conversationId?: string;
  /** Default "text/plain". */
  contentType?: string;
  replyTo?: number;
  threadRoot?: number;
  mentions?: string[];
  mentionAll?: boolean;
}

/** The request bodies a client can send (one per frame). */
export interface ClientBodies {
  auth: { token: string; deviceId?: string; deviceType?: string };
  ping: Record<string, never>;
  send: Send;
  delivered: { conversationId: string; seq: number };
  read: { conversationId: string; seq: number };
  syncConversations: { limit?: number; pageToken?: string };
  syncMessages: { conversationId: string; afterSeq?: number; limit?: number };
  history: { conversationId: string; beforeSeq?: number; limit?: number };
  createGroup: {
    name?: string;
    avatarUrl?: string;
    announcement?: string;
    userIds?: string[];
    openJoin?: boolean;
    addPolicy?: GroupAddPolicy;
    historyVisibility?: HistoryVisibility;
    membersMentionAll?: boolean;
    /** End-to-end encrypted (docs/e2ee.md): userIds must be empty. */
    encrypted?: boolean;
  };
  updateGroup: {
    conversationId: string;
    name?: string;
    avatarUrl?: string;
    announcement?: string;
    openJoin?: boolean;
    muteAll?: boolean;
    addPolicy?: GroupAddPolicy;
    historyVisibility?: HistoryVisibility;
    membersMentionAll?: boolean;
  };
  addMembers: { conversationId: string; userIds: string[]; mlsCommit?: Uint8Array; mlsWelcome?: Uint8Array };
  removeMember: { conversationId: string; userId: string; mlsCommit?: Uint8Array };
  joinGroup: { conversationId: string };
  leaveGroup: { conversationId: string };
  setRole: { conversationId: string; userId: string; role: GroupRole };
  muteMember: { conversationId: string; userId: string; durationSeconds?: number };
  transferOwnership: { conversationId: string; userId: string };
  dissolveGroup: { conversationId: string };
  getGroup: { conversationId: string };
  listMembers: { conversationId: string; afterUserId?: string; limit?: number };
  recall: { conversationId: string; seq: number; clientMsgId?: string };
  edit: Edit;
  deleteForMe: { conversationId: string; seqs?: number[]; all?: boolean };
  readCounts: { conversationId: string; seqs: number[] };
  typing: { conversationId: string };
  subscribePresence: { userIds: string[] };
  unsubscribePresence: { userIds?: string[] };
  friendRequest: { userId: string; note?: string };
  respondFriend: { userId: string; accept: boolean };
  removeFriend: { userId: string };
  listContacts: Record<string, never>;
  block: { userId: string };
  unblock: { userId: string };
  setConversation: { conversationId: string; pinned?: boolean; muted?: boolean };
  joinRoom: { room: string };
  leaveRoom: { room: string };
  roomSend: { room: string; op?: number; body?: Uint8Array };
  registerPush: RegisterPush;
  unregisterPush: { deviceId?: string };
  /** A file carried by message (conversationId, seq), or one this user uploaded (no conversation). */
  fileUrl: { fileId: string; conversationId?: string; seq?: number; thumbnail?: boolean };
  /** Reports message seq of a conversation to the app's moderators: reason a
   *  short code (1-32 bytes of a-z, 0-9 and "_": "spam", "abuse", "other"),
   *  note the reporter's words (at most 1000 bytes). Answered with ok. */
  reportMessage: { conversationId: string; seq: number; reason: string; note?: string };
  /** Adds (remove: takes back) this user's emoji reaction. Answered with reaction (personal). */
  react: { conversationId: string; seq: number; emoji: string; remove?: boolean };
  /** The reaction changes after afterVersion. Answered with reactions. */
  syncReactions: { conversationId: string; afterVersion?: number; limit?: number };
  /** Pins (unpin: unpins) a message. Answered with the PINNED/UNPINNED event's sendAck. */
  pin: { conversationId: string; seq: number; unpin?: boolean; clientMsgId?: string };
  setDisappearing: { conversationId: string; seconds?: number; clientMsgId?: string };
  /** A page of the replies in a thread: like history (beforeSeq) or, with afterSeq, like syncMessages. */
  threadHistory: { conversationId: string; rootSeq: number; beforeSeq?: number; afterSeq?: number; limit?: number };
  /** Bots: starts a streamed message. Answered with streamOpened. */
  streamOpen: StreamOpen;
  /** Adds text to an open stream. Answered with ok. */
  streamAppend: { streamId: string; text: string };
  /** Stores the stream's text as one message (abandon: marked incomplete). Answered with sendAck. */
  streamFinish: { streamId: string; abandon?: boolean };
  /** Finds messages the user may read, newest first. Answered with searchResults. */
  search: Search;
  /** End-to-end encryption (docs/e2ee.md): this device's KeyPackages. Answered with keyPackageCount. */
  publishKeyPackages: { keyPackages?: Uint8Array[]; lastResort?: Uint8Array; replace?: boolean };
  countKeyPackages: Record<string, never>;
  /** One KeyPackage of every device of each user. Answered with claimedKeyPackages. */
  claimKeyPackages: { userIds: string[] };
  /** A Commit changing no Parley membership. Answered with sendAck. */
  mlsCommit: { clientMsgId?: string; conversationId: string; commit: Uint8Array; welcome?: Uint8Array };
  getMlsState: { conversationId: string };
}

export type ClientBodyName = keyof ClientBodies;

/** A frame the client sends: an id (0 or absent: no reply wanted) and one body. */
export type ClientFrame = { id?: number } & { [K in ClientBodyName]?: ClientBodies[K] };

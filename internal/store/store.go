// Package store defines Parley's persistent state behind one narrow interface.
// Implementations: internal/store/pebblestore (embedded, the single-node default) and,
// for clusters, PostgreSQL. Every implementation passes internal/store/storetest.
package store

import (
	"context"
	"errors"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

var (
	// ErrNotFound: the user (or other record) does not exist.
	ErrNotFound = errors.New("store: not found")
	// ErrExists: a record with that key already exists.
	ErrExists = errors.New("store: already exists")
	// ErrClosed: the store has been closed.
	ErrClosed = errors.New("store: closed")
	// ErrCorrupt: a record failed its checksum or could not be decoded. It is
	// never served; the caller reports an internal error.
	ErrCorrupt = errors.New("store: corrupt record")
	// ErrNoSpace: a write was refused because the disk is full or nearly
	// (below the configured free-space floor), or the store is read-only
	// until space is freed. Temporary: the same write may succeed later.
	// Reads still work.
	ErrNoSpace = errors.New("store: no disk space")
	// ErrConflict: the record is not in the state the write needs: Apply's
	// Update names a message that is already recalled, CloseReport a report
	// that is not open. Nothing is written.
	ErrConflict = errors.New("store: conflicting state")
	// ErrTooMany: a reaction would give a message more distinct emojis than
	// ReactionOp.MaxDistinct allows. Nothing is written.
	ErrTooMany = errors.New("store: too many")
)

// AppendResult is the outcome of one message of an Append batch.
type AppendResult struct {
	// Msg is the stored message: the one passed in with Seq assigned, or, for a
	// duplicate, the message stored by the first attempt.
	Msg *pb.Message
	// Duplicate is true when (From, ClientMsgId) had already been stored.
	Duplicate bool
}

// Cursor is one user's position in one conversation. Both values only grow,
// and never past the conversation's last seq.
type Cursor struct {
	ConversationID string
	UserID         string
	Delivered      uint64
	Read           uint64
}

// User is a user record. Users minted by an app with the app secret may have no record.
type User struct {
	// ID is the user id exactly as created (the display form): the key of
	// every record that names the user (conversation ids, members, cursors).
	ID string
	// NameKey is the normalized (case-folded) username, unique among users:
	// CreateUser refuses a second user with the same NameKey (ErrExists).
	// Empty: the user is not indexed. Reads do not return it; UpdateUser
	// never changes it. Users stored before the index existed are indexed
	// under strings.ToLower(ID) when the store first opens with it, the
	// oldest (by CreatedAt, then ID) of look-alikes keeping the name; the
	// others stay reachable by their exact ID.
	NameKey string
	// PasswordHash is an encoded argon2id/bcrypt hash, or empty for users without a password.
	PasswordHash string
	// TokenEpoch invalidates every token issued with a lower epoch (password change, "log out everywhere").
	TokenEpoch uint64
	Disabled   bool
	// ShadowMuted: what the user sends reaches only themselves
	// (docs/moderation.md).
	ShadowMuted bool
	// Bot: the user may stream messages (docs/rich-messages.md).
	Bot       bool
	CreatedAt time.Time
}

// Group is a group's settings. Its conversation id is "g:" + an id.
type Group struct {
	ConversationID string
	Name           string
	AvatarURL      string
	Announcement   string
	Owner          string
	OpenJoin       bool
	MuteAll        bool
	Dissolved      bool
	CreatedAt      time.Time
	// AddPolicy: who may add members; UNSPECIFIED (every group stored
	// before the setting existed) means admins only.
	AddPolicy pb.GroupAddPolicy
	// HistoryVisibility: what new and re-added members read; UNSPECIFIED
	// means since their join.
	HistoryVisibility pb.HistoryVisibility
	// MembersMentionAll: every member may mention everyone; else only the
	// owner and admins.
	MembersMentionAll bool
}

// Member is one user's membership of a group, current or past.
type Member struct {
	UserID     string
	Role       pb.GroupRole
	MutedUntil time.Time // zero: not muted
	JoinedAt   time.Time
	// Left is true once the user left or was removed; LeftSeq is the seq of
	// the event that recorded it (they may read up to it).
	Left    bool
	LeftSeq uint64
	// JoinSeq is the seq of the event that last added the user (the first
	// seq they read when the group's history visibility is since-join); 0
	// for members stored before it was recorded, who read from the start.
	JoinSeq uint64
}

// Change is a state change stored atomically with the event that records it
// in a conversation's sequence (group changes, recalls, edits).
type Change struct {
	// Event is appended exactly as Append would (de-dup by From and
	// ClientMsgId, next seq of its conversation). Required.
	Event *pb.Message
	// Group, when set, replaces the group record of Event's conversation.
	Group *Group
	// Members are written (inserted or replaced) for Event's conversation.
	// A member with Left set and LeftSeq 0 gets the event's seq as LeftSeq.
	// When Joined is set, every member not Left with JoinSeq 0 gets the
	// event's seq as JoinSeq.
	// Every member written gets the conversation in their conversation list.
	Members []Member
	// Joined marks the Members as joining with Event (create, add, join).
	Joined bool
	// Update, when set, replaces the stored message (its ConversationId, Seq),
	// which must exist (else ErrNotFound) and not be recalled (else
	// ErrConflict): a recall clears its payload, an edit replaces it. The
	// check and the write are one atomic step, so a change prepared from an
	// older copy of the message (by another node) cannot undo a recall.
	Update *pb.Message
	// Pin, when set, pins or unpins a message of Event's conversation,
	// atomically with Event.
	Pin *PinChange
	// MLS, when set, changes the conversation's MLS state atomically with
	// Event (e2ee.go): a refused step (ErrStaleEpoch, ErrExists,
	// ErrNotFound) writes nothing.
	MLS *MLSStep
}

// PinChange pins (or unpins) the message Seq: a pin records By and At; an
// unpin removes the pin (none: nothing to remove, no error).
type PinChange struct {
	Seq   uint64
	Unpin bool
	By    string
	At    time.Time
}

// Pin is one pinned message of a conversation.
type Pin struct {
	Seq uint64
	By  string
	At  time.Time
}

// ReactionOp adds (or removes) UserID's Emoji reaction to the message Seq
// of ConversationID.
type ReactionOp struct {
	ConversationID string
	Seq            uint64
	UserID         string
	Emoji          string
	Remove         bool
	// MaxDistinct: adding an emoji the message does not have yet, when it
	// already has this many, fails with ErrTooMany. 0: no limit.
	MaxDistinct int
}

// ReactionResult is the outcome of one ReactionOp.
type ReactionResult struct {
	// Err is the op's own failure (ErrNotFound: no such message;
	// ErrTooMany); nothing of it was written. The other ops of the batch
	// are not affected.
	Err error
	// Changed is false when the reaction was already in the state asked
	// for (added twice, removed when absent): nothing was written.
	Changed bool
	// Reactions is the message's counts after the op, Me for op.UserID,
	// in the order each emoji was first added (an emoji whose count fell to
	// zero and came back goes last).
	Reactions []*pb.Reaction
	// Version is the message's reaction version after the op: a change
	// takes the conversation's reaction version + 1 (unchanged: the
	// message's current version, 0 if it never had a reaction).
	Version uint64
}

// ReactionSet is one message's reactions as one reader sees them.
type ReactionSet struct {
	Reactions []*pb.Reaction // as ReactionResult.Reactions, Me for the reader
	Version   uint64
}

// ReactionChange names a message whose reactions last changed at Version.
type ReactionChange struct {
	Seq     uint64
	Version uint64
}

// ThreadSummary is the state of the thread under a root message.
type ThreadSummary struct {
	ReplyCount   uint32
	LastReplySeq uint64
	LastReplyAt  int64 // unix ms: the last reply's ServerTime
}

// ConversationSettings are one user's settings of one conversation.
type ConversationSettings struct {
	Pinned bool
	Muted  bool
	// ClearedSeq: the user deleted the conversation up to this seq.
	ClearedSeq uint64
}

// Contact is one side of a contact relation (each user has their own record).
type Contact struct {
	UserID    string
	State     pb.ContactState
	Note      string
	UpdatedAt time.Time
}

// PushTarget is where one device of a user gets push notifications while it
// is not connected. A user has at most one per device.
type PushTarget struct {
	UserID, DeviceID string
	// Kind is "apns", "fcm" or "webpush".
	Kind string
	// Token: the APNs device token, the FCM registration token or the Web
	// Push subscription endpoint.
	Token string
	// Topic (APNs bundle id) and Sandbox (APNs development environment).
	Topic   string
	Sandbox bool
	// P256dh and Auth are a Web Push subscription's keys (base64url).
	P256dh, Auth string
	// TokenID is the id of the login token that registered it: logging
	// out with that token removes it. Empty for tokens without an id.
	TokenID   string
	UpdatedAt time.Time
}

// File is an uploaded file's record (docs/media.md). Its bytes are in the
// media store under BlobKey, its thumbnail under ThumbKey.
type File struct {
	// ID is server-made and unguessable.
	ID string
	// Owner is the user who uploaded it.
	Owner string
	// Name is the name it was uploaded with (no path).
	Name string
	// Size in bytes.
	Size int64
	// ContentType is sniffed from the bytes.
	ContentType string
	// Width and Height (images, as displayed), DurationMs (audio, video):
	// 0 when unknown.
	Width, Height int32
	DurationMs    int64
	// Blurhash is an image's placeholder ("" for none).
	Blurhash string
	BlobKey  string
	// ThumbKey is the thumbnail's key ("" for none).
	ThumbKey  string
	CreatedAt time.Time
	// Attached: sent in a message at least once. A file never attached is
	// collected some time after its upload.
	Attached bool
}

// ReportStatus is where a report is in the moderators' queue.
type ReportStatus uint8

const (
	ReportOpen      ReportStatus = 1
	ReportResolved  ReportStatus = 2 // a moderator acted on it
	ReportDismissed ReportStatus = 3 // a moderator found nothing to do
)

// Report is a user's report of a message.
type Report struct {
	// ID is made by the caller; IDs sort (as strings, byte order) in the
	// order reports were made.
	ID             string
	Reporter       string
	ConversationID string
	Seq            uint64
	Reason         string // a short code: "spam", "abuse", ...
	Note           string // the reporter's words, may be empty
	// Message is the reported message as stored when it was reported
	// (evidence: a later edit or recall does not change it).
	Message   *pb.Message
	CreatedAt time.Time
	Status    ReportStatus
	// ClosedBy (who resolved or dismissed it: an admin API key's name),
	// ClosedAt and Resolution (their note) are set by CloseReport.
	ClosedBy   string
	ClosedAt   time.Time
	Resolution string
}

// AuditEntry is one admin or moderation action. The log is append-only.
type AuditEntry struct {
	// ID is assigned by AppendAudit: increasing in the order entries were
	// appended (per store; in PostgreSQL across nodes).
	ID     uint64
	Time   time.Time
	Actor  string // the admin API key's name, or "system"
	Action string // e.g. "user.ban", "message.delete", "report.resolve"
	Target string // what it acted on: a user id, "conv/seq", a report id
	Detail string // a JSON object with the action's parameters, may be empty
}

// ListQuery selects one page of a listing by id (ListUsers, ListGroups).
type ListQuery struct {
	// Prefix: only ids that start with it ("" lists every id).
	Prefix string
	// After: only ids above it, bytewise ("" from the first): the last id
	// of the previous page.
	After string
	// Limit: at most this many records (<= 0: none).
	Limit int
	// MaxBytes: the page ends once the records in it reach this many bytes
	// (by their Size); it holds at least one record. 0: no byte bound.
	MaxBytes int
}

// Size is what a user record counts toward a page's byte budget (its
// strings plus a fixed share for the other fields).
func (u User) Size() int { return len(u.ID) + len(u.PasswordHash) + 64 }

// Size is what a group record counts toward a page's byte budget.
func (g Group) Size() int {
	return len(g.ConversationID) + len(g.Name) + len(g.AvatarURL) + len(g.Announcement) + len(g.Owner) + 64
}

// Store is Parley's persistent state. All methods are safe for concurrent use.
type Store interface {
	Accounts  // account deletion (accounts.go)
	Retention // retention and disappearing messages (retention.go)
	E2EE      // MLS key packages and group epochs (e2ee.go)

	// Append stores a batch of messages durably and in order. For each message
	// (ConversationId, From, To, ClientMsgId, ContentType, Payload, ServerTime,
	// MessageId and Kind set by the caller, Seq zero):
	//   - if a message from the same From with the same ClientMsgId is already
	//     stored, nothing is written and the result is that stored message with
	//     Duplicate set (this holds within one batch too);
	//   - otherwise Seq becomes the conversation's newest seq + 1 (in batch
	//     order), and the conversation is added to the conversation list of From
	//     and, when To is a user id, of To.
	// Append returns only after the whole batch is durable under the store's
	// sync policy. On error nothing of the batch may be assumed stored, and
	// per-conversation seqs stay gap-free. Results align with msgs.
	Append(ctx context.Context, msgs []*pb.Message) ([]AppendResult, error)

	// Messages returns up to limit messages of the conversation with seq > after, ascending.
	Messages(ctx context.Context, conversationID string, after uint64, limit int) ([]*pb.Message, error)
	// MessageHeads is Messages without payloads and events: what counting
	// unread messages needs, at a fraction of the cost.
	MessageHeads(ctx context.Context, conversationID string, after uint64, limit int) ([]MessageHead, error)
	// History returns up to limit messages with seq < before (before == 0: from the
	// newest), in ascending order.
	History(ctx context.Context, conversationID string, before uint64, limit int) ([]*pb.Message, error)
	// LastSeq returns the conversation's newest seq, 0 when it has none.
	LastSeq(ctx context.Context, conversationID string) (uint64, error)
	// RaiseSeq makes floor the conversation's newest seq when it is higher:
	// LastSeq returns at least floor afterwards and the next message gets a
	// seq above it, with no message at the seqs skipped. For a conversation
	// whose newest messages were lost, so that no seq a client already holds
	// is issued again. Durable when it returns; a lower floor changes nothing.
	RaiseSeq(ctx context.Context, conversationID string, floor uint64) error

	// Conversations returns the ids of the conversations userID takes part in, in no particular order.
	Conversations(ctx context.Context, userID string) ([]string, error)
	// SetCursors raises cursors; a lower value than the stored one is ignored
	// (per field). Each value is clamped to the conversation's LastSeq (a
	// conversation without messages keeps its cursors at 0), so no client
	// can mark messages read before they exist. It need not be durable when it returns: cursors only grow
	// and clients send them again, so a crash may lose the newest moves.
	SetCursors(ctx context.Context, cursors []Cursor) error
	// GetCursor returns the user's cursor in the conversation (zeros when none).
	GetCursor(ctx context.Context, conversationID, userID string) (Cursor, error)

	// CreateUser stores a new user, or ErrExists when the ID or a non-empty
	// NameKey is taken (atomically: of two concurrent creates of one
	// NameKey, exactly one succeeds).
	CreateUser(ctx context.Context, u User) error
	// GetUser returns the user, or ErrNotFound.
	GetUser(ctx context.Context, id string) (User, error)
	// UserByName returns the user whose NameKey is key, or ErrNotFound.
	UserByName(ctx context.Context, key string) (User, error)
	// UpdateUser replaces an existing user, or ErrNotFound.
	UpdateUser(ctx context.Context, u User) error
	// ListUsers returns the users whose ID starts with q.Prefix and is
	// above q.After, ordered by ID (bytewise), within q's count and bytes.
	// A page shorter than q.Limit may still be followed by more: the
	// listing ends with an empty page.
	ListUsers(ctx context.Context, q ListQuery) ([]User, error)

	// RevokeToken records a token id as revoked until it expires.
	RevokeToken(ctx context.Context, tokenID string, expires time.Time) error
	// TokenRevoked reports whether the token id was revoked.
	TokenRevoked(ctx context.Context, tokenID string) (bool, error)

	// Apply stores a Change atomically and durably; on a duplicate Event
	// (same From and ClientMsgId) nothing is written and the original is
	// returned with Duplicate set. ErrNotFound when Update names no message,
	// ErrConflict when it names a recalled one.
	Apply(ctx context.Context, ch Change) (AppendResult, error)
	// GetMessage returns one message, or ErrNotFound.
	GetMessage(ctx context.Context, conversationID string, seq uint64) (*pb.Message, error)

	// GetGroup returns a group, or ErrNotFound.
	GetGroup(ctx context.Context, conversationID string) (Group, error)
	// ListGroups is ListUsers for groups, by ConversationID; dissolved
	// groups are listed too.
	ListGroups(ctx context.Context, q ListQuery) ([]Group, error)
	// GetMember returns a user's membership record (current or past), or ErrNotFound.
	GetMember(ctx context.Context, conversationID, userID string) (Member, error)
	// Members returns current (not Left) members with user id > after, by user id, at most limit.
	Members(ctx context.Context, conversationID, after string, limit int) ([]Member, error)
	// Cursors returns every cursor of the conversation (for group read counts).
	Cursors(ctx context.Context, conversationID string) ([]Cursor, error)

	// SetConversationSettings replaces the user's settings of a conversation.
	SetConversationSettings(ctx context.Context, userID, conversationID string, cs ConversationSettings) error
	// GetConversationSettings returns them (zero when never set).
	GetConversationSettings(ctx context.Context, userID, conversationID string) (ConversationSettings, error)
	// HideMessages hides seqs of a conversation for one user.
	HideMessages(ctx context.Context, userID, conversationID string, seqs []uint64) error
	// HiddenMessages returns the hidden seqs of the conversation for the user in [from, to], ascending.
	HiddenMessages(ctx context.Context, userID, conversationID string, from, to uint64) ([]uint64, error)

	// PutContact writes owner's record about c.UserID (replacing it).
	PutContact(ctx context.Context, owner string, c Contact) error
	// DeleteContact removes owner's record about userID (no error if absent).
	DeleteContact(ctx context.Context, owner, userID string) error
	// GetContact returns owner's record about userID, or ErrNotFound.
	GetContact(ctx context.Context, owner, userID string) (Contact, error)
	// Contacts returns all of owner's records, by user id.
	Contacts(ctx context.Context, owner string) ([]Contact, error)
	// SetBlocked adds or removes userID from owner's block list.
	SetBlocked(ctx context.Context, owner, userID string, blocked bool) error
	// Blocked returns owner's block list, by user id.
	Blocked(ctx context.Context, owner string) ([]string, error)
	// IsBlocked reports whether owner blocked userID.
	IsBlocked(ctx context.Context, owner, userID string) (bool, error)

	// SetLastSeen records when a user's last session ended. It need not be
	// durable when it returns (a crash may lose the newest times).
	SetLastSeen(ctx context.Context, userID string, t time.Time) error
	// LastSeen returns it (zero when unknown).
	LastSeen(ctx context.Context, userID string) (time.Time, error)

	// UserStorage returns the bytes of message payload userID has stored:
	// the payloads of the messages and events they sent, each counted once
	// when first stored, in the same atomic write. Duplicates, edits and
	// recalls do not change it. 0 when none.
	UserStorage(ctx context.Context, userID string) (uint64, error)

	// PutPushTarget stores t, replacing the target of (t.UserID, t.DeviceID).
	PutPushTarget(ctx context.Context, t PushTarget) error
	// PushTargets lists userID's targets ordered by device id (none: empty).
	PushTargets(ctx context.Context, userID string) ([]PushTarget, error)
	// DeletePushTarget removes the target of (userID, deviceID). With token
	// set, only a target whose Token equals it is removed, so a target the
	// platform reported invalid never takes a newer registration with it.
	// It reports whether a target was removed.
	DeletePushTarget(ctx context.Context, userID, deviceID, token string) (bool, error)

	// PutFile stores a new file record, or ErrExists when its ID is taken;
	// its Size counts in its owner's MediaUsage from then on.
	PutFile(ctx context.Context, f File) error
	// UpdateFile replaces a file's record but for ID, Owner, Size and
	// CreatedAt (which never change), or ErrNotFound.
	UpdateFile(ctx context.Context, f File) error
	// GetFile returns a file's record, or ErrNotFound.
	GetFile(ctx context.Context, id string) (File, error)
	// DeleteFile removes a file's record and takes it off its owner's
	// MediaUsage. It reports whether there was one.
	DeleteFile(ctx context.Context, id string) (bool, error)
	// AttachFiles marks files as attached (they are kept); unknown ids are
	// ignored.
	AttachFiles(ctx context.Context, ids []string) error
	// UnattachedFiles returns up to limit files never attached, created
	// before before, oldest first.
	UnattachedFiles(ctx context.Context, before time.Time, limit int) ([]File, error)
	// MediaUsage returns how many files owner has and their bytes.
	MediaUsage(ctx context.Context, owner string) (files, bytes int64, err error)

	// Moderation
	//
	// PutReport stores r (Status must be ReportOpen). A reporter reports a
	// message once: when Reporter already reported (ConversationID, Seq),
	// nothing is written and the first report's ID comes back with created
	// false. ErrExists when r.ID is another report's.
	PutReport(ctx context.Context, r Report) (id string, created bool, err error)
	// GetReport returns one report; ErrNotFound when there is none.
	GetReport(ctx context.Context, id string) (Report, error)
	// Reports lists reports with IDs greater than after ("" from the
	// start), oldest first, at most limit; status 0 lists every status,
	// else only that one.
	Reports(ctx context.Context, status ReportStatus, after string, limit int) ([]Report, error)
	// CloseReport moves an open report to status (ReportResolved or
	// ReportDismissed) with by, note and at. ErrNotFound when there is
	// none, ErrConflict when it is not open.
	CloseReport(ctx context.Context, id string, status ReportStatus, by, note string, at time.Time) error
	// AppendAudit appends e (its ID is ignored) and returns the ID it got.
	AppendAudit(ctx context.Context, e AuditEntry) (uint64, error)
	// AuditLog lists entries with IDs below before (0: from the newest),
	// newest first, at most limit.
	AuditLog(ctx context.Context, before uint64, limit int) ([]AuditEntry, error)
	// GetSetting returns a server-wide setting's value (ErrNotFound when
	// unset); PutSetting replaces it. Values are small (at most a few MiB).
	GetSetting(ctx context.Context, key string) ([]byte, error)
	PutSetting(ctx context.Context, key string, value []byte) error
	// SwapSetting replaces key's value with value if it is still old (old
	// nil: only if key is unset; a set key with an empty value matches an
	// empty non-nil old), atomically, across nodes where the store is
	// shared. swapped is false, and nothing is written, when another write
	// came first. A nil value is stored as empty, like PutSetting's.
	SwapSetting(ctx context.Context, key string, old, value []byte) (swapped bool, err error)

	// Rich messages
	//
	// Append (and Apply, for its Event) also index what a message names:
	//   - a message with ThreadRoot set is a reply in that thread: it is
	//     listed by ThreadMessages and ThreadHistory; unless SenderOnly, the
	//     root's ThreadSummary counts it (ReplyCount + 1, LastReplySeq and
	//     LastReplyAt its own) and its From takes part in the thread
	//     (InThread);
	//   - a message of kind NORMAL, not SenderOnly, with Mentions or
	//     MentionAll is listed by Mentions for each mentioned user but its
	//     sender (MentionAll: every user but its sender).
	// Apply with an Update that recalls the message (Recalled set) takes it
	// out of Mentions.

	// React applies ops in order as one atomic, durable write; results
	// align with ops. An op fails alone (ReactionResult.Err); the returned
	// error is for the batch as a whole (nothing of it is stored).
	React(ctx context.Context, ops []ReactionOp) ([]ReactionResult, error)
	// Reactions returns the reactions of the given messages of a
	// conversation, Me for userID; messages without reactions are absent.
	Reactions(ctx context.Context, conversationID string, seqs []uint64, userID string) (map[uint64]ReactionSet, error)
	// ReactionChanges lists the messages whose reactions last changed at a
	// version above after, by version, at most limit.
	ReactionChanges(ctx context.Context, conversationID string, after uint64, limit int) ([]ReactionChange, error)
	// ReactionVersion is the conversation's newest reaction version (0: none).
	ReactionVersion(ctx context.Context, conversationID string) (uint64, error)

	// Pins lists a conversation's pinned messages, oldest pin first.
	Pins(ctx context.Context, conversationID string) ([]Pin, error)

	// Threads returns the summaries of the given roots that have replies.
	Threads(ctx context.Context, conversationID string, roots []uint64) (map[uint64]ThreadSummary, error)
	// ThreadMessages returns up to limit replies in root's thread with seq
	// > after, ascending.
	ThreadMessages(ctx context.Context, conversationID string, root, after uint64, limit int) ([]*pb.Message, error)
	// ThreadHistory returns up to limit replies in root's thread with seq <
	// before (0: from the newest), ascending.
	ThreadHistory(ctx context.Context, conversationID string, root, before uint64, limit int) ([]*pb.Message, error)
	// InThread reports whether userID replied in root's thread.
	InThread(ctx context.Context, conversationID string, root uint64, userID string) (bool, error)

	// Mentions returns up to limit seqs of messages of the conversation
	// after seq after that mention userID (by name or everyone), ascending.
	Mentions(ctx context.Context, userID, conversationID string, after uint64, limit int) ([]uint64, error)

	// DiskSize returns the bytes the store takes: its files on disk
	// (embedded) or its tables and indexes in the database (PostgreSQL).
	// An estimate that may lag recent writes.
	DiskSize(ctx context.Context) (int64, error)

	// Ping reports whether the store can serve reads and writes (readiness).
	Ping(ctx context.Context) error
	// Close releases the store; later calls return ErrClosed.
	Close() error
}

// LogEntry is one message in the store's log: Pos is its position, Msg the
// message as stored now (an edited message shows its newest text, a
// recalled one Recalled). Msg is nil when the message cannot be read
// (ErrCorrupt); a reader skips it rather than stopping there for good.
type LogEntry struct {
	Pos uint64
	Msg *pb.Message
}

// Log is implemented by stores that keep every stored message (each one
// appended by Append and each Event of Apply) in one log, in the order the
// writes committed, for followers such as the search index. Optional: a
// store without it has no follower.
type Log interface {
	// LogAfter returns the entries with a position above after, in
	// ascending position order: at most limit, and no more once their
	// messages reach maxBytes (proto size; at least one entry; 0: no byte
	// bound). Positions are assigned by the store, strictly increasing in
	// commit order and never given twice, but not gap-free. A reader that
	// has seen an entry sees every entry below it.
	LogAfter(ctx context.Context, after uint64, limit, maxBytes int) ([]LogEntry, error)
	// LastLogPos returns the newest committed position (0: empty log).
	LastLogPos(ctx context.Context) (uint64, error)
}

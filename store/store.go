// Package store defines Parley's persistent state behind one narrow interface.
// Implementations: store/pebblestore (embedded, the single-node default) and,
// for clusters, PostgreSQL. Every implementation passes store/storetest.
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
)

// AppendResult is the outcome of one message of an Append batch.
type AppendResult struct {
	// Msg is the stored message: the one passed in with Seq assigned, or, for a
	// duplicate, the message stored by the first attempt.
	Msg *pb.Message
	// Duplicate is true when (From, ClientMsgId) had already been stored.
	Duplicate bool
}

// Cursor is one user's position in one conversation. Both values only grow.
type Cursor struct {
	ConversationID string
	UserID         string
	Delivered      uint64
	Read           uint64
}

// User is a user record. Users minted by an app with the app secret may have no record.
type User struct {
	ID string
	// PasswordHash is an encoded argon2id/bcrypt hash, or empty for users without a password.
	PasswordHash string
	// TokenEpoch invalidates every token issued with a lower epoch (password change, "log out everywhere").
	TokenEpoch uint64
	Disabled   bool
	CreatedAt  time.Time
}

// Store is Parley's persistent state. All methods are safe for concurrent use.
type Store interface {
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
	// History returns up to limit messages with seq < before (before == 0: from the
	// newest), in ascending order.
	History(ctx context.Context, conversationID string, before uint64, limit int) ([]*pb.Message, error)
	// LastSeq returns the conversation's newest seq, 0 when it has none.
	LastSeq(ctx context.Context, conversationID string) (uint64, error)

	// Conversations returns the ids of the conversations userID takes part in, in no particular order.
	Conversations(ctx context.Context, userID string) ([]string, error)
	// SetCursors raises cursors; a lower value than the stored one is ignored (per field).
	SetCursors(ctx context.Context, cursors []Cursor) error
	// GetCursor returns the user's cursor in the conversation (zeros when none).
	GetCursor(ctx context.Context, conversationID, userID string) (Cursor, error)

	// CreateUser stores a new user, or ErrExists.
	CreateUser(ctx context.Context, u User) error
	// GetUser returns the user, or ErrNotFound.
	GetUser(ctx context.Context, id string) (User, error)
	// UpdateUser replaces an existing user, or ErrNotFound.
	UpdateUser(ctx context.Context, u User) error

	// RevokeToken records a token id as revoked until it expires.
	RevokeToken(ctx context.Context, tokenID string, expires time.Time) error
	// TokenRevoked reports whether the token id was revoked.
	TokenRevoked(ctx context.Context, tokenID string) (bool, error)

	// Ping reports whether the store can serve reads and writes (readiness).
	Ping(ctx context.Context) error
	// Close releases the store; later calls return ErrClosed.
	Close() error
}

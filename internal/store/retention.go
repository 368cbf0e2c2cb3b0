package store

import (
	"context"
	"time"
)

// MessageRef names one stored message.
type MessageRef struct {
	ConversationID string
	Seq            uint64
}

// Retention is the store's part of retention and disappearing messages
// (docs/retention.md): removing messages for good, with everything derived
// from them, and giving the space back.
//
// A conversation's floor is the lowest seq that may still be stored: every
// message below it has expired. Readers (internal/chat) never serve a
// message below it, whether or not the message is deleted yet.
type Retention interface {
	// MessageFloor returns the conversation's floor (0: never raised).
	MessageFloor(ctx context.Context, conversationID string) (uint64, error)
	// ExpireBefore raises the conversation's floor to floor (at most its
	// LastSeq + 1; a lower floor than the stored one changes nothing) and
	// deletes up to limit of the messages below the floor, oldest first,
	// with their reactions, pins, thread and mention entries, de-dup
	// entries, expiry entries and log entries. It returns the messages it
	// deleted and whether messages below the floor remain. Two callers at
	// once (two nodes) are safe: a message is deleted once, the other call
	// finds it gone.
	ExpireBefore(ctx context.Context, conversationID string, floor uint64, limit int) (removed []MessageRef, more bool, err error)
	// ExpiryUnfinished reports whether the conversation's floor was
	// raised by an ExpireBefore whose work is not all done (it returned
	// more, or the process stopped before the next call): the sweeper
	// calls ExpireBefore again even though its floor has not moved.
	ExpiryUnfinished(ctx context.Context, conversationID string) (bool, error)
	// DeleteMessages deletes the given messages as ExpireBefore does,
	// without moving any floor (disappearing messages). A message that is
	// not stored is skipped. It returns the messages it deleted.
	DeleteMessages(ctx context.Context, refs []MessageRef) ([]MessageRef, error)
	// ExpiringMessages returns up to limit stored messages whose ExpiresAt
	// is set and at or before t, earliest expiry first (an index lookup,
	// no scan of messages).
	ExpiringMessages(ctx context.Context, t time.Time, limit int) ([]MessageRef, error)
	// StoredConversations returns the ids of conversations that have (or
	// had) messages, above after bytewise, ascending, at most limit.
	StoredConversations(ctx context.Context, after string, limit int) ([]string, error)
	// ReclaimSpace gives back the space of what ExpireBefore and
	// DeleteMessages removed: with a conversation, of its messages below
	// floor (the embedded store compacts those key ranges; PostgreSQL does
	// nothing); with conversationID "", of the whole store (PostgreSQL
	// vacuums the tables; the embedded store does nothing more). Slow: the
	// sweeper calls it after a conversation's sweep, and once per round.
	ReclaimSpace(ctx context.Context, conversationID string, floor uint64) error

	// Files carried by messages. The write that stores a message records
	// the files it carries; the one that deletes it (ExpireBefore,
	// DeleteMessages, a recall, an account's erasure) drops them and marks
	// each as maybe carried by no message any more, so a crash right after
	// leaves that mark to be checked. Messages stored before this existed
	// record nothing: their files are never marked (they are kept).
	//
	// OrphanedFiles returns up to limit files marked at least minAge ago
	// that no stored message carries; marks of files carried again, or
	// without a record, are dropped on the way. minAge is the window in
	// which a file is still attached to new messages (media's Attach asks
	// FileOrphaned): its bytes are deleted only after it.
	OrphanedFiles(ctx context.Context, minAge time.Duration, limit int) ([]File, error)
	// FileOrphaned reports whether file id is marked and no stored message
	// carries it, and how long ago the mark was written (the store's
	// clock).
	FileOrphaned(ctx context.Context, id string) (age time.Duration, orphaned bool, err error)
	// DeleteOrphanedFile deletes file id's record (as DeleteFile does) if
	// no stored message carries it, and its mark in any case; it reports
	// whether the record was deleted. The caller deletes the bytes first.
	DeleteOrphanedFile(ctx context.Context, id string) (bool, error)
}

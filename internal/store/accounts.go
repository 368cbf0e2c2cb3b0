package store

import "context"

// Accounts is what deleting an account needs of a store beyond the rest of
// Store (docs/accounts.md). Both stores implement it; storetest checks it.
type Accounts interface {
	// FilesOf returns up to limit records of the files owner uploaded, with
	// IDs above after ("" from the first), by ID.
	FilesOf(ctx context.Context, owner, after string, limit int) ([]File, error)
	// EraseMessages reads up to limit messages of conversationID with seq
	// above after and erases those sent by from that are not erased yet:
	// Payload, SearchText, ContentType, Attachments, Mentions, MentionAll
	// and Preview are cleared, and a NORMAL message is marked Recalled, in
	// place (seq, From, kind and time stay), so other people's history
	// keeps its order. Each erased message is written to the store's
	// message log (when it has one) and to its search columns, as an edit
	// or recall is, so the search index drops it. next is the last seq
	// read (0: there was none; the conversation is done).
	EraseMessages(ctx context.Context, conversationID, from string, after uint64, limit int) (next uint64, erased int, err error)
	// DeleteUserRecords removes what the store keeps about userID outside
	// its user record, messages, memberships and files: its conversation
	// list, its cursors, conversation settings and hidden messages, its
	// contacts and every other user's contact record about it, its block
	// list and its entries in other users' block lists, its last-seen
	// time, push targets, stored-bytes count and mention index. Idempotent.
	DeleteUserRecords(ctx context.Context, userID string) error
	// PurgeDeleted makes the bytes that deletions and overwrites left
	// behind leave the store's files where the store can do it cheaply:
	// the embedded store flushes its memory tables and compacts the whole
	// key space (no old version survives in a table or a write-ahead log);
	// PostgreSQL vacuums the tables an account deletion writes to (dead
	// rows are no longer visible to any query, though their bytes may stay
	// in free space and in the database's own WAL until reused).
	PurgeDeleted(ctx context.Context) error
}

// Package search is full-text message search over a user's own
// conversations. An [Index] holds one document per searchable message (its
// current text: an edit replaces it, a recall or a delete for everyone
// removes it) and answers a [Query] that the chat service has already
// narrowed to what the asking user may read: the conversations they are in,
// the seq ranges of their membership, minus what they deleted for
// themselves. The index never decides visibility on its own, except that a
// SenderOnly document is found only by its sender.
//
// Implementations: internal/search/bleveindex (embedded, a Bleve index in
// the data directory, fed from the store's log by a [Follower]) and, for
// clusters, PostgreSQL's own text search. Every implementation passes
// internal/search/searchtest.
package search

import (
	"context"
	"errors"
)

var (
	// ErrClosed: the index has been closed.
	ErrClosed = errors.New("search: closed")
	// ErrBadQuery: the query is too long (MaxQueryBytes, MaxQueryTerms).
	ErrBadQuery = errors.New("search: query too long")
)

// Doc is one searchable message.
type Doc struct {
	ConversationID string
	Seq            uint64
	From           string
	// ContentType is the message's content type ("" is text).
	ContentType string
	// Text is what is searched: the payload of a text message, or the
	// plain-text search field an app sends beside an opaque payload. At
	// most MaxTextBytes are indexed.
	Text string
	// Time is the server time of the message's first version, unix ms.
	Time int64
	// HasAttachment: the message carries files.
	HasAttachment bool
	// SenderOnly: only the sender may find it (a shadow-muted user's
	// message).
	SenderOnly bool
	// Members are the users who read the whole conversation for as long
	// as it exists, when that set never changes: the two sides of a 1:1
	// conversation. Empty for a group (members come and go). An index may
	// use it to find all of a user's such conversations with one lookup
	// (Range.Member).
	Members []string
}

// Change is one change to the index.
type Change struct {
	// Put adds or replaces the document of (Doc.ConversationID, Doc.Seq).
	Put *Doc
	// Delete, when Put is nil, removes the document of (ConversationID,
	// Seq) if there is one.
	ConversationID string
	Seq            uint64
}

// Range is a part of a conversation the user may read: seqs in [From, To]
// (To 0: no upper bound).
type Range struct {
	ConversationID string
	From, To       uint64
	// Hidden lists seqs in the range the user deleted for themselves.
	Hidden []uint64
	// Member: every document of the conversation lists Query.UserID in
	// Doc.Members (a 1:1 conversation of the user). An index may then look
	// for the user's member conversations all at once instead of one by
	// one; it still returns only hits inside the Ranges.
	Member bool
}

// Query is one search, already narrowed to what the user may read.
type Query struct {
	// Text is the words to find (all of them, in any order), or a phrase
	// when Phrase is set. Case and accents do not matter; in scripts
	// written without spaces (Chinese, Japanese, Korean, Thai) a query
	// finds its characters inside longer runs. Text without any word
	// (only spaces, punctuation or emoji) matches nothing.
	Text   string
	Phrase bool
	// UserID is the asking user: SenderOnly documents match only theirs.
	UserID string
	// Ranges are where to look. Empty: nothing matches.
	Ranges []Range
	// Operator: the admin API's search (moderation), never a user's:
	// SenderOnly documents match too, and empty Ranges means every
	// conversation.
	Operator bool
	// Filters; zero values do not filter.
	From          string
	ContentType   string
	HasAttachment bool
	Since, Until  int64 // unix ms, inclusive; 0: unbounded
	// Before pages: only hits older than it (from a previous Result.Next).
	Before *Cursor
	// Limit bounds the hits returned: 0 or more than MaxLimit is MaxLimit.
	Limit int
}

// Cursor is a position in the newest-first order of hits: by Time
// descending, then ConversationID descending, then Seq descending.
type Cursor struct {
	Time           int64
	ConversationID string
	Seq            uint64
}

// Less reports whether c comes after d in the newest-first order (it is
// older).
func (c Cursor) Less(d Cursor) bool {
	if c.Time != d.Time {
		return c.Time < d.Time
	}
	if c.ConversationID != d.ConversationID {
		return c.ConversationID < d.ConversationID
	}
	return c.Seq < d.Seq
}

// Hit is one matching message.
type Hit struct {
	ConversationID string
	Seq            uint64
	From           string
	Time           int64
	// Snippet is a part of the text around the first match, at most
	// SnippetBytes, cut at character boundaries. Highlights are the byte
	// ranges [start, end) of the matched words in Snippet, ascending and
	// not overlapping.
	Snippet    string
	Highlights [][2]int
}

// Cursor returns the hit's position in the order of hits.
func (h Hit) Cursor() Cursor {
	return Cursor{Time: h.Time, ConversationID: h.ConversationID, Seq: h.Seq}
}

const (
	// SnippetBytes bounds a hit's snippet.
	SnippetBytes = 240
	// MaxLimit caps Query.Limit.
	MaxLimit = 100
	// MaxTextBytes is how much of a message's text is indexed.
	MaxTextBytes = 64 << 10
	// MaxQueryBytes and MaxQueryTerms bound a query's text (ErrBadQuery).
	MaxQueryBytes = 1 << 10
	MaxQueryTerms = 32
)

// Result is a page of hits, newest first.
type Result struct {
	Hits []Hit
	// Next is the cursor of the following page; nil at the end. A page may
	// hold fewer than Limit hits and still have a Next: an implementation
	// bounds the work of one call and says where to go on.
	Next *Cursor
}

// Index is a full-text index of messages. Safe for concurrent use.
type Index interface {
	// Apply applies changes in order and records pos, the position in the
	// feed they came from (store.Log), in the same atomic step: after a
	// crash Position is that of the last Apply whose changes survived.
	Apply(ctx context.Context, changes []Change, pos uint64) error
	// Position returns the pos of the last Apply (0: none).
	Position(ctx context.Context) (uint64, error)
	// Search answers q.
	Search(ctx context.Context, q Query) (Result, error)
	// Close releases the index; later calls return ErrClosed.
	Close() error
}

package migrate

import (
	"time"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// The record types a Source hands to a Sink, one or more per Kind. They are
// the stores' shared vocabulary (store types where one exists), never a
// store's encoding, so each side changes without the other.
//
// Adding a record kind (a new namespace in the embedded store):
//  1. a record type here, if no store type fits;
//  2. an exporter in internal/store/pebblestore/export.go (one entry of
//     exportKinds: its namespace byte, Kind name and decode function);
//  3. an importer in internal/store/pgstore/import.go (one entry of
//     importers: how its records become rows, and how to count them);
//  4. seeding of the kind in internal/migrate/migratetest (Seed and Check),
//     so the round-trip tests cover it.
//
// Until step 2 is done the exporter refuses a store holding the namespace
// (ErrUnknownNamespace): a new kind is never silently left behind.

// Message is a stored message or event at its seq.
type Message struct{ Msg *pb.Message }

// LastSeq is a conversation's newest seq (gaps included: RaiseSeq).
type LastSeq struct {
	Conv string
	Seq  uint64
}

// Dedup records that From's ClientMsgID was stored at (Conv, Seq).
type Dedup struct {
	From, ClientMsgID, Conv string
	Seq                     uint64
}

// ConvEntry is one entry of a user's conversation list.
type ConvEntry struct{ User, Conv string }

// UserName is a user's unique normalized name.
type UserName struct{ NameKey, UserID string }

// RevokedToken is a revoked token and when it expires.
type RevokedToken struct {
	ID      string
	Expires time.Time
}

// Member is a group member record (current or past).
type Member struct {
	Conv string
	store.Member
}

// ConvSettings are a user's settings of a conversation.
type ConvSettings struct {
	User, Conv string
	store.ConversationSettings
}

// Hidden is a message hidden for a user.
type Hidden struct {
	User, Conv string
	Seq        uint64
}

// Contact is one of Owner's contacts.
type Contact struct {
	Owner string
	store.Contact
}

// Block is Owner blocking User.
type Block struct{ Owner, User string }

// LastSeen is when a user was last seen.
type LastSeen struct {
	User string
	At   time.Time
}

// Usage is the payload bytes a user has stored.
type Usage struct {
	User  string
	Bytes uint64
}

// Setting is a server-wide setting.
type Setting struct {
	Key   string
	Value []byte
}

// Reaction is one user's emoji on a message.
type Reaction struct {
	Conv  string
	Seq   uint64
	User  string
	Emoji string
}

// ReactionCount is an emoji's count on a message; Order is the reaction
// version at which it first appeared (emojis list in that order).
type ReactionCount struct {
	Conv         string
	Seq          uint64
	Emoji        string
	Count, Order uint64
}

// MessageReactionVersion is a message's reaction version.
type MessageReactionVersion struct {
	Conv    string
	Seq     uint64
	Version uint64
}

// ReactionVersion is a conversation's newest reaction version.
type ReactionVersion struct {
	Conv    string
	Version uint64
}

// Pin is a pinned message; Order is the seq of the event that pinned it.
type Pin struct {
	Conv string
	store.Pin
	Order uint64
}

// ThreadReply is a reply in the thread of Root.
type ThreadReply struct {
	Conv      string
	Root, Seq uint64
}

// Thread is a thread's summary.
type Thread struct {
	Conv string
	Root uint64
	store.ThreadSummary
}

// ThreadUser is a participant of a thread.
type ThreadUser struct {
	Conv string
	Root uint64
	User string
}

// Mention is User mentioned by name at (Conv, Seq).
type Mention struct {
	User, Conv string
	Seq        uint64
}

// MentionAll is a mention of everyone at (Conv, Seq) by Sender.
type MentionAll struct {
	Conv   string
	Seq    uint64
	Sender string
}

// Floor is a conversation's first available seq (retention): messages
// below it expired.
type Floor struct {
	Conv  string
	Floor uint64
}

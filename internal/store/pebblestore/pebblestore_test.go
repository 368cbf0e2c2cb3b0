package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/store/storetest"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

var quiet = slog.New(slog.DiscardHandler)

func openAt(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir, Options{Logger: quiet})
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

func openTemp(t *testing.T) *Store {
	s := openAt(t, t.TempDir())
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return openAt(t, t.TempDir()) })
}

func TestPersistence(t *testing.T) {
	storetest.RunPersistence(t, func(t *testing.T) func() store.Store {
		dir := t.TempDir()
		return func() store.Store { return openAt(t, dir) }
	})
}

// TestTinyCaches runs the suite with caches of one entry, so nearly every
// lookup takes the disk path (seek for seqs, Get for de-dup, rewrite of
// list entries) instead of the cache.
func TestTinyCaches(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := Open(t.TempDir(), Options{Logger: quiet, DedupCacheEntries: 1, ConversationCacheEntries: 1})
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func message(conv, from, to, clientID string) *pb.Message {
	return &pb.Message{ConversationId: conv, From: from, To: to, ClientMsgId: clientID, ContentType: "text", Payload: []byte("p-" + clientID)}
}

func mustAppend(t testing.TB, s *Store, msgs ...*pb.Message) []store.AppendResult {
	t.Helper()
	res, err := s.Append(context.Background(), msgs)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return res
}

// TestIDsWithAnyBytes: ids containing NUL and length-prefix-like bytes keep
// their conversations, lists and de-dup apart (the generic suite avoids NUL
// for PostgreSQL's sake).
func TestIDsWithAnyBytes(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	convs := []string{"a", "a\x00", "a\x00b", "\x01a", "", "\x00"}
	for i, c := range convs {
		if c == "" {
			continue
		}
		var in []*pb.Message
		for j := 0; j <= i; j++ {
			in = append(in, message(c, "u"+c, c+"\x00peer", fmt.Sprint(j)))
		}
		mustAppend(t, s, in...)
	}
	for i, c := range convs {
		if c == "" {
			continue
		}
		got, err := s.Messages(ctx, c, 0, 100)
		if err != nil || len(got) != i+1 {
			t.Fatalf("Messages(%q) = %d messages, %v; want %d", c, len(got), err, i+1)
		}
		for _, m := range got {
			if m.ConversationId != c {
				t.Fatalf("Messages(%q) returned a message of %q", c, m.ConversationId)
			}
		}
		for _, user := range []string{"u" + c, c + "\x00peer"} {
			if l, err := s.Conversations(ctx, user); err != nil || !slices.Equal(l, []string{c}) {
				t.Fatalf("Conversations(%q) = %q, %v; want [%q]", user, l, err, c)
			}
		}
	}
	// (from "a", id "\x01b") and (from "a\x01b", id "") must not collide, nor
	// ("ab", "c") with ("a", "bc").
	res := mustAppend(t, s, message("x", "ab", "", "c"), message("x", "a", "", "bc"), message("x", "a", "", "\x01b"))
	for i, r := range res {
		if r.Duplicate {
			t.Fatalf("message %d wrongly taken as a duplicate", i)
		}
	}
	if _, err := s.Append(ctx, []*pb.Message{message("", "a", "", "1")}); err == nil {
		t.Fatal("Append accepted a message without a conversation id")
	}
}

// TestFailedAppendLeavesNoGap: an Append that fails after seqs were assigned
// stores nothing, resets the seqs it set, and the next Append reuses them.
func TestFailedAppendLeavesNoGap(t *testing.T) {
	s := openTemp(t)
	mustAppend(t, s, message("c1", "alice", "bob", "0"))
	ok := message("c1", "alice", "bob", "1")
	bad := message("c1", "alice", "bob", "2")
	bad.ContentType = "\xff\xfe" // not UTF-8: proto.Marshal refuses it, after seq assignment
	if _, err := s.Append(context.Background(), []*pb.Message{ok, bad}); err == nil {
		t.Fatal("Append of an unencodable message succeeded")
	}
	if ok.Seq != 0 {
		t.Fatalf("failed Append left seq %d on a message it did not store", ok.Seq)
	}
	res := mustAppend(t, s, message("c1", "alice", "bob", "1"))
	if res[0].Duplicate || res[0].Msg.Seq != 2 {
		t.Fatalf("after a failed Append: seq %d duplicate %v, want 2 false", res[0].Msg.Seq, res[0].Duplicate)
	}
	if n, _ := s.LastSeq(context.Background(), "c1"); n != 2 {
		t.Fatalf("LastSeq = %d, want 2", n)
	}
}

// rewrite replaces the raw value stored under key, behind the store's back.
func rewrite(t *testing.T, s *Store, key []byte, change func(v []byte) []byte) {
	t.Helper()
	v, closer, err := s.db.Get(key)
	if err != nil {
		t.Fatalf("raw Get %q: %v", key, err)
	}
	nv := change(slices.Clone(v))
	_ = closer.Close()
	if err := s.db.Set(key, nv, nil); err != nil {
		t.Fatal(err)
	}
	// The caches could answer without reading the bad value; drop them.
	s.dedup = newGenMap[dedupEntry](8)
	s.seqs = newGenMap[uint64](8)
	s.reactVers = newGenMap[uint64](8)
	s.reactMsgs = newGenMap[reactCached](8)
}

func flipByte(i int) func([]byte) []byte {
	return func(v []byte) []byte {
		if i < 0 {
			i += len(v)
		}
		v[i] ^= 0x04
		return v
	}
}

func wantCorrupt(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrCorrupt) {
		t.Fatalf("%s: %v, want ErrCorrupt", what, err)
	}
}

func TestCorruptValuesAreNeverServed(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	mustAppend(t, s, message("c1", "alice", "bob", "1"), message("c1", "alice", "bob", "2"), message("c1", "alice", "bob", "3"))

	// A flipped bit in the payload of seq 2.
	rewrite(t, s, messageKey(nil, "c1", 2), flipByte(-8))
	got, err := s.Messages(ctx, "c1", 0, 10)
	wantCorrupt(t, "Messages over a corrupt message", err)
	if got != nil {
		t.Fatalf("Messages returned %d messages along with the error", len(got))
	}
	_, err = s.History(ctx, "c1", 0, 10)
	wantCorrupt(t, "History over a corrupt message", err)
	// Pages that do not include it are served.
	if got, err := s.Messages(ctx, "c1", 0, 1); err != nil || len(got) != 1 || got[0].Seq != 1 {
		t.Fatalf("Messages(after 0, limit 1) = %v, %v", got, err)
	}
	if got, err := s.History(ctx, "c1", 0, 1); err != nil || len(got) != 1 || got[0].Seq != 3 {
		t.Fatalf("History(limit 1) = %v, %v", got, err)
	}
	// A resend resolved to the corrupt original fails rather than
	// acknowledging something else.
	_, err = s.Append(ctx, []*pb.Message{message("c1", "alice", "bob", "2")})
	wantCorrupt(t, "resend of a corrupt message", err)

	// A valid value moved under another key fails too (the checksum covers the key).
	v1, closer, err := s.db.Get(messageKey(nil, "c1", 1))
	if err != nil {
		t.Fatal(err)
	}
	rewrite(t, s, messageKey(nil, "c1", 3), func([]byte) []byte { return slices.Clone(v1) })
	_ = closer.Close()
	_, err = s.Messages(ctx, "c1", 2, 10)
	wantCorrupt(t, "Messages over a moved value", err)

	// Corrupt de-dup record, user, cursor, list entry and token.
	rewrite(t, s, dedupKey(nil, "alice", "1"), flipByte(2))
	_, err = s.Append(ctx, []*pb.Message{message("c1", "alice", "bob", "1")})
	wantCorrupt(t, "resend with a corrupt de-dup record", err)

	if err := s.CreateUser(ctx, store.User{ID: "alice", PasswordHash: "h"}); err != nil {
		t.Fatal(err)
	}
	rewrite(t, s, userKey(nil, "alice"), flipByte(3))
	_, err = s.GetUser(ctx, "alice")
	wantCorrupt(t, "GetUser", err)

	if err := s.SetCursors(ctx, []store.Cursor{{ConversationID: "c1", UserID: "bob", Delivered: 2, Read: 1}}); err != nil {
		t.Fatal(err)
	}
	rewrite(t, s, cursorKey(nil, "c1", "bob"), flipByte(1))
	_, err = s.GetCursor(ctx, "c1", "bob")
	wantCorrupt(t, "GetCursor", err)

	rewrite(t, s, convKey(nil, "bob", "c1"), flipByte(-1))
	_, err = s.Conversations(ctx, "bob")
	wantCorrupt(t, "Conversations", err)

	if err := s.RevokeToken(ctx, "tok", timeIn(1)); err != nil {
		t.Fatal(err)
	}
	rewrite(t, s, tokenKey(nil, "tok"), flipByte(1))
	_, err = s.TokenRevoked(ctx, "tok")
	wantCorrupt(t, "TokenRevoked", err)

	// A corrupt last-seq record falls back to seeking the messages: seqs
	// continue without a gap.
	mustAppend(t, s, message("c3", "dave", "", "1"), message("c3", "dave", "", "2"))
	rewrite(t, s, lastSeqKey(nil, "c3"), flipByte(3))
	if res := mustAppend(t, s, message("c3", "dave", "", "3")); res[0].Msg.Seq != 3 {
		t.Fatalf("append after a corrupt last-seq record: seq %d, want 3", res[0].Msg.Seq)
	}

	// Other conversations are unaffected.
	mustAppend(t, s, message("c2", "carol", "", "1"))
	if got, err := s.Messages(ctx, "c2", 0, 10); err != nil || len(got) != 1 {
		t.Fatalf("Messages(c2) = %v, %v", got, err)
	}
}

func TestResultsAreTheStoredMessages(t *testing.T) {
	s := openTemp(t)
	in := message("c1", "alice", "bob", "1")
	in.MessageId, in.ServerTime, in.Kind = 77, 1234, pb.MessageKind_MESSAGE_KIND_NORMAL
	res := mustAppend(t, s, in)
	got, err := s.Messages(context.Background(), "c1", 0, 1)
	if err != nil || len(got) != 1 || !proto.Equal(got[0], res[0].Msg) {
		t.Fatalf("stored %v, %v; Append returned %v", got, err, res[0].Msg)
	}
}

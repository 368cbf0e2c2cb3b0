package pebblestore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/parleyim/parley/internal/store"
)

// A store written before the username index (holding look-alikes "alice",
// "Alice", "ALICE") still opens: the oldest keeps the name, every one keeps
// its exact id, and the name is then taken for new users.
func TestOldStoreIndexesUserNames(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openAt(t, dir)
	t0 := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, u := range []store.User{
		{ID: "alice", CreatedAt: t0.Add(2 * time.Hour)},
		{ID: "Alice", CreatedAt: t0.Add(time.Hour)}, // the oldest
		{ID: "ALICE", CreatedAt: t0.Add(3 * time.Hour)},
		{ID: "bob", CreatedAt: t0},
		{ID: "Carol"}, {ID: "carol"}, // no creation time: ties go to the smaller id
	} {
		if err := s.CreateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	// What an older build left: user records and no index.
	for _, k := range [][]byte{userNamesIndexed} {
		if err := s.db.Delete(k, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir)
	defer s.Close()
	for name, want := range map[string]string{"alice": "Alice", "bob": "bob", "carol": "Carol"} {
		if u, err := s.UserByName(ctx, name); err != nil || u.ID != want {
			t.Fatalf("UserByName(%s) = %+v, %v; want %s", name, u, err, want)
		}
	}
	for _, id := range []string{"alice", "Alice", "ALICE", "carol"} {
		if _, err := s.GetUser(ctx, id); err != nil {
			t.Fatalf("GetUser(%s) after indexing: %v", id, err)
		}
	}
	if err := s.CreateUser(ctx, store.User{ID: "aLiCe", NameKey: "alice"}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a new look-alike after indexing: %v, want ErrExists", err)
	}
	// Indexing runs once: a later reopen leaves the index as it is.
	if err := s.CreateUser(ctx, store.User{ID: "Dave", NameKey: "dave-x"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s = openAt(t, dir)
	defer s.Close()
	if _, err := s.UserByName(ctx, "dave"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("reopen re-indexed: UserByName(dave) = %v", err)
	}
}

// Group and member records written before the group settings and JoinSeq
// existed (without the trailing fields) still decode, as zero.
func TestOldGroupRecordsDecode(t *testing.T) {
	g := store.Group{ConversationID: "g:1", Name: "n", Owner: "o", CreatedAt: time.Unix(5, 0).UTC(), AddPolicy: 2, HistoryVisibility: 2}
	key := groupKey(nil, "g:1")
	b := encodeGroup(&g)
	old := b[:len(b)-2] // the two one-byte varints
	got, err := decodeGroup(key, "g:1", old)
	if err != nil || got.AddPolicy != 0 || got.HistoryVisibility != 0 || got.Name != "n" {
		t.Fatalf("old group record = %+v, %v", got, err)
	}
	if got, err := decodeGroup(key, "g:1", b); err != nil || got != g {
		t.Fatalf("group record = %+v, %v; want %+v", got, err, g)
	}
	m := store.Member{UserID: "u", Role: 1, JoinedAt: time.Unix(7, 0).UTC(), JoinSeq: 9}
	mkey := memberKey(nil, nsMember, "g:1", "u")
	mb := encodeMember(&m)
	if got, err := decodeMember(mkey, "u", mb[:len(mb)-1]); err != nil || got.JoinSeq != 0 || got.Role != 1 {
		t.Fatalf("old member record = %+v, %v", got, err)
	}
	if got, err := decodeMember(mkey, "u", mb); err != nil || got != m {
		t.Fatalf("member record = %+v, %v; want %+v", got, err, m)
	}
}

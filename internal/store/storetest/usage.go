package storetest

import (
	"context"
	"testing"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

func usage(t *testing.T, s store.Store, user string) uint64 {
	t.Helper()
	n, err := s.UserStorage(context.Background(), user)
	if err != nil {
		t.Fatalf("UserStorage(%s): %v", user, err)
	}
	return n
}

func wantUsage(t *testing.T, s store.Store, want map[string]int) {
	t.Helper()
	for user, n := range want {
		if got := usage(t, s, user); got != uint64(n) {
			t.Fatalf("UserStorage(%s) = %d, want %d", user, got, n)
		}
	}
}

// Each sender's stored payload bytes: counted once per new message or
// event, never for duplicates, edits or messages without a sender.
func testUserStorage(t *testing.T, s store.Store) {
	wantUsage(t, s, map[string]int{"alice": 0, "bob": 0})
	a1, a2, b1 := msg("d1", "alice", "bob", "a1"), msg("d1", "alice", "bob", "a2"), msg("d1", "bob", "alice", "b1")
	a1.Payload = make([]byte, 1000)
	la1, la2, lb1 := len(a1.Payload), len(a2.Payload), len(b1.Payload)
	// A repeat within the batch is not counted twice.
	appendOK(t, s, a1, a2, b1, msg("d1", "alice", "bob", "a1"))
	wantUsage(t, s, map[string]int{"alice": la1 + la2, "bob": lb1, "carol": 0})

	// A resend in a later batch is not counted; a new message is.
	a3 := msg("d2", "alice", "carol", "a3")
	res := appendOK(t, s, msg("d1", "alice", "bob", "a2"), a3)
	if !res[0].Duplicate {
		t.Fatal("resend not answered as duplicate")
	}
	wantUsage(t, s, map[string]int{"alice": la1 + la2 + len(a3.Payload), "bob": lb1})

	// A message without a sender counts for nobody.
	sys := msg("g:1", "", "", "")
	appendOK(t, s, sys)
	wantUsage(t, s, map[string]int{"": 0})

	// An event counts for its sender; its duplicate and the edit it
	// carries (Update) do not.
	before := usage(t, s, "bob")
	ev := msg("d1", "bob", "alice", "edit-1")
	ev.Kind = pb.MessageKind_MESSAGE_KIND_EDIT
	edited := msg("d1", "bob", "alice", "b1")
	edited.Seq = 3
	edited.Payload = make([]byte, 5000)
	applyOK(t, s, store.Change{Event: ev, Update: edited})
	if r := applyOK(t, s, store.Change{Event: msg("d1", "bob", "alice", "edit-1"), Update: edited}); !r.Duplicate {
		t.Fatal("Apply resend not answered as duplicate")
	}
	wantUsage(t, s, map[string]int{"bob": int(before) + len(ev.Payload)})
}

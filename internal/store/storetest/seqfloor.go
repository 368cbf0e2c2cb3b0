package storetest

import (
	"context"
	"testing"

	"github.com/parleyim/parley/internal/store"
)

func raiseSeq(t *testing.T, s store.Store, conv string, floor uint64) {
	t.Helper()
	if err := s.RaiseSeq(context.Background(), conv, floor); err != nil {
		t.Fatalf("RaiseSeq(%q, %d): %v", conv, floor, err)
	}
}

// testRaiseSeq: a raised floor is the conversation's LastSeq, the next
// append (and change) continues above it, a lower floor changes nothing, and
// an empty conversation can be raised too.
func testRaiseSeq(t *testing.T, s store.Store) {
	appendOK(t, s, msg("c1", "a", "b", "1"), msg("c1", "a", "b", "2"))
	raiseSeq(t, s, "c1", 10)
	if n := lastSeq(t, s, "c1"); n != 10 {
		t.Fatalf("LastSeq after RaiseSeq(10) = %d", n)
	}
	res := appendOK(t, s, msg("c1", "a", "b", "3"), msg("c1", "a", "b", "4"))
	if res[0].Msg.Seq != 11 || res[1].Msg.Seq != 12 {
		t.Fatalf("seqs after the floor: %d, %d; want 11, 12", res[0].Msg.Seq, res[1].Msg.Seq)
	}
	raiseSeq(t, s, "c1", 5) // below: nothing changes
	if n := lastSeq(t, s, "c1"); n != 12 {
		t.Fatalf("LastSeq after a lower floor = %d, want 12", n)
	}
	// A retry of an id stored before the floor is still its original.
	if r := appendOK(t, s, msg("c1", "a", "b", "1")); !r[0].Duplicate || r[0].Msg.Seq != 1 {
		t.Fatalf("resend after the floor: %+v", r[0])
	}
	wantSeqs(t, "c1", all(t, s, "c1"), []uint64{1, 2, 11, 12})

	raiseSeq(t, s, "c9", 7)
	if n := lastSeq(t, s, "c9"); n != 7 {
		t.Fatalf("LastSeq of a raised empty conversation = %d", n)
	}
	ev := msg("c9", "a", "", "ev")
	r, err := s.Apply(context.Background(), store.Change{Event: ev})
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	if r.Msg.Seq != 8 {
		t.Fatalf("event after the floor got seq %d, want 8", r.Msg.Seq)
	}
	if n := lastSeq(t, s, "c2"); n != 0 {
		t.Fatalf("another conversation moved: %d", n)
	}
}

// testRestartRaisedSeq: a raised floor survives a restart.
func testRestartRaisedSeq(t *testing.T, open func() store.Store) {
	s := openStore(t, open)
	appendOK(t, s, msg("c1", "a", "b", "1"))
	raiseSeq(t, s, "c1", 100)
	s = reopen(t, s, open)
	if n := lastSeq(t, s, "c1"); n != 100 {
		t.Fatalf("LastSeq after restart = %d, want 100", n)
	}
	if r := appendOK(t, s, msg("c1", "a", "b", "2")); r[0].Msg.Seq != 101 {
		t.Fatalf("first seq after restart = %d, want 101", r[0].Msg.Seq)
	}
}

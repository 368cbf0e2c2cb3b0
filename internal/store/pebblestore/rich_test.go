package pebblestore

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// TestRichIndexes: a quick pass over threads, mentions and pins (the
// conformance suite covers them in depth).
func TestRichIndexes(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	mustAppend(t, s, message("g:1", "alice", "", "root"))
	r1 := message("g:1", "bob", "", "r1")
	r1.ThreadRoot, r1.ServerTime, r1.Mentions = 1, 100, []string{"alice", "bob"}
	r2 := message("g:1", "carol", "", "r2")
	r2.ThreadRoot, r2.ServerTime, r2.MentionAll = 1, 200, true
	hidden := message("g:1", "dave", "", "r3")
	hidden.ThreadRoot, hidden.SenderOnly, hidden.Mentions = 1, true, []string{"alice"}
	for _, m := range []*pb.Message{r1, r2, hidden} {
		m.Kind = pb.MessageKind_MESSAGE_KIND_NORMAL
	}
	mustAppend(t, s, r1, r2, hidden, message("g:1", "bob", "", "r1")) // the last: a resend

	sums, err := s.Threads(ctx, "g:1", []uint64{1, 2})
	if err != nil || len(sums) != 1 || sums[1] != (store.ThreadSummary{ReplyCount: 2, LastReplySeq: 3, LastReplyAt: 200}) {
		t.Fatalf("Threads = %v, %v", sums, err)
	}
	if got, err := s.ThreadMessages(ctx, "g:1", 1, 0, 10); err != nil || !slices.Equal(seqsOf(got), []uint64{2, 3, 4}) {
		t.Fatalf("ThreadMessages = %v, %v", seqsOf(got), err)
	}
	if got, err := s.ThreadHistory(ctx, "g:1", 1, 4, 1); err != nil || !slices.Equal(seqsOf(got), []uint64{3}) {
		t.Fatalf("ThreadHistory = %v, %v", seqsOf(got), err)
	}
	for user, want := range map[string]bool{"bob": true, "carol": true, "dave": false, "alice": false} {
		if in, err := s.InThread(ctx, "g:1", 1, user); err != nil || in != want {
			t.Fatalf("InThread(%s) = %v, %v", user, in, err)
		}
	}
	for user, want := range map[string][]uint64{"alice": {2, 3}, "bob": {3}, "carol": nil, "erin": {3}} {
		if got, err := s.Mentions(ctx, user, "g:1", 0, 10); err != nil || !slices.Equal(got, want) {
			t.Fatalf("Mentions(%s) = %v, %v; want %v", user, got, err, want)
		}
	}
	// Recalling seq 3 takes it out of the mentions.
	upd := &pb.Message{ConversationId: "g:1", Seq: 3, From: "carol", Recalled: true}
	mustApply(t, s, store.Change{Event: message("g:1", "carol", "", "recall"), Update: upd})
	if got, err := s.Mentions(ctx, "alice", "g:1", 0, 10); err != nil || !slices.Equal(got, []uint64{2}) {
		t.Fatalf("Mentions after a recall = %v, %v", got, err)
	}
	at := time.Unix(1700000000, 0).UTC()
	mustApply(t, s, store.Change{Event: message("g:1", "alice", "", "pin2"), Pin: &store.PinChange{Seq: 2, By: "alice", At: at}})
	mustApply(t, s, store.Change{Event: message("g:1", "alice", "", "pin1"), Pin: &store.PinChange{Seq: 1, By: "bob", At: at}})
	pins, err := s.Pins(ctx, "g:1")
	if err != nil || len(pins) != 2 || pins[0] != (store.Pin{Seq: 2, By: "alice", At: at}) || pins[1].Seq != 1 {
		t.Fatalf("Pins = %v, %v", pins, err)
	}
	mustApply(t, s, store.Change{Event: message("g:1", "alice", "", "unpin2"), Pin: &store.PinChange{Seq: 2, Unpin: true}})
	if pins, err := s.Pins(ctx, "g:1"); err != nil || len(pins) != 1 || pins[0].Seq != 1 {
		t.Fatalf("Pins after an unpin = %v, %v", pins, err)
	}
}

func seqsOf(msgs []*pb.Message) []uint64 {
	var out []uint64
	for _, m := range msgs {
		out = append(out, m.Seq)
	}
	return out
}

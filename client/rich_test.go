package client

import (
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// ReactionState keeps the highest version per message and takes `me` only
// from personal updates, so updates applied in any order converge.
func TestReactionState(t *testing.T) {
	r := func(e string, n uint32, me bool) *pb.Reaction { return &pb.Reaction{Emoji: e, Count: n, Me: me} }
	mine := &pb.ReactionUpdate{ConversationId: "g:a", Seq: 1, Version: 5, Personal: true, Reactions: []*pb.Reaction{r("👍", 1, true)}}
	shared := &pb.ReactionUpdate{ConversationId: "g:a", Seq: 1, Version: 7, Reactions: []*pb.Reaction{r("👍", 3, false), r("🎉", 1, false)}}
	stale := &pb.ReactionUpdate{ConversationId: "g:a", Seq: 1, Version: 6, Reactions: []*pb.Reaction{r("👍", 2, false)}}
	for _, order := range [][]*pb.ReactionUpdate{{mine, shared, stale}, {stale, shared, mine}, {shared, stale, mine}} {
		var s ReactionState
		for _, u := range order {
			s.Apply(u)
		}
		got, v := s.Get("g:a", 1)
		if v != 7 || len(got) != 2 || got[0].Emoji != "👍" || got[0].Count != 3 || got[1].Count != 1 || got[1].Me {
			t.Fatalf("order %v: %v v%d", order, got, v)
		}
		// `me` comes from the personal update, in whatever order it came.
		if !got[0].Me {
			t.Fatalf("the personal update's me was lost: %v", got)
		}
	}
	// My emoji gone to zero drops my mark; an empty update clears all.
	var s ReactionState
	s.Apply(mine)
	s.Apply(&pb.ReactionUpdate{ConversationId: "g:a", Seq: 1, Version: 9, Reactions: []*pb.Reaction{r("🎉", 1, false)}})
	s.Apply(&pb.ReactionUpdate{ConversationId: "g:a", Seq: 1, Version: 10, Reactions: []*pb.Reaction{r("👍", 1, false)}})
	if got, _ := s.Get("g:a", 1); len(got) != 1 || got[0].Me {
		t.Fatalf("a mark kept after its emoji went away: %v", got)
	}
	s.ApplyMessage(&pb.Message{ConversationId: "g:a", Seq: 1, ReactionVersion: 11})
	if got, v := s.Get("g:a", 1); len(got) != 0 || v != 11 {
		t.Fatalf("after an empty update: %v v%d", got, v)
	}
}

package chat

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"golang.org/x/sync/semaphore"

	"github.com/parleyim/parley/internal/store/pebblestore"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// A read that cannot get its share of the read memory is refused with
// TOO_MANY_REQUESTS and counted; once the memory is released it goes
// through, and a read asking for more than the whole budget runs alone.
func TestReserveReadRefusesWhenTaken(t *testing.T) {
	s := &Service{cfg: Config{ReadMemoryBytes: 100}, reads: semaphore.NewWeighted(100)}
	ctx := context.Background()
	release, err := s.ReserveRead(ctx, 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReserveRead(ctx, 50); err != errTooMany {
		t.Fatalf("a read past the budget: %v, want TOO_MANY_REQUESTS", err)
	}
	if got := s.stats.readsRefused.Load(); got != 1 {
		t.Fatalf("ReadsRefused %d, want 1", got)
	}
	release()
	big, err := s.ReserveRead(ctx, 1000)
	if err != nil {
		t.Fatalf("a read over the whole budget, alone: %v", err)
	}
	big()
}

// readPage stops at PageBytes (or the count limit), always returns at least
// one message, says has_more exactly, and pages forward and backward
// through every message once.
func TestReadPageByteBudget(t *testing.T) {
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const conv, n = "p:a:b", 120
	var batch []*pb.Message
	for i := range n {
		size := 100
		switch i % 10 {
		case 3:
			size = 20 << 10
		case 7:
			size = 50 << 10 // larger than the page budget below: a page of its own
		}
		batch = append(batch, &pb.Message{ConversationId: conv, From: "a", To: "b", ClientMsgId: fmt.Sprint(i),
			Payload: bytes.Repeat([]byte{'x'}, size), MessageId: uint64(i + 1), Kind: pb.MessageKind_MESSAGE_KIND_NORMAL})
	}
	if _, err := st.Append(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	s := &Service{cfg: Config{PageBytes: 32 << 10}, store: st}
	same := func(m []*pb.Message) ([]*pb.Message, error) { return m, nil }
	check := func(page []*pb.Message, limit int) {
		t.Helper()
		if len(page) == 0 || len(page) > limit {
			t.Fatalf("a page of %d messages (limit %d)", len(page), limit)
		}
		size := 0
		for _, m := range page {
			size += msgCost(m)
		}
		if len(page) > 1 && size > s.cfg.PageBytes {
			t.Fatalf("a page of %d messages and %d bytes, over %d", len(page), size, s.cfg.PageBytes)
		}
	}
	for _, limit := range []int{1, 5, 100, 1000} {
		var seen []uint64
		for after := uint64(0); ; {
			page, more, err := s.readPage(context.Background(), pageSpec{conv: conv, forward: true, after: after, n: limit, visible: same})
			if err != nil {
				t.Fatal(err)
			}
			check(page, limit)
			for _, m := range page {
				seen = append(seen, m.Seq)
			}
			after = page[len(page)-1].Seq
			if more != (after < n) {
				t.Fatalf("forward limit %d: has_more %v after seq %d of %d", limit, more, after, n)
			}
			if !more {
				break
			}
		}
		for i, seq := range seen {
			if seq != uint64(i+1) || len(seen) != n {
				t.Fatalf("forward limit %d: seqs %v", limit, seen)
			}
		}
		var back []uint64
		const floor = 10 // a cleared conversation: nothing at or below it
		for before := uint64(0); ; {
			page, more, err := s.readPage(context.Background(), pageSpec{conv: conv, before: before, floor: floor, n: limit, visible: same})
			if err != nil {
				t.Fatal(err)
			}
			check(page, limit)
			for i := len(page) - 1; i >= 0; i-- {
				back = append(back, page[i].Seq)
			}
			before = page[0].Seq
			if more != (before > floor+1) {
				t.Fatalf("backward limit %d: has_more %v before seq %d", limit, more, before)
			}
			if !more {
				break
			}
		}
		for i, seq := range back {
			if seq != uint64(n-i) || len(back) != n-floor {
				t.Fatalf("backward limit %d: seqs %v", limit, back)
			}
		}
	}
}

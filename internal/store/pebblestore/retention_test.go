package pebblestore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/cockroachdb/pebble/v2"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// TestRetentionReclaimsDisk writes ~100 MB of messages (incompressible
// payloads), expires all but the newest, reclaims, and checks the store's
// files shrank by most of what was written: the range deletions and the
// compaction give the space back to the file system.
func TestRetentionReclaimsDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100 MB")
	}
	ctx := context.Background()
	s := openTemp(t)
	const total = 100 << 20
	writeIncompressible(t, s, total, func(j int) string { return fmt.Sprint("c", j%4) })
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	before, err := s.DiskSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for c := range 4 {
		conv := fmt.Sprint("c", c)
		last, _ := s.LastSeq(ctx, conv)
		for {
			_, more, err := s.ExpireBefore(ctx, conv, last, 1000)
			if err != nil {
				t.Fatal(err)
			}
			if !more {
				break
			}
		}
		if err := s.ReclaimSpace(ctx, conv, last); err != nil {
			t.Fatal(err)
		}
		if got := len(mustMessages(t, s, conv)); got != 1 {
			t.Fatalf("%s keeps %d messages, want 1", conv, got)
		}
	}
	// What is left is mostly write-ahead log files Pebble keeps to reuse
	// (a fixed amount, not growing with the data).
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	after, err := s.DiskSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("store on disk: %d MB before expiry, %d MB after (%d MB written)", before>>20, after>>20, total>>20)
	if before < total*9/10 {
		t.Fatalf("only %d MB on disk after writing %d MB: the test measures nothing", before>>20, total>>20)
	}
	if freed := before - after; freed < total*3/4 {
		t.Fatalf("reclaimed %d MB of %d MB written", freed>>20, total>>20)
	}
}

// TestRetentionDropsCoveredFiles expires a conversation whose messages
// sit compacted in files of their own (the common case of an old
// conversation): the space comes back by dropping those files whole
// (Pebble's delete-only compactions), without a compaction that reads and
// rewrites ~100 MB.
func TestRetentionDropsCoveredFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 100 MB")
	}
	ctx := context.Background()
	s := openTemp(t)
	const (
		total = 100 << 20
		conv  = "c"
	)
	writeIncompressible(t, s, total, func(int) string { return conv })
	// Everything into the bottom level, as an old conversation's messages.
	if err := s.db.Compact(ctx, []byte{0}, []byte{0xff}, false); err != nil {
		t.Fatal(err)
	}
	before, err := s.DiskSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last, _ := s.LastSeq(ctx, conv)
	for {
		_, more, err := s.ExpireBefore(ctx, conv, last, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
	}
	m0 := s.db.Metrics()
	if err := s.ReclaimSpace(ctx, conv, last); err != nil {
		t.Fatal(err)
	}
	m1 := s.db.Metrics()
	if got := len(mustMessages(t, s, conv)); got != 1 {
		t.Fatalf("keeps %d messages, want 1", got)
	}
	after, err := s.DiskSize(ctx)
	if err != nil {
		t.Fatal(err)
	}
	read := compactionRead(m1) - compactionRead(m0)
	t.Logf("store on disk: %d MB before expiry, %d MB after; delete-only compactions %d; compaction read %d MB", before>>20, after>>20,
		m1.Compact.DeleteOnlyCount-m0.Compact.DeleteOnlyCount, read>>20)
	if freed := before - after; freed < total*3/4 {
		t.Fatalf("reclaimed %d MB of %d MB written", freed>>20, total>>20)
	}
	if m1.Compact.DeleteOnlyCount == m0.Compact.DeleteOnlyCount {
		t.Fatal("no file was dropped whole: the space came back by rewriting")
	}
	if read > total/4 {
		t.Fatalf("compactions read %d MB to give back the space of %d MB", read>>20, total>>20)
	}
}

// writeIncompressible appends total bytes of 4 KiB random payloads, message
// j to conversation convOf(j).
func writeIncompressible(t *testing.T, s *Store, total int, convOf func(j int) string) {
	t.Helper()
	const payload, batch = 4 << 10, 256
	n := total / payload
	for i := 0; i < n; i += batch {
		var msgs []*pb.Message
		for j := i; j < min(i+batch, n); j++ {
			p := make([]byte, payload)
			rand.Read(p)
			msgs = append(msgs, &pb.Message{ConversationId: convOf(j), From: "a", To: "b",
				ClientMsgId: fmt.Sprint("m", j), ContentType: "bin", Payload: p, ServerTime: 1, Kind: pb.MessageKind_MESSAGE_KIND_NORMAL})
		}
		if _, err := s.Append(context.Background(), msgs); err != nil {
			t.Fatal(err)
		}
	}
}

// compactionRead is what compactions have read from tables, every level.
func compactionRead(m *pebble.Metrics) uint64 {
	var n uint64
	for _, l := range m.Levels {
		n += l.TableBytesRead
	}
	return n
}

func mustMessages(t *testing.T, s store.Store, conv string) []*pb.Message {
	t.Helper()
	m, err := s.Messages(context.Background(), conv, 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestExpireDeletesOnlyItsLogEntries interleaves two conversations' log
// positions (runs of one conversation broken by the other's messages, and
// by batches) and expires one of them in small batches: the log keeps
// exactly the other's entries and the survivor's, each still readable.
// Runs of consecutive positions go as range deletions; one reaching a
// neighbour's position would delete a message's log entry that stays.
func TestExpireDeletesOnlyItsLogEntries(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	m := func(conv, id string) *pb.Message {
		return &pb.Message{ConversationId: conv, From: "a", To: "b", ClientMsgId: id, ContentType: "text/plain",
			Payload: []byte(id), ServerTime: 1, Kind: pb.MessageKind_MESSAGE_KIND_NORMAL}
	}
	// Positions: A1 A2 B1 A3 A4 A5 B2 A6 | A7 | B3 | A8 A9 | A10
	for _, batch := range [][]string{{"A1", "A2", "B1", "A3", "A4", "A5", "B2", "A6"}, {"A7"}, {"B3"}, {"A8", "A9"}, {"A10"}} {
		var msgs []*pb.Message
		for _, id := range batch {
			msgs = append(msgs, m("c"+id[:1], id))
		}
		if _, err := s.Append(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	for {
		_, more, err := s.ExpireBefore(ctx, "cA", 10, 3) // keeps A10
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
	}
	entries, err := s.LogAfter(ctx, 0, 100, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.Msg == nil {
			t.Fatalf("log entry %d of a deleted message", e.Pos)
		}
		got = append(got, e.Msg.ClientMsgId)
	}
	if fmt.Sprint(got) != "[B1 B2 B3 A10]" {
		t.Fatalf("log after expiring cA below 10 = %v, want [B1 B2 B3 A10]", got)
	}
}

// While a sweep is under way, messages below the new floor are still on
// disk (they go with one range deletion at its end), but they are gone for
// every reader and writer: a single read, an edit and a reaction all find
// no message.
func TestBelowFloorIsGoneBeforeItsDeletion(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	var msgs []*pb.Message
	for i := range 6 {
		msgs = append(msgs, &pb.Message{ConversationId: "c", From: "a", To: "b", ClientMsgId: fmt.Sprint("m", i),
			ContentType: "text/plain", Payload: []byte("x"), ServerTime: 1, Kind: pb.MessageKind_MESSAGE_KIND_NORMAL})
	}
	if _, err := s.Append(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	if _, err := s.React(ctx, []store.ReactionOp{{ConversationID: "c", Seq: 4, UserID: "b", Emoji: "👍"}}); err != nil {
		t.Fatal(err)
	}
	if _, more, err := s.ExpireBefore(ctx, "c", 6, 2); err != nil || !more {
		t.Fatalf("first batch: more %v, %v", more, err)
	}
	if raw, err := s.Messages(ctx, "c", 0, 10); err != nil || len(raw) != 6 {
		t.Fatalf("stored mid-sweep: %d messages, %v (want all 6 still on disk)", len(raw), err)
	}
	if _, err := s.GetMessage(ctx, "c", 4); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetMessage below the floor mid-sweep: %v", err)
	}
	edit := &pb.Message{ConversationId: "c", From: "a", To: "b", ClientMsgId: "edit", Kind: pb.MessageKind_MESSAGE_KIND_EDIT,
		Event: &pb.MessageEvent{TargetSeq: 4}}
	upd := &pb.Message{ConversationId: "c", Seq: 4, From: "a", To: "b", ClientMsgId: "m3", ContentType: "text/plain",
		Payload: []byte("edited"), ServerTime: 1, Kind: pb.MessageKind_MESSAGE_KIND_NORMAL}
	if _, err := s.Apply(ctx, store.Change{Event: edit, Update: upd}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("edit below the floor mid-sweep: %v", err)
	}
	res, err := s.React(ctx, []store.ReactionOp{{ConversationID: "c", Seq: 5, UserID: "b", Emoji: "👍"},
		{ConversationID: "c", Seq: 4, UserID: "a", Emoji: "👍"}})
	if err != nil || !errors.Is(res[0].Err, store.ErrNotFound) || !errors.Is(res[1].Err, store.ErrNotFound) {
		t.Fatalf("React below the floor mid-sweep: %+v, %v", res, err)
	}
	if m, err := s.GetMessage(ctx, "c", 6); err != nil || m.Seq != 6 {
		t.Fatalf("GetMessage at the floor: %v, %v", m, err)
	}
}

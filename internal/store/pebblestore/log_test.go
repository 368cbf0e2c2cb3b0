package pebblestore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/parleyim/parley/internal/faultfs"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// logged reads the whole log after pos, checking positions grow strictly.
func logged(t *testing.T, s *Store, after uint64) []store.LogEntry {
	t.Helper()
	var out []store.LogEntry
	for {
		es, err := s.LogAfter(context.Background(), after, 3, 0)
		if err != nil {
			t.Fatalf("LogAfter(%d): %v", after, err)
		}
		if len(es) == 0 {
			return out
		}
		for _, e := range es {
			if e.Pos <= after {
				t.Fatalf("log position %d after %d: not increasing", e.Pos, after)
			}
			after = e.Pos
		}
		out = append(out, es...)
	}
}

func logIDs(es []store.LogEntry) []string {
	var ids []string
	for _, e := range es {
		if e.Msg == nil {
			ids = append(ids, "<nil>")
			continue
		}
		ids = append(ids, fmt.Sprintf("%s/%d", e.Msg.ConversationId, e.Msg.Seq))
	}
	return ids
}

// TestLogFollowsEveryWrite: Append's messages (duplicates once) and Apply's
// events are in the log in commit order; an entry shows its message as
// stored now, so an edited message reads with its new text.
func TestLogFollowsEveryWrite(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if pos, err := s.LastLogPos(ctx); err != nil || pos != 0 {
		t.Fatalf("LastLogPos of an empty store = %d, %v", pos, err)
	}
	mustAppend(t, s, message("c1", "a", "b", "1"), message("c2", "b", "a", "2"), message("c1", "a", "b", "1"))
	mustAppend(t, s, message("c1", "b", "a", "3"))
	mustAppend(t, s, message("c1", "b", "a", "3")) // a resend: nothing stored, nothing logged

	orig, err := s.GetMessage(ctx, "c1", 1)
	if err != nil {
		t.Fatal(err)
	}
	edited := orig
	edited.Payload = []byte("new text")
	mustApply(t, s, store.Change{
		Event:  &pb.Message{ConversationId: "c1", From: "a", ClientMsgId: "e1", Kind: pb.MessageKind_MESSAGE_KIND_EDIT, Payload: []byte("new text"), Event: &pb.MessageEvent{TargetSeq: 1}},
		Update: edited,
	})
	recalled := message("c2", "b", "a", "2")
	recalled.Seq, recalled.Recalled, recalled.Payload = 1, true, nil
	mustApply(t, s, store.Change{
		Event:  &pb.Message{ConversationId: "c2", From: "b", ClientMsgId: "r1", Kind: pb.MessageKind_MESSAGE_KIND_RECALL, Event: &pb.MessageEvent{TargetSeq: 1}},
		Update: recalled,
	})
	mustApply(t, s, store.Change{
		Event: &pb.Message{ConversationId: "g:1", From: "a", ClientMsgId: "g1", Kind: pb.MessageKind_MESSAGE_KIND_GROUP_CREATED},
		Group: &store.Group{Name: "g", Owner: "a"},
	})

	es := logged(t, s, 0)
	want := []string{"c1/1", "c2/1", "c1/2", "c1/3", "c2/2", "g:1/1"}
	if got := logIDs(es); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("log = %v, want %v", got, want)
	}
	if string(es[0].Msg.Payload) != "new text" || !es[1].Msg.Recalled {
		t.Fatalf("log entries show stale messages: %q recalled=%v", es[0].Msg.Payload, es[1].Msg.Recalled)
	}
	if es[3].Msg.Kind != pb.MessageKind_MESSAGE_KIND_EDIT || es[4].Msg.Kind != pb.MessageKind_MESSAGE_KIND_RECALL {
		t.Fatalf("events logged as kinds %v, %v", es[3].Msg.Kind, es[4].Msg.Kind)
	}
	last, err := s.LastLogPos(ctx)
	if err != nil || last != es[len(es)-1].Pos {
		t.Fatalf("LastLogPos = %d, %v; want %d", last, err, es[len(es)-1].Pos)
	}

	// The byte bound ends a page, after at least one entry.
	page, err := s.LogAfter(ctx, 0, 100, 1)
	if err != nil || len(page) != 1 || page[0].Pos != es[0].Pos {
		t.Fatalf("LogAfter with a 1-byte bound: %v, %v; want the first entry alone", logIDs(page), err)
	}
	if page, err := s.LogAfter(ctx, last, 100, 0); err != nil || len(page) != 0 {
		t.Fatalf("LogAfter(last) = %v, %v; want nothing", logIDs(page), err)
	}
}

// TestLogAcrossRestart: positions continue above the last one on disk.
func TestLogAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := openAt(t, dir)
	mustAppend(t, s, message("c1", "a", "b", "1"), message("c1", "a", "b", "2"))
	before := logged(t, s, 0)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir)
	defer s.Close()
	last, err := s.LastLogPos(ctx)
	if err != nil || last != before[1].Pos {
		t.Fatalf("LastLogPos after reopen = %d, %v; want %d", last, err, before[1].Pos)
	}
	mustAppend(t, s, message("c1", "a", "b", "3"))
	after := logged(t, s, last)
	if got := logIDs(after); len(got) != 1 || got[0] != "c1/3" || after[0].Pos <= last {
		t.Fatalf("after reopen the log continues with %v at %d (last before %d)", got, after[0].Pos, last)
	}
	if got := logIDs(logged(t, s, 0)); fmt.Sprint(got) != "[c1/1 c1/2 c1/3]" {
		t.Fatalf("whole log after reopen: %v", got)
	}
}

// TestLogCorruptEntryIsSkippable: a damaged log record comes back without a
// message instead of failing every read of the log from there on.
func TestLogCorruptEntryIsSkippable(t *testing.T) {
	s := openTemp(t)
	mustAppend(t, s, message("c1", "a", "b", "1"), message("c1", "a", "b", "2"))
	es := logged(t, s, 0)
	rewrite(t, s, logKey(nil, es[0].Pos), flipByte(2))
	got := logIDs(logged(t, s, 0))
	if fmt.Sprint(got) != "[<nil> c1/2]" {
		t.Fatalf("log with a corrupt first record: %v, want [<nil> c1/2]", got)
	}
}

// TestLogPositionNotReusedAfterFailedWrite: a batch whose commit failed
// inside Pebble may have reached the WAL, so its positions are never given
// again; once the store recovers, the log holds exactly the ACKed messages,
// in order, and the next message sits above every position handed out.
func TestLogPositionNotReusedAfterFailedWrite(t *testing.T) {
	ctx := context.Background()
	fs := faultfs.New(nil, 1<<30)
	s, err := Open(t.TempDir(), Options{FS: fs, MinFreeDisk: -1, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fs.SetBudget(fs.Used() + 256<<10) // the WAL write is the first to fail

	const conv = "d:a:b"
	var acked []string
	var failErr error
	for i := 0; i < 1000; i++ {
		p := make([]byte, 8<<10)
		_, _ = rand.Read(p)
		res, err := s.Append(ctx, []*pb.Message{{ConversationId: conv, From: "a", ClientMsgId: fmt.Sprint(i), Payload: p}})
		if err != nil {
			failErr = err
			break
		}
		acked = append(acked, fmt.Sprintf("%s/%d", conv, res[0].Msg.Seq))
	}
	if !errors.Is(failErr, store.ErrNoSpace) || len(acked) == 0 {
		t.Fatalf("after %d appends: %v, want a write failing with store.ErrNoSpace", len(acked), failErr)
	}
	s.appendMu.Lock()
	handedOut := s.logPos
	s.appendMu.Unlock()

	fs.SetBudget(fs.Used() + 1<<30)
	waitUntil(t, "writes accepted again", func() (bool, string) {
		res, err := s.Append(ctx, []*pb.Message{{ConversationId: conv, From: "a", ClientMsgId: "after", Payload: []byte("x")}})
		if err != nil {
			return false, err.Error()
		}
		acked = append(acked, fmt.Sprintf("%s/%d", conv, res[0].Msg.Seq))
		return true, ""
	})
	es := logged(t, s, 0)
	if got := logIDs(es); fmt.Sprint(got) != fmt.Sprint(acked) {
		t.Fatalf("log after recovery has %d entries, want the %d ACKed messages in order", len(got), len(acked))
	}
	if p := es[len(es)-1].Pos; p <= handedOut {
		t.Fatalf("the first message after recovery got log position %d, not above %d handed to the failed write", p, handedOut)
	}
}

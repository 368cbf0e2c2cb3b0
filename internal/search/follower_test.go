package search_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/search"
	"github.com/parleyim/parley/internal/search/bleveindex"
	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/store/pebblestore"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

var quiet = slog.New(slog.DiscardHandler)

func openStore(t *testing.T, dir string) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open(dir, pebblestore.Options{Logger: quiet, MinFreeDisk: -1})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func openIndex(t *testing.T, dir string) *bleveindex.Index {
	t.Helper()
	ix, err := bleveindex.Open(dir, bleveindex.Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func startFollower(t *testing.T, st *pebblestore.Store, ix search.Index) *search.Follower {
	t.Helper()
	f, err := search.NewFollower(search.FollowerConfig{Log: st, Messages: st, Index: ix,
		BatchMessages: 7, Poll: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	return f
}

// caughtUp waits until f has indexed everything st has logged.
func caughtUp(t *testing.T, st store.Log, f *search.Follower) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	last, err := st.LastLogPos(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.WaitFor(ctx, last); err != nil {
		t.Fatalf("follower at %+v, store at %d: %v", f.Stats(), last, err)
	}
}

func text(conv, from, client, payload string) *pb.Message {
	return &pb.Message{ConversationId: conv, From: from, ClientMsgId: client, Kind: pb.MessageKind_MESSAGE_KIND_NORMAL,
		ContentType: "text", Payload: []byte(payload), ServerTime: time.Now().UnixMilli()}
}

func appendAll(t *testing.T, st store.Store, msgs ...*pb.Message) {
	t.Helper()
	if _, err := st.Append(context.Background(), msgs); err != nil {
		t.Fatal(err)
	}
}

// edit and recall apply events as the chat service does: the event and the
// target's new version in one Change.
func edit(t *testing.T, st store.Store, conv string, seq uint64, newText string) {
	t.Helper()
	ctx := context.Background()
	m, err := st.GetMessage(ctx, conv, seq)
	if err != nil {
		t.Fatal(err)
	}
	m.Payload, m.EditedAt = []byte(newText), time.Now().UnixMilli()
	ev := &pb.Message{ConversationId: conv, From: m.From, ClientMsgId: fmt.Sprintf("edit-%d-%s", seq, newText),
		Kind: pb.MessageKind_MESSAGE_KIND_EDIT, Payload: []byte(newText), Event: &pb.MessageEvent{TargetSeq: seq}}
	if _, err := st.Apply(ctx, store.Change{Event: ev, Update: m}); err != nil {
		t.Fatal(err)
	}
}

func recall(t *testing.T, st store.Store, conv string, seq uint64) {
	t.Helper()
	ctx := context.Background()
	m, err := st.GetMessage(ctx, conv, seq)
	if err != nil {
		t.Fatal(err)
	}
	m.Payload, m.ContentType, m.Recalled = nil, "", true
	ev := &pb.Message{ConversationId: conv, From: m.From, ClientMsgId: fmt.Sprintf("recall-%d", seq),
		Kind: pb.MessageKind_MESSAGE_KIND_RECALL, Event: &pb.MessageEvent{TargetSeq: seq}}
	if _, err := st.Apply(ctx, store.Change{Event: ev, Update: m}); err != nil {
		t.Fatal(err)
	}
}

func find(t *testing.T, ix search.Index, q string, convs ...string) []string {
	t.Helper()
	var rs []search.Range
	for _, c := range convs {
		rs = append(rs, search.Range{ConversationID: c, From: 1})
	}
	query := search.Query{Text: q, Ranges: rs, Limit: search.MaxLimit}
	var out []string
	for {
		r, err := ix.Search(context.Background(), query)
		if err != nil {
			t.Fatal(err)
		}
		for _, h := range r.Hits {
			out = append(out, fmt.Sprintf("%s/%d", h.ConversationID, h.Seq))
		}
		if r.Next == nil {
			slices.Sort(out)
			return out
		}
		query.Before = r.Next
	}
}

func expectFound(t *testing.T, ix search.Index, q string, convs []string, want ...string) {
	t.Helper()
	slices.Sort(want)
	if got := find(t, ix, q, convs...); !slices.Equal(got, want) {
		t.Errorf("%q: %v, want %v", q, got, want)
	}
}

// TestFollowerIndexesWhatTheStoreHolds: text messages by payload, others
// by search text only, edits replace, recalls remove, events are skipped.
func TestFollowerIndexesWhatTheStoreHolds(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, filepath.Join(dir, "store"))
	defer st.Close()
	ix := openIndex(t, filepath.Join(dir, "search"))
	defer ix.Close()
	f := startFollower(t, st, ix)
	defer f.Stop()

	card := text("g:1", "bob", "2", `{"title":"zebra card"}`)
	card.ContentType = "application/json"
	cardWithText := text("g:1", "bob", "3", `{"x":1}`)
	cardWithText.ContentType, cardWithText.SearchText = "app/card", "giraffe card"
	binary := text("g:1", "bob", "4", "\xff\xfe giraffe")
	markdown := text("g:1", "ann", "5", "**giraffe** notes")
	markdown.ContentType = "text/markdown"
	appendAll(t, st, text("g:1", "ann", "1", "the giraffe is tall"), card, cardWithText, binary, markdown)
	appendAll(t, st, text("g:1", "ann", "6", "second giraffe"), text("d:a:b", "ann", "7", "private giraffe"))
	if _, err := st.Apply(context.Background(), store.Change{
		Event: &pb.Message{ConversationId: "g:1", From: "ann", ClientMsgId: "g", Kind: pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED, Payload: []byte("giraffe")},
	}); err != nil {
		t.Fatal(err)
	}
	caughtUp(t, st, f)
	expectFound(t, ix, "giraffe", []string{"g:1"}, "g:1/1", "g:1/3", "g:1/5", "g:1/6")
	expectFound(t, ix, "zebra", []string{"g:1"})

	edit(t, st, "g:1", 1, "the elephant is tall")
	recall(t, st, "g:1", 6)
	caughtUp(t, st, f)
	expectFound(t, ix, "giraffe", []string{"g:1", "d:a:b"}, "d:a:b/1", "g:1/3", "g:1/5")
	expectFound(t, ix, "elephant", []string{"g:1"}, "g:1/1")
	expectFound(t, ix, "tall", []string{"g:1"}, "g:1/1")
	if s := f.Stats(); s.Lag() != 0 || s.Errors != 0 || s.Applied == 0 {
		t.Fatalf("stats %+v: want no lag, no errors", s)
	}
}

// copyDir copies a closed index directory: the state a crash at this point
// would leave.
func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.CopyFS(to, os.DirFS(from)); err != nil {
		t.Fatal(err)
	}
}

// TestFollowerCatchesUpAfterCrash: the index comes back older than the
// store (it lost its newest batches, as after a crash); the follower goes
// on from the index's own position, and every message is found once, with
// the edits and recalls made meanwhile applied.
func TestFollowerCatchesUpAfterCrash(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, filepath.Join(dir, "store"))
	defer st.Close()
	live, saved := filepath.Join(dir, "search"), filepath.Join(dir, "search-at-crash")

	ix := openIndex(t, live)
	f := startFollower(t, st, ix)
	for i := range 30 {
		appendAll(t, st, text("g:1", "ann", fmt.Sprint(i), fmt.Sprintf("word%d common", i)))
	}
	caughtUp(t, st, f)
	f.Stop()
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	copyDir(t, live, saved)

	ix = openIndex(t, live)
	f = startFollower(t, st, ix)
	for i := 30; i < 60; i++ {
		appendAll(t, st, text("g:1", "ann", fmt.Sprint(i), fmt.Sprintf("word%d common", i)))
	}
	edit(t, st, "g:1", 3, "changed common")
	recall(t, st, "g:1", 40)
	caughtUp(t, st, f)
	f.Stop()
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}

	// The crash: the index is the one saved at message 30.
	if err := os.RemoveAll(live); err != nil {
		t.Fatal(err)
	}
	ix = openIndex(t, saved)
	defer ix.Close()
	if pos, _ := ix.Position(context.Background()); pos != 30 {
		t.Fatalf("saved index at position %d, want 30", pos)
	}
	f = startFollower(t, st, ix)
	defer f.Stop()
	caughtUp(t, st, f)

	var want []string
	for seq := 1; seq <= 60; seq++ {
		if seq != 40 {
			want = append(want, fmt.Sprintf("g:1/%d", seq))
		}
	}
	expectFound(t, ix, "common", []string{"g:1"}, want...)
	expectFound(t, ix, "word2", []string{"g:1"}) // edited away
	expectFound(t, ix, "changed", []string{"g:1"}, "g:1/3")
	expectFound(t, ix, "word39", []string{"g:1"})
}

// flakyIndex fails Apply while failing is set.
type flakyIndex struct {
	search.Index
	failing atomic.Bool
}

func (x *flakyIndex) Apply(ctx context.Context, cs []search.Change, pos uint64) error {
	if x.failing.Load() {
		return errors.New("disk on fire")
	}
	return x.Index.Apply(ctx, cs, pos)
}

// flakyLog fails LogAfter while failing is set.
type flakyLog struct {
	store.Log
	failing atomic.Bool
}

func (l *flakyLog) LogAfter(ctx context.Context, after uint64, limit, maxBytes int) ([]store.LogEntry, error) {
	if l.failing.Load() {
		return nil, errors.New("store unavailable")
	}
	return l.Log.LogAfter(ctx, after, limit, maxBytes)
}

// TestFollowerRecoversByItself: while the index or the store fails, the
// follower counts errors and retries; once they work, it catches up.
func TestFollowerRecoversByItself(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, filepath.Join(dir, "store"))
	defer st.Close()
	ix := &flakyIndex{Index: openIndex(t, filepath.Join(dir, "search"))}
	defer ix.Close()
	lg := &flakyLog{Log: st}
	f, err := search.NewFollower(search.FollowerConfig{Log: lg, Messages: st, Index: ix,
		Poll: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	defer f.Stop()

	for i, fail := range []*atomic.Bool{&ix.failing, &lg.failing} {
		fail.Store(true)
		before := f.Stats().Errors
		appendAll(t, st, text("g:1", "ann", fmt.Sprint(i), "resilient words"))
		deadline := time.Now().Add(5 * time.Second)
		for f.Stats().Errors < before+2 {
			if time.Now().After(deadline) {
				t.Fatalf("no retries counted: %+v", f.Stats())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if s := f.Stats(); s.Lag() == 0 || s.LastError == "" {
			t.Fatalf("while failing: %+v, want lag and the error", s)
		}
		fail.Store(false)
		caughtUp(t, st, f)
		// The follower clears its error once the step that caught up has
		// returned, a moment after its position moved.
		for deadline := time.Now().Add(5 * time.Second); f.Stats().LastError != ""; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("after recovery: %+v", f.Stats())
			}
		}
	}
	expectFound(t, ix, "resilient", []string{"g:1"}, "g:1/1", "g:1/2")
}

// TestFollowerIndexAheadOfStore: an index whose position is beyond the
// store's (a store restored from an older backup) still gets the store's
// new messages.
func TestFollowerIndexAheadOfStore(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, filepath.Join(dir, "store"))
	defer st.Close()
	ix := openIndex(t, filepath.Join(dir, "search"))
	defer ix.Close()
	if err := ix.Apply(context.Background(), nil, 1000); err != nil {
		t.Fatal(err)
	}
	appendAll(t, st, text("g:1", "ann", "1", "fresh message"))
	f := startFollower(t, st, ix)
	defer f.Stop()
	caughtUp(t, st, f) // it has started: at the store's position
	appendAll(t, st, text("g:1", "ann", "2", "fresher message"))
	caughtUp(t, st, f)
	expectFound(t, ix, "fresher", []string{"g:1"}, "g:1/2")
}

// TestFollowerStopWithoutStart returns at once.
func TestFollowerStopWithoutStart(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, filepath.Join(dir, "store"))
	defer st.Close()
	ix := openIndex(t, filepath.Join(dir, "search"))
	defer ix.Close()
	f, err := search.NewFollower(search.FollowerConfig{Log: st, Messages: st, Index: ix, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { f.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Stop of a follower never started hangs")
	}
}

// TestFollowerSharesWithSendsAndCatchesUp: while messages keep coming and
// the index is behind, the follower rests between batches (leaving the
// cores to sends); once they stop it indexes everything. At its lag bound
// it gets no rest: it never lets itself fall further behind.
func TestFollowerSharesWithSendsAndCatchesUp(t *testing.T) {
	for _, c := range []struct {
		name   string
		maxLag uint64
		rests  bool
	}{{"within bound", 1 << 30, true}, {"at bound", 1, false}} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			st := openStore(t, filepath.Join(dir, "store"))
			defer st.Close()
			ix := openIndex(t, filepath.Join(dir, "search"))
			defer ix.Close()
			f, err := search.NewFollower(search.FollowerConfig{Log: st, Messages: st, Index: ix,
				BatchMessages: 20, Poll: 5 * time.Millisecond, MaxLag: c.maxLag, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			f.Start()
			defer f.Stop()
			// Appends of 100 keep the follower (20 a step) behind while they
			// come; send until it has rested (within its bound: at most 200
			// appends), or 5 appends (at its bound: each one a chance to
			// rest, and few enough for the follower to catch up fast on a
			// busy machine).
			n := 0
			for b := 0; (c.rests && b < 200 && f.Stats().Rested == 0) || (!c.rests && b < 5); b++ {
				var msgs []*pb.Message
				for range 100 {
					msgs = append(msgs, text("g:y", "u1", fmt.Sprintf("c%d", n), fmt.Sprintf("plum %d", n)))
					n++
				}
				appendAll(t, st, msgs...)
			}
			caughtUp(t, st, f)
			if rested := f.Stats().Rested > 0; rested != c.rests {
				t.Fatalf("rested %v after %d messages, want %v", f.Stats().Rested, n, c.rests)
			}
			if got := len(find(t, ix, "plum", "g:y")); got != n {
				t.Fatalf("%d of %d messages found", got, n)
			}
		})
	}
}

// TestFollowerCatchesUpAfterCrashWhileSending: a follower restarted on an
// index saved before a crash, while messages keep coming and with a share
// so small that it rests nearly all the time, still reaches the store (its
// lag bound makes it index), and the index then holds exactly the store's
// messages.
func TestFollowerCatchesUpAfterCrashWhileSending(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, filepath.Join(dir, "store"))
	defer st.Close()
	live, saved := filepath.Join(dir, "search"), filepath.Join(dir, "search-at-crash")
	cfg := search.FollowerConfig{Log: st, Messages: st, BatchMessages: 20, Poll: 5 * time.Millisecond,
		Share: 0.001, MaxLag: 150, Logger: quiet}

	ix := openIndex(t, live)
	cfg.Index = ix
	f, err := search.NewFollower(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	n := 0
	send := func(k int) {
		var msgs []*pb.Message
		for range k {
			msgs = append(msgs, text("g:z", "u1", fmt.Sprintf("c%d", n), fmt.Sprintf("quince %d", n)))
			n++
		}
		appendAll(t, st, msgs...)
	}
	send(100)
	caughtUp(t, st, f)
	f.Stop()
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	copyDir(t, live, saved)
	// Messages the saved index never saw: the crash loses them from it.
	send(500)

	ix = openIndex(t, saved)
	defer ix.Close()
	cfg.Index = ix
	f, err = search.NewFollower(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.Start()
	defer f.Stop()
	// Keep sending, 10 messages each time the follower moves (fewer than
	// a batch: it gains on the sends however slow the machine), until it
	// has passed everything sent before the restart (600 messages): with
	// such a share only its lag bound moves it on while sends go on.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for b := 0; b < 500 && f.Stats().Position < 600; b++ {
		pos := f.Stats().Position
		send(10)
		if err := f.WaitFor(ctx, pos+1); err != nil {
			t.Fatalf("follower at %+v: %v", f.Stats(), err)
		}
	}
	if pos := f.Stats().Position; pos < 600 {
		t.Fatalf("follower at %d after %d messages, still behind the restart's 600", pos, n)
	}
	caughtUp(t, st, f)
	if got := len(find(t, ix, "quince", "g:z")); got != n {
		t.Fatalf("%d of %d messages found", got, n)
	}
}

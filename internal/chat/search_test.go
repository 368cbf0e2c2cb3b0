package chat

import (
	"context"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/search"
	"github.com/parleyim/parley/internal/search/bleveindex"
	"github.com/parleyim/parley/internal/session"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// gatedIndex is a real index whose searches wait for the test to let them go.
type gatedIndex struct {
	search.Index
	gate chan struct{}
}

func (g gatedIndex) Search(ctx context.Context, q search.Query) (search.Result, error) {
	select {
	case <-g.gate:
	case <-ctx.Done():
		return search.Result{}, ctx.Err()
	}
	return g.Index.Search(ctx, q)
}

// frames collects what a handler answers.
type frames chan *pb.ServerFrame

func (f frames) SendFrame(fr *pb.ServerFrame) bool { f <- fr; return true }

// A search does not hold the socket worker that handed it over while the
// index works (that worker serves other connections' frames), and the
// node's search slots bound how many run: past them, searches wait in a
// bounded queue for a bounded time, then TOO_MANY_REQUESTS.
func TestSearchRunsOffTheWorker(t *testing.T) {
	ix, err := bleveindex.Open(t.TempDir(), bleveindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	gated := gatedIndex{Index: ix, gate: make(chan struct{})}
	h := newHarness(t, Config{Search: gated})
	sess := &session.Session{ID: "s1", UserID: "alice"}
	out := make(frames, 2*searchSlotCount)
	ctx := context.Background()
	for i := range searchSlotCount {
		done := make(chan error, 1)
		go func() {
			done <- h.svc.searchMessages(ctx, out, sess, uint64(i+1), &pb.Search{Query: "lantern"})
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("search %d: %v", i, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("search %d held its caller while the index worked", i)
		}
	}
	// Past the slots, searches wait in a bounded queue: past it, refused
	// at once; a search whose wait ends (here at once) is refused too.
	h.svc.searchWait = time.Nanosecond
	for i := range searchQueueMax {
		if err := h.svc.searchMessages(ctx, out, sess, uint64(1000+i), &pb.Search{Query: "lantern"}); err != nil {
			t.Fatalf("queued search %d: %v", i, err)
		}
	}
	h.svc.searchWait = time.Hour // a search's wait is set when it is admitted
	waitedOut := 0
	for range searchQueueMax {
		select {
		case f := <-out:
			if f.GetError().GetCode() != pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS || f.Id < 1000 {
				t.Fatalf("a queued search whose wait ended: %v, want TOO_MANY_REQUESTS", f)
			}
			waitedOut++
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d queued searches answered", waitedOut, searchQueueMax)
		}
	}
	// The queue is empty again; now a full queue refuses at once.
	for i := range searchQueueMax {
		if err := h.svc.searchMessages(ctx, out, sess, uint64(2000+i), &pb.Search{Query: "lantern"}); err != nil {
			t.Fatalf("queued search %d: %v", i, err)
		}
	}
	if err := h.svc.searchMessages(ctx, out, sess, 99, &pb.Search{Query: "lantern"}); err != errTooMany {
		t.Fatalf("a search past the node's slots and its queue: %v, want TOO_MANY_REQUESTS", err)
	}
	close(gated.gate)
	// The running searches answer, then the queued ones, in their turn.
	for range searchSlotCount + searchQueueMax {
		select {
		case f := <-out:
			if f.GetSearchResults() == nil {
				t.Fatalf("answer %v", f)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a search never answered")
		}
	}
	// The slots are free again.
	if err := h.svc.searchMessages(ctx, out, sess, 100, &pb.Search{Query: "lantern"}); err != nil {
		t.Fatal(err)
	}
	if f := <-out; f.GetSearchResults() == nil || f.Id != 100 {
		t.Fatalf("answer %v", f)
	}
	// Two queues' worth waited; one queue's worth waited out, and one
	// search found the queue full.
	if st := h.svc.Stats(); st.SearchesQueued != 2*searchQueueMax || st.SearchesRefused != searchQueueMax+1 {
		t.Fatalf("SearchesQueued %d, SearchesRefused %d; want %d, %d", st.SearchesQueued, st.SearchesRefused, 2*searchQueueMax, searchQueueMax+1)
	}
}

package retention_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/retention"
	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/store/pebblestore"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// send stores one message of conv sent at t (and expiring at exp, 0: never).
func send(t *testing.T, s store.Store, conv string, at time.Time, exp int64) uint64 {
	t.Helper()
	r, err := s.Append(context.Background(), []*pb.Message{{ConversationId: conv, From: "a", To: "b",
		ClientMsgId: fmt.Sprint(conv, at.UnixNano(), exp), ContentType: "text", Payload: []byte("x"),
		ServerTime: at.UnixMilli(), ExpiresAt: exp, Kind: pb.MessageKind_MESSAGE_KIND_NORMAL}})
	if err != nil {
		t.Fatal(err)
	}
	return r[0].Msg.Seq
}

// A days policy finds the first message sent within the window (a binary
// search over seqs, gaps included), a messages policy keeps the newest N, a
// conversation's own policy replaces the default, and disappearing messages
// go at their expiry whatever the policies say.
func TestSweepPolicies(t *testing.T) {
	ctx := context.Background()
	s := openStore(t)
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for d := 10; d >= 1; d-- { // c1: one message a day, 10 days ago to yesterday
		send(t, s, "c1", now.Add(-time.Duration(d)*24*time.Hour-time.Hour), 0)
	}
	if err := s.RaiseSeq(ctx, "c1", 20); err != nil { // a gap of seqs without messages
		t.Fatal(err)
	}
	send(t, s, "c1", now.Add(-time.Hour), 0) // seq 21
	for i := range 6 {
		send(t, s, "c2", now.Add(-time.Duration(6-i)*time.Minute), 0)
	}
	d1 := send(t, s, "c3", now.Add(-time.Minute), now.Add(-time.Second).UnixMilli())
	d2 := send(t, s, "c3", now.Add(-time.Minute), now.Add(time.Hour).UnixMilli())
	var forgot []store.MessageRef
	rs := retention.New(retention.Config{Default: retention.Policy{Days: 3}, Batch: 2, Now: func() time.Time { return now },
		Forget: func(_ context.Context, refs []store.MessageRef) error { forgot = append(forgot, refs...); return nil }}, s)
	if err := rs.SetPolicy(ctx, "c2", &retention.Policy{Messages: 2}); err != nil {
		t.Fatal(err)
	}
	st, err := rs.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// c1: 3 days keeps the messages sent 2 and 1 days (and an hour) ago
	// (seqs 9, 10) and 21; the one sent 3 days and an hour ago goes.
	if f, _ := rs.Floor(ctx, "c1"); f != 9 {
		t.Fatalf("c1 floor %d, want 9", f)
	}
	if f, _ := rs.Floor(ctx, "c2"); f != 5 {
		t.Fatalf("c2 floor %d, want 5 (own policy: the newest 2)", f)
	}
	if f, _ := rs.Floor(ctx, "c3"); f != 0 {
		t.Fatalf("c3 floor %d: nothing of it is 3 days old", f)
	}
	if st.Expired != 8+4 || st.Disappeared != 1 || st.Conversations != 2 {
		t.Fatalf("sweep stats %+v", st)
	}
	if len(forgot) != 13 {
		t.Fatalf("the index was told of %d messages, want 13", len(forgot))
	}
	if _, err := s.GetMessage(ctx, "c3", d1); err != store.ErrNotFound {
		t.Fatalf("the expired disappearing message: %v", err)
	}
	if _, err := s.GetMessage(ctx, "c3", d2); err != nil {
		t.Fatalf("the one not yet expired: %v", err)
	}
	// A second sweep at the same time finds nothing to do.
	if st, err := rs.Sweep(ctx); err != nil || st != (retention.SweepStats{}) {
		t.Fatalf("second sweep: %+v, %v", st, err)
	}
	// Removing c2's policy brings the default back (3 days: all of c2 is recent).
	if err := rs.SetPolicy(ctx, "c2", nil); err != nil {
		t.Fatal(err)
	}
	if _, own, _ := rs.Policy(ctx, "c2"); own {
		t.Fatal("c2 still has a policy of its own")
	}
}

func TestDisappearingTimers(t *testing.T) {
	for _, sec := range []uint32{0, 30, 300, 3600, 86400, 604800, 2419200} {
		if !retention.DisappearingAllowed(sec) {
			t.Errorf("%d refused", sec)
		}
	}
	for _, sec := range []uint32{1, 29, 45, 600, 2419201} {
		if retention.DisappearingAllowed(sec) {
			t.Errorf("%d allowed", sec)
		}
	}
	s := openStore(t)
	rs := retention.New(retention.Config{}, s)
	ctx := context.Background()
	if got, err := rs.ExpiresAt(ctx, "c", 1000); err != nil || got != 0 {
		t.Fatalf("no timer: expiry %d", got)
	}
	if err := rs.SetDisappearing(ctx, "c", 30); err != nil {
		t.Fatal(err)
	}
	if got, err := rs.ExpiresAt(ctx, "c", 1000); err != nil || got != 31_000 {
		t.Fatalf("30 s timer: expiry %d", got)
	}
	// Another node (a second Service on the same store) reads it too.
	if sec, err := retention.New(retention.Config{}, s).Disappearing(ctx, "c"); err != nil || sec != 30 {
		t.Fatalf("read by another node: %d, %v", sec, err)
	}
}

// A sweep that stopped half-way (a crash after its first batch) is finished
// by the next one, though the conversation's floor has not moved since:
// nothing below the floor stays on disk.
func TestSweepFinishesAnInterruptedOne(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	open := func() store.Store {
		s, err := pebblestore.Open(dir, pebblestore.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	now := time.Now()
	for i := range 10 {
		send(t, s, "c", now.Add(time.Duration(i-10)*time.Minute), 0)
	}
	// The first batch of a sweep to floor 9 (the newest 2 kept), then the
	// process stops.
	if removed, more, err := s.ExpireBefore(ctx, "c", 9, 3); err != nil || !more || len(removed) != 3 {
		t.Fatalf("first batch: %v, %v, %v", removed, more, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	var forgot []store.MessageRef
	rs := retention.New(retention.Config{Default: retention.Policy{Messages: 2}, Batch: 2, Now: func() time.Time { return now },
		Forget: func(_ context.Context, refs []store.MessageRef) error { forgot = append(forgot, refs...); return nil }}, s)
	if _, err := rs.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	left, err := s.Messages(ctx, "c", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left[0].Seq != 9 {
		var seqs []uint64
		for _, m := range left {
			seqs = append(seqs, m.Seq)
		}
		t.Fatalf("stored after the next sweep: seqs %v, want [9 10]", seqs)
	}
	if len(forgot) != 5 {
		t.Fatalf("the index was told of %d messages, want the 5 the first batch left", len(forgot))
	}
	if unfinished, err := s.ExpiryUnfinished(ctx, "c"); err != nil || unfinished {
		t.Fatalf("ExpiryUnfinished after the sweep: %v, %v", unfinished, err)
	}
}

package pebblestore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"testing"

	"github.com/parleyim/parley/internal/faultfs"
	"github.com/parleyim/parley/internal/store"
)

// TestAuditIDNotReusedAfterFailedWrite: an audit entry whose write failed
// inside Pebble (a raw ENOSPC in the WAL) may or may not have landed, so its
// id is never given again: after the store recovers, ids continue above it.
func TestAuditIDNotReusedAfterFailedWrite(t *testing.T) {
	ctx := context.Background()
	fs := faultfs.New(nil, 1<<30)
	s, err := Open(t.TempDir(), Options{FS: fs, MinFreeDisk: -1, Logger: quietLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	fs.SetBudget(fs.Used() + 256<<10) // the WAL write is the first to fail

	var acked []uint64
	var failErr error
	for i := 0; i < 1000 && failErr == nil; i++ {
		detail := make([]byte, 8<<10)
		_, _ = rand.Read(detail)
		id, err := s.AppendAudit(ctx, store.AuditEntry{Actor: "ops", Action: "x", Detail: string(detail)})
		if err != nil {
			failErr = err
			break
		}
		acked = append(acked, id)
	}
	if !errors.Is(failErr, store.ErrNoSpace) || fs.Failures() == 0 || len(acked) == 0 {
		t.Fatalf("after %d entries: %v (ENOSPC %d), want a write failing with store.ErrNoSpace", len(acked), failErr, fs.Failures())
	}
	last := acked[len(acked)-1]
	waitUntil(t, "the store read-only", func() (bool, string) {
		m := s.mode.Load()
		return m == modeReadOnly, fmt.Sprint("mode ", m)
	})
	if es, err := s.AuditLog(ctx, 0, 1); err != nil || len(es) != 1 || es[0].ID != last {
		t.Fatalf("AuditLog read-only: %d entries, %v; want the last ACKed entry %d", len(es), err, last)
	}

	fs.SetBudget(fs.Used() + 1<<30)
	var next uint64
	waitUntil(t, "writes accepted again", func() (bool, string) {
		next, err = s.AppendAudit(ctx, store.AuditEntry{Actor: "ops", Action: "after"})
		if err != nil {
			return false, err.Error()
		}
		return true, ""
	})
	if next <= last+1 {
		t.Fatalf("AppendAudit after recovery gave %d: the failed write's id %d again (last ACKed %d)", next, last+1, last)
	}
	es, err := s.AuditLog(ctx, 0, 2)
	if err != nil || len(es) != 2 || es[0].ID != next || es[1].ID != last {
		t.Fatalf("AuditLog after recovery: %d entries, %v; want %d then %d", len(es), err, next, last)
	}
}

package pebblestore

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// TestCheckpoint: a checkpoint taken while appends go on opens as a store
// holding every message appended before it was asked for, with the same
// seqs; the live store's WAL record still describes its own WALs exactly
// (the checkpoint's copies of them are not mistaken for them).
func TestCheckpoint(t *testing.T) {
	ctx := context.Background()
	for _, noSync := range []bool{false, true} {
		t.Run(fmt.Sprintf("nosync=%v", noSync), func(t *testing.T) {
			dir := t.TempDir()
			s, err := Open(filepath.Join(dir, "store"), Options{Logger: quiet, NoSync: noSync})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 200 {
				mustAppend(t, s, message("c1", "a", "b", fmt.Sprint(i)))
			}
			var wg sync.WaitGroup
			stop := make(chan struct{})
			wg.Add(1)
			go func() { // appends during the checkpoint
				defer wg.Done()
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := s.Append(ctx, []*pb.Message{message("c2", "a", "b", fmt.Sprint(i))}); err != nil {
						t.Error(err)
						return
					}
				}
			}()
			cp := filepath.Join(dir, "cp")
			if err := s.Checkpoint(ctx, cp); err != nil {
				t.Fatal(err)
			}
			close(stop)
			wg.Wait()
			if err := s.Checkpoint(ctx, cp); err == nil {
				t.Fatal("a checkpoint into an existing directory succeeded")
			}
			mustAppend(t, s, message("c1", "a", "b", "after"))
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			// After a clean close the record is exact: each WAL it lists
			// has the size it says was synced.
			b, err := os.ReadFile(filepath.Join(dir, "store", walRecordFile))
			if err != nil {
				t.Fatal(err)
			}
			var rec walRecord
			if err := json.Unmarshal(b, &rec); err != nil {
				t.Fatal(err)
			}
			for _, w := range rec.WALs {
				fi, err := os.Stat(filepath.Join(dir, "store", w.Name))
				if err != nil || (!noSync && fi.Size() != w.Synced) {
					t.Fatalf("WAL record %+v; the file: %v, %v", w, fi.Size(), err)
				}
			}
			if _, err := os.Stat(filepath.Join(cp, walRecordFile)); err == nil {
				t.Fatal("the checkpoint holds the live store's WAL record")
			}

			c := openAt(t, cp)
			defer c.Close()
			last, err := c.LastSeq(ctx, "c1")
			if err != nil || last != 200 {
				t.Fatalf("checkpoint: last seq of c1 = %d, %v; want 200 (the appends before it, not the one after)", last, err)
			}
			page, err := c.Messages(ctx, "c1", 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range page {
				if m.Seq != uint64(i+1) || m.ClientMsgId != fmt.Sprint(i) {
					t.Fatalf("checkpoint: message %d is seq %d %q", i, m.Seq, m.ClientMsgId)
				}
			}
		})
	}
}

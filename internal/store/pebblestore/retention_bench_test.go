package pebblestore

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// TestSeedRetentionBench seeds a store for docs/bench/run-retention.sh:
// PARLEY_SEED_N messages (200-byte payloads) in conversation
// g:retention-seed of the store at PARLEY_SEED_DIR. With
// PARLEY_SEED_SWEEP=1 it then expires all but the newest and reports the
// time the sweep took (the store-level figure). Skipped without
// PARLEY_SEED_DIR.
func TestSeedRetentionBench(t *testing.T) {
	dir := os.Getenv("PARLEY_SEED_DIR")
	if dir == "" {
		t.Skip("PARLEY_SEED_DIR is unset: seeds a store for docs/bench/run-retention.sh")
	}
	n, _ := strconv.Atoi(os.Getenv("PARLEY_SEED_N"))
	ctx := context.Background()
	s := openAt(t, dir)
	defer s.Close()
	const conv = "g:retention-seed"
	start := time.Now()
	for i := 0; i < n; i += 1000 {
		msgs := make([]*pb.Message, 0, 1000)
		for j := i; j < min(i+1000, n); j++ {
			p := make([]byte, 200)
			rand.Read(p)
			msgs = append(msgs, &pb.Message{ConversationId: conv, From: "seed", ClientMsgId: fmt.Sprint("s", j),
				ContentType: "bin", Payload: p, ServerTime: time.Now().UnixMilli(), Kind: pb.MessageKind_MESSAGE_KIND_NORMAL})
		}
		if _, err := s.Append(ctx, msgs); err != nil {
			t.Fatal(err)
		}
	}
	size, _ := s.DiskSize(ctx)
	fmt.Printf("seeded %d messages in %s; store %d MB\n", n, time.Since(start).Round(time.Millisecond), size>>20)
	if os.Getenv("PARLEY_SEED_SWEEP") != "1" {
		return
	}
	start = time.Now()
	last, _ := s.LastSeq(ctx, conv)
	removed := 0
	for {
		r, more, err := s.ExpireBefore(ctx, conv, last, 1000)
		if err != nil {
			t.Fatal(err)
		}
		removed += len(r)
		if !more {
			break
		}
	}
	deleted := time.Since(start)
	if err := s.ReclaimSpace(ctx, conv, last); err != nil {
		t.Fatal(err)
	}
	_ = s.db.Flush()
	after, _ := s.DiskSize(ctx)
	fmt.Printf("swept %d messages: deletes %s, with compaction %s; store %d MB -> %d MB\n",
		removed, deleted.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), size>>20, after>>20)
}

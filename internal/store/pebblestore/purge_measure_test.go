package pebblestore

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// TestMeasurePurge measures what an account deletion costs the embedded
// store (docs/accounts.md): erasing one user's messages, then the flush and
// full compaction. A figure, not a check: it runs only with
// PARLEY_MEASURE_PURGE set.
func TestMeasurePurge(t *testing.T) {
	if os.Getenv("PARLEY_MEASURE_PURGE") == "" {
		t.Skip("PARLEY_MEASURE_PURGE is unset: a measurement, not a test")
	}
	s, err := Open(t.TempDir(), Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	payload := make([]byte, 200)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	const convs, per = 1000, 200
	for c := 0; c < convs; c++ {
		var batch []*pb.Message
		for i := 0; i < per; i++ {
			batch = append(batch, &pb.Message{ConversationId: fmt.Sprintf("d:u%d:v%d", c, c), From: fmt.Sprintf("u%d", c), To: fmt.Sprintf("v%d", c),
				ClientMsgId: fmt.Sprint(i), ContentType: "text", Payload: payload, MessageId: uint64(c*per + i + 1), Kind: pb.MessageKind_MESSAGE_KIND_NORMAL})
		}
		if _, err := s.Append(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	size, _ := s.DiskSize(ctx)
	t0 := time.Now()
	for after := uint64(0); ; {
		next, _, err := s.EraseMessages(ctx, "d:u7:v7", "u7", after, 256)
		if err != nil {
			t.Fatal(err)
		}
		if next == 0 {
			break
		}
		after = next
	}
	erase := time.Since(t0)
	t1 := time.Now()
	if err := s.PurgeDeleted(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("messages %d, store %d MiB; erase 200 messages %v; PurgeDeleted (flush + full compaction) %v", convs*per, size>>20, erase, time.Since(t1))
}

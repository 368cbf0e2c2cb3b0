package pgstore

import (
	"context"
	"crypto/rand"
	"fmt"
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// TestPGRetentionSpaceReused: ~30 MB of messages written, then a few newer
// ones; the older ones expired and vacuumed (ReclaimSpace): the tables
// (pg_total_relation_size, DiskSize) do not shrink — the live rows sit at
// their end, and plain VACUUM returns only empty pages at the end of a
// table — but writing as much again grows them by far less than the write,
// because VACUUM made the deleted rows' space reusable (docs/retention.md).
func TestPGRetentionSpaceReused(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	const n, size = 20000, 1500 // below the TOAST threshold: rows stay in the table
	write := func(round, n int) {
		for i := 0; i < n; i += 500 {
			var msgs []*pb.Message
			for j := i; j < i+500; j++ {
				p := make([]byte, size)
				rand.Read(p)
				msgs = append(msgs, &pb.Message{ConversationId: "c", From: "a", To: "b", ClientMsgId: fmt.Sprint(round, "-", j),
					ContentType: "bin", Payload: p, ServerTime: 1, Kind: pb.MessageKind_MESSAGE_KIND_NORMAL})
			}
			if _, err := s.Append(ctx, msgs); err != nil {
				t.Fatal(err)
			}
		}
	}
	disk := func() int64 {
		v, err := s.DiskSize(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	base := disk()
	write(1, n)
	expire, _ := s.LastSeq(ctx, "c")
	write(3, 500) // kept
	full := disk()
	for {
		_, more, err := s.ExpireBefore(ctx, "c", expire+1, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
	}
	if err := s.ReclaimSpace(ctx, "", 0); err != nil {
		t.Fatal(err)
	}
	vacuumed := disk()
	write(2, n)
	again := disk()
	t.Logf("tables: %d MB empty, %d MB after writing %d MB, %d MB after expiring and VACUUM, %d MB after writing as much again",
		base>>20, full>>20, n*size>>20, vacuumed>>20, again>>20)
	grown := full - base
	if grown < n*size*9/10 {
		t.Fatalf("the first write grew the tables by %d MB only: nothing measured", grown>>20)
	}
	if vacuumed < full*3/4 {
		t.Logf("VACUUM returned space to the OS (%d MB → %d MB)", full>>20, vacuumed>>20)
	}
	if again-vacuumed > grown/4 {
		t.Fatalf("the second write grew the tables by %d MB (the first by %d MB): the space was not reused", (again-vacuumed)>>20, grown>>20)
	}
}

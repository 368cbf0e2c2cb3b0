package migrate_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/store/pebblestore"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// TestSeedForBenchmark writes a data directory for docs/bench/run-migrate.sh:
// PARLEY_MIGRATE_SEED=DIR, PARLEY_MIGRATE_MESSAGES (default 1,000,000) over
// PARLEY_MIGRATE_CONVERSATIONS 1:1 conversations (default 10,000), each
// message ~100 bytes of text with a client id; a user per 2 conversations
// with a read cursor. It is not a test: without the variable it skips.
func TestSeedForBenchmark(t *testing.T) {
	dir := os.Getenv("PARLEY_MIGRATE_SEED")
	if dir == "" {
		t.Skip("PARLEY_MIGRATE_SEED is unset: seeding for docs/bench/run-migrate.sh only")
	}
	num := func(name string, def int) int {
		if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
			return v
		}
		return def
	}
	msgs, convs := num("PARLEY_MIGRATE_MESSAGES", 1_000_000), num("PARLEY_MIGRATE_CONVERSATIONS", 10_000)
	s, err := pebblestore.Open(filepath.Join(dir, "store"), pebblestore.Options{Logger: quiet, NoSync: true, MinFreeDisk: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	start := time.Now()
	user := func(i int) string { return fmt.Sprintf("user%05d", i) }
	for i := range convs + 1 {
		if err := s.CreateUser(ctx, store.User{ID: user(i), NameKey: user(i), PasswordHash: "x", CreatedAt: start}); err != nil {
			t.Fatal(err)
		}
	}
	const batch = 1000
	var ms []*pb.Message
	var cursors []store.Cursor
	for i := range msgs {
		c := i % convs
		a, b := user(c), user(c+1)
		ms = append(ms, &pb.Message{ConversationId: "p:" + a + ":" + b, From: a, To: b, ClientMsgId: fmt.Sprint("m", i),
			ContentType: "text/plain", Kind: pb.MessageKind_MESSAGE_KIND_NORMAL, ServerTime: start.UnixMilli(),
			Payload: fmt.Appendf(nil, "message %d of the migration benchmark, about a hundred bytes of ordinary chat text.", i)})
		if len(ms) == batch || i == msgs-1 {
			if _, err := s.Append(ctx, ms); err != nil {
				t.Fatal(err)
			}
			ms = ms[:0]
		}
	}
	for c := range convs {
		cursors = append(cursors, store.Cursor{ConversationID: "p:" + user(c) + ":" + user(c+1), UserID: user(c + 1), Delivered: 1, Read: 1})
	}
	if err := s.SetCursors(ctx, cursors); err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded %d messages over %d conversations in %s", msgs, convs, time.Since(start).Round(time.Millisecond))
}

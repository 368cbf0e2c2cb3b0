package server_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// BRIEF case 5 through a whole server: fifty members of a group stop
// reading while the group is flooded. Each is closed as slow once its queue
// reaches send_queue_bytes, the server's heap stays within the caps, and a
// member who reads gets every message while the others are cut off.
func TestSlowReadersBoundedMemory(t *testing.T) {
	// Not parallel: it samples the process heap, which a test running
	// beside it would add to.
	const (
		slow     = 50
		queueCap = 256 << 10
		msgs     = 600
		msgSize  = 16 << 10
	)
	ts := startServer(t, func(c *server.Config) {
		c.SendQueueBytes = queueCap
		c.WriteTimeout = 30 * time.Second // closed by the queue cap, not the write timeout
	})
	ctx := ctx10(t)
	members := []string{"reader"}
	for i := range slow {
		members = append(members, fmt.Sprint("slow", i))
	}
	g, err := adminClient(ts).CreateGroup(ctx, groupSpec("sender", members...))
	if err != nil {
		t.Fatal(err)
	}
	sender := ts.dialOnly(t, "sender", "s1", "phone")
	_, rec := ts.connect(t, "reader", "r1", "phone", transports[2])
	for i := range slow {
		rc := dialRawTCP(t, ts.tcpAddr)
		rc.nc.(interface{ SetReadBuffer(int) error }).SetReadBuffer(4096)
		if f := rc.auth(ts.mint(t, fmt.Sprint("slow", i)), "d", "phone"); f.GetAuthOk() == nil {
			t.Fatalf("slow reader %d: %v", i, f)
		}
		// ...and never reads again.
	}

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	var peak uint64
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() { // the heap while the flood runs
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			mu.Lock()
			peak = max(peak, ms.HeapAlloc)
			mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	payload := make([]byte, msgSize)
	sctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range msgs {
		rand.Read(payload)
		if _, err := sender.SendToConversation(sctx, g.ConversationId, "bin", payload); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	eventually(t, "every slow reader is closed as slow", func() bool {
		return ts.Stats().Gateway.Closed[pb.DisconnectCode_DISCONNECT_CODE_SLOW] == slow
	})
	deadline := time.Now().Add(10 * time.Second)
	for rec.count() < msgs && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	closed, closedErr := rec.isClosed()
	if closed {
		t.Fatalf("the reading member was closed: %v (after %d messages)", closedErr, rec.count())
	}
	close(stop)
	<-sampled

	if got := rec.count(); got != msgs { // it connected after the group's creation
		t.Fatalf("the reading member got %d messages, want %d", got, msgs)
	}
	// Queued frames share one encoding per message, so the caps bound the
	// queues' memory: slow × send_queue_bytes at worst, plus the rest of
	// the server. Unbounded queues would hold what the kernel did not take
	// of 9.6 MB per reader: hundreds of MiB.
	growth := int64(peak) - int64(before.HeapAlloc)
	bound := int64(slow*queueCap) + 64<<20
	t.Logf("heap %d MiB before, peak %d MiB during the flood (bound %d MiB)", before.HeapAlloc>>20, peak>>20, (int64(before.HeapAlloc)+bound)>>20)
	if growth > bound {
		t.Fatalf("heap grew %d MiB during the flood, bound %d MiB", growth>>20, bound>>20)
	}
	if _, err := sender.Ping(ctx); err != nil {
		t.Fatalf("the sender after the flood: %v", err)
	}
}

//go:build !race

// The race detector's instrumentation allocates: these counts hold without it.

package chat

import (
	"strconv"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/parleyim/parley/internal/tracing"
)

// sendAllocs is the average number of allocations of one 1:1 send: the
// request, its commit, its ACK and its delivery to the recipient's
// connected device (the test device's own decoding included: it is the
// same in every measurement).
func sendAllocs(t *testing.T, cfg Config) float64 {
	h := newHarness(t, cfg)
	bob := h.connect("bob", "b1")
	h.send("alice", textSend("warm", "bob", "", "x")) // the conversation's first send reads more
	i := 1
	return testing.AllocsPerRun(300, func() {
		i++
		h.send("alice", textSend(strconv.Itoa(i), "bob", "", "x"))
		bob.wait(func() bool { return len(bob.pushed) >= i }, "the delivery")
	})
}

// sendAllocsBeforeTracing is sendAllocs measured on the send path as it was
// before tracing was added (the same test, run on that code).
const sendAllocsBeforeTracing = 60

// Tracing off costs a send no allocation: it allocates as many times as
// before tracing existed, while a traced send allocates more (so the
// measurement sees what spans cost).
func TestTracingOffAllocatesNothing(t *testing.T) {
	off := sendAllocs(t, Config{})
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer tp.Shutdown(t.Context())
	on := sendAllocs(t, Config{Tracer: tracing.New(tp)})
	t.Logf("allocations per send: tracing off %.1f, on %.1f, before tracing %d", off, on, sendAllocsBeforeTracing)
	if on <= off+5 {
		t.Fatalf("a traced send allocates %.1f times, one without tracing %.1f: the measurement does not see spans", on, off)
	}
	if off > sendAllocsBeforeTracing {
		t.Fatalf("a send with tracing off allocates %.1f times, %d before tracing existed", off, sendAllocsBeforeTracing)
	}
}

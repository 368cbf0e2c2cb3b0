package logx_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/logx"
)

type buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// records decodes the JSON lines written so far.
func (b *buffer) records(t *testing.T) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not a JSON record: %q", line)
		}
		out = append(out, m)
	}
	return out
}

func newLogger(out *buffer, opts logx.Options) *slog.Logger {
	return slog.New(logx.New(slog.NewJSONHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}), opts))
}

// A flood of one message keeps the first records of each window, and a
// summary says how many were dropped; other messages keep their own budget.
func TestSamplingKeepsFirstAndCountsTheRest(t *testing.T) {
	out := &buffer{}
	// A long window: the flood below all falls in the first one, whatever
	// the machine's speed.
	log := newLogger(out, logx.Options{First: 10, Interval: time.Hour})
	for i := range 1000 {
		log.Warn("store failed", "i", i)
	}
	log.Info("another message")
	recs := out.records(t)
	kept := 0
	for _, r := range recs {
		if r["msg"] == "store failed" {
			kept++
		}
	}
	if kept != 10 {
		t.Fatalf("kept %d records of the flood, want 10", kept)
	}
	if recs[len(recs)-1]["msg"] != "another message" {
		t.Fatalf("another message was dropped with the flood: %v", recs[len(recs)-1])
	}
}

func TestSamplingSummarizesDropped(t *testing.T) {
	out := &buffer{}
	h := logx.New(slog.NewJSONHandler(out, nil), logx.Options{First: 5, Interval: 20 * time.Millisecond})
	// Every record carries the same time, so all fall in one window however
	// slow the machine: exactly 5 kept, 495 counted.
	at := time.Now()
	for range 500 {
		_ = h.Handle(context.Background(), slog.NewRecord(at, slog.LevelError, "disk full", 0))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		kept, dropped := 0, 0.0
		for _, r := range out.records(t) {
			switch r["msg"] {
			case "disk full":
				kept++
			case "log records dropped by sampling":
				if r["sampled_msg"] != "disk full" || r["sampled_level"] != "ERROR" || r["level"] != "ERROR" {
					t.Fatalf("summary names the wrong message: %v", r)
				}
				dropped += r["dropped"].(float64)
			}
		}
		if kept+int(dropped) == 500 {
			if kept != 5 {
				t.Fatalf("kept %d of 500, want 5", kept)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kept %d + dropped %v != 500 records", kept, dropped)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Dropping a record allocates nothing: a flood costs no garbage.
func TestSamplingDropAllocatesNothing(t *testing.T) {
	out := &buffer{}
	h := logx.New(slog.NewJSONHandler(out, nil), logx.Options{First: 1, Interval: time.Hour})
	r := slog.NewRecord(time.Now(), slog.LevelWarn, "flood", 0)
	ctx := context.Background()
	_ = h.Handle(ctx, r)
	_ = h.Handle(ctx, r) // schedules the summary
	if n := testing.AllocsPerRun(1000, func() { _ = h.Handle(ctx, r) }); n != 0 {
		t.Fatalf("a dropped record allocates %v times", n)
	}
}

func TestLevelChangesAtRunTime(t *testing.T) {
	out := &buffer{}
	var level slog.LevelVar
	level.Set(slog.LevelWarn)
	log := newLogger(out, logx.Options{Level: &level})
	log.Info("hidden")
	level.Set(slog.LevelDebug)
	log.Debug("shown")
	recs := out.records(t)
	if len(recs) != 1 || recs[0]["msg"] != "shown" {
		t.Fatalf("records %v, want only \"shown\"", recs)
	}
}

func TestContextAttributes(t *testing.T) {
	out := &buffer{}
	log := newLogger(out, logx.Options{})
	ctx := logx.With(context.Background(), slog.String("request_id", "r1"))
	ctx = logx.With(ctx, slog.String("user", "alice"))
	log.With("conn", 7).InfoContext(ctx, "hello")
	recs := out.records(t)
	if len(recs) != 1 || recs[0]["request_id"] != "r1" || recs[0]["user"] != "alice" || recs[0]["conn"] != float64(7) {
		t.Fatalf("record %v lacks the context's attributes", recs)
	}
}

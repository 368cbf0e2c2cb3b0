package hook

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkDecide measures decisions against a local allow-everything hook
// (httptest on 127.0.0.1, plain HTTP/1.1 keep-alive, in the same process:
// the hook's CPU is counted too). A text message of 40 bytes, one hook.
//
// On the 2-core dev machine (go1.26.8, -benchtime=2s -count=3, while a CI
// run kept the load average at ~3.5, so the spread is wide):
//
//	serial     56-93 µs/op   11k-18k decisions/s   130 allocs/op   10.4 KB/op
//	parallel   64-74 µs/op   13k-16k decisions/s   129 allocs/op   10.4 KB/op  (16 callers)
//
// The allocations are both sides': the hook server's net/http takes ~45 of
// them; of the client's ~65 per decision net/http takes ~40, the body,
// signature (webhook.Sign: HMAC, hex) and answer decoding ~20, the call's
// context ~5. The time is the loopback round trip and the two net/http
// stacks on 2 shared cores, not the package's own work.
func BenchmarkDecide(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"action":"allow"}`)
	}))
	defer srv.Close()
	cfg := hookConfig(srv.URL, FailClosed)
	cfg.Timeout = 5 * time.Second // the benchmark measures answers, not failures
	h, err := New(Config{Hooks: []HookConfig{cfg}})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	ev := textEvent("m-0001", "hello, this is a message of 40 bytes...")
	run := func(b *testing.B, decide func()) {
		b.ReportAllocs()
		b.ResetTimer()
		decide()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
	}
	check := func(b *testing.B, d Decision, err error) {
		if err != nil || d.Action != Allow || d.Failure != "" {
			b.Fatalf("Decide = %+v, %v", d, err)
		}
	}
	b.Run("serial", func(b *testing.B) {
		run(b, func() {
			for range b.N {
				d, err := h.Decide(context.Background(), ev)
				check(b, d, err)
			}
		})
	})
	b.Run("parallel", func(b *testing.B) {
		b.SetParallelism(8) // 16 callers on 2 cores: many senders at once
		run(b, func() {
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					d, err := h.Decide(context.Background(), ev)
					if err != nil || d.Action != Allow || d.Failure != "" {
						b.Errorf("Decide = %+v, %v", d, err)
						return
					}
				}
			})
		})
	})
}

// BenchmarkDecideBatched is BenchmarkDecide's parallel case with 800
// callers and a hook taking batches (MaxBatch 256, MaxInFlight 8), each
// caller with its own client message id and the decision cache in front,
// as the chat service calls it.
func BenchmarkDecideBatched(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		n := strings.Count(string(body), `"type":`)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"decisions":[`+strings.Repeat(`{"action":"allow"},`, n-1)+`{"action":"allow"}]}`)
	}))
	defer srv.Close()
	cfg := hookConfig(srv.URL, FailClosed)
	cfg.Timeout, cfg.MaxBatch, cfg.MaxInFlight = 5*time.Second, 256, 8
	h, err := New(Config{Hooks: []HookConfig{cfg}})
	if err != nil {
		b.Fatal(err)
	}
	defer h.Close()
	cache := NewDecisionCache(CacheConfig{})
	var id atomic.Uint64
	b.ReportAllocs()
	b.SetParallelism(400)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			ev := textEvent("m-"+strconv.FormatUint(id.Add(1), 10), "hello, this is a message of 40 bytes...")
			d, err := cache.Decide(context.Background(), ev, h.Decide)
			if err != nil || d.Action != Allow || d.Failure != "" {
				b.Errorf("Decide = %+v, %v", d, err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
}

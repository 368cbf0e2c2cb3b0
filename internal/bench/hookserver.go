package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/internal/webhook/signature"
)

// HookServer is an app's before-send hook that allows everything, for
// measuring what a hook costs the send path (parley bench hook-server). It
// does what a real hook does per request: checks the signature and the
// timestamp, decodes the JSON, and answers one decision per event, in the
// plain or the batch form (docs/moderation.md).
type HookServer struct {
	Secret string
	// Delay is added to each answer (a slower app).
	Delay time.Duration

	requests, events, refused atomic.Uint64
	biggest                   atomic.Int64
}

// ServeHTTP implements http.Handler.
func (h *HookServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		return
	}
	ts := r.Header.Get("X-Parley-Timestamp")
	if !signature.Verify(h.Secret, ts, r.Header.Get("X-Parley-Signature"), body) {
		h.refused.Add(1)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	n := 1
	if bytes.HasPrefix(body, []byte(`{"events":`)) {
		var batch struct {
			Events []hookEvent `json:"events"`
		}
		if err := json.Unmarshal(body, &batch); err != nil || len(batch.Events) == 0 {
			h.refused.Add(1)
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
		n = len(batch.Events)
	} else {
		var ev hookEvent
		if err := json.Unmarshal(body, &ev); err != nil || ev.Type == "" {
			h.refused.Add(1)
			http.Error(w, "bad body", http.StatusBadRequest)
			return
		}
	}
	h.requests.Add(1)
	h.events.Add(uint64(n))
	for {
		m := h.biggest.Load()
		if int64(n) <= m || h.biggest.CompareAndSwap(m, int64(n)) {
			break
		}
	}
	if h.Delay > 0 {
		time.Sleep(h.Delay)
	}
	w.Header().Set("Content-Type", "application/json")
	if n == 1 && !bytes.HasPrefix(body, []byte(`{"events":`)) {
		io.WriteString(w, `{"action":"allow"}`)
		return
	}
	var out strings.Builder
	out.Grow(16 + n*20)
	out.WriteString(`{"decisions":[`)
	for i := range n {
		if i > 0 {
			out.WriteByte(',')
		}
		out.WriteString(`{"action":"allow"}`)
	}
	out.WriteString(`]}`)
	io.WriteString(w, out.String())
}

// hookEvent is the part of a hook request the stand-in reads.
type hookEvent struct {
	Type   string `json:"type"`
	Sender string `json:"sender"`
}

// Summary says what the hook was asked.
func (h *HookServer) Summary() string {
	req, ev := h.requests.Load(), h.events.Load()
	per := 0.0
	if req > 0 {
		per = float64(ev) / float64(req)
	}
	return fmt.Sprintf("hook-server: %d requests, %d events (%.1f per request, biggest batch %d), %d refused",
		req, ev, per, h.biggest.Load(), h.refused.Load())
}

// Serve serves h on ln until ctx ends.
func (h *HookServer) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	err := srv.Serve(ln)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

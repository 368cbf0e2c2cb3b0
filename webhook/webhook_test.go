package webhook

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/chat"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

const secret = "webhook-test-secret"

// receiver is a real local HTTP server that checks signatures and records events.
type receiver struct {
	mu      sync.Mutex
	events  []map[string]any
	badSigs int
	srv     *http.Server
}

func startReceiver(t *testing.T, ln net.Listener) *receiver {
	r := &receiver{}
	r.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if !Verify(secret, req.Header.Get("X-Parley-Timestamp"), req.Header.Get("X-Parley-Signature"), body) {
			r.mu.Lock()
			r.badSigs++
			r.mu.Unlock()
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var b struct {
			Events []map[string]any `json:"events"`
		}
		if err := json.Unmarshal(body, &b); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.mu.Lock()
		r.events = append(r.events, b.Events...)
		r.mu.Unlock()
	})}
	go r.srv.Serve(ln)
	t.Cleanup(func() { r.srv.Close() })
	return r
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func msgEvent(seq uint64) chat.Event {
	return chat.Event{Type: chat.EventMessageStored, Time: time.Now(),
		Message: &pb.Message{ConversationId: "d:a:b", Seq: seq, From: "a", To: "b", Payload: []byte("hi")}}
}

// Events reach a receiver signed; one that is down when they are published
// gets them once it comes back, in order, none lost.
func TestReceiverDownThenBack(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down: connections are refused
	d, err := New(Config{URLs: []string{"http://" + addr + "/hook"}, Secret: secret, MaxRetries: 20})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	for i := uint64(1); i <= 50; i++ {
		d.Publish(msgEvent(i))
	}
	waitFor(t, "failed attempts while the receiver is down", func() bool { return d.Stats().Failures >= 2 })
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("could not listen on %s again: %v", addr, err)
	}
	r := startReceiver(t, ln)
	waitFor(t, "all 50 events delivered after the receiver came back", func() bool { return r.count() == 50 })
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, ev := range r.events {
		m := ev["message"].(map[string]any)
		if ev["type"] != "message.stored" || m["seq"] != fmt.Sprint(i+1) || m["payload"] != "aGk=" {
			t.Fatalf("event %d: %v", i, ev)
		}
	}
	if r.badSigs != 0 {
		t.Fatalf("%d requests with a bad signature", r.badSigs)
	}
	if st := d.Stats(); st.Delivered != 50 || st.Dropped != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A full queue drops (and counts) instead of blocking the caller.
func TestFullQueueDropsWithoutBlocking(t *testing.T) {
	block := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-block })}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	d, err := New(Config{URLs: []string{"http://" + ln.Addr().String()}, Secret: secret, QueueSize: 10, MaxBatch: 1, Timeout: 10 * time.Second,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	defer d.Close()
	defer close(block) // first: lets the stuck request end so Close returns
	start := time.Now()
	for i := uint64(1); i <= 1000; i++ {
		d.Publish(msgEvent(i))
	}
	if el := time.Since(start); el > time.Second {
		t.Fatalf("publishing 1000 events to a stuck receiver took %v: it must not block", el)
	}
	if st := d.Stats(); st.Dropped < 900 || st.Queued > 10 {
		t.Fatalf("stats %+v: want the overflow dropped and the queue at its cap", st)
	}
}

func TestSignatureAndFilters(t *testing.T) {
	if !Verify("k", "123", "v1="+Sign("k", "123", []byte("body")), []byte("body")) {
		t.Fatal("a signature does not verify")
	}
	if Verify("k", "124", "v1="+Sign("k", "123", []byte("body")), []byte("body")) {
		t.Fatal("a signature verifies with another timestamp")
	}
	if _, err := New(Config{URLs: []string{"http://x"}}); err == nil {
		t.Fatal("webhooks without a secret were accepted")
	}
	if _, err := New(Config{URLs: []string{"http://x"}, Secret: "s", Events: []string{"message.sent"}}); err == nil {
		t.Fatal("an unknown event type was accepted")
	}
}

package webhook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/chat"
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
	// The receiver counts a batch before the dispatcher has read its answer.
	waitFor(t, "the dispatcher counts all 50 delivered", func() bool { return d.Stats().Delivered == 50 })
	if st := d.Stats(); st.Dropped != 0 {
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

// URLs in logs lose their userinfo and query string, where receivers'
// credentials live, and keep what tells them apart.
func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"https://hooks.example.com/parley", "https://hooks.example.com/parley"},
		{"https://app:s3cret@hooks.example.com:8443/parley", "https://REDACTED@hooks.example.com:8443/parley"},
		{"https://app@hooks.example.com/parley", "https://REDACTED@hooks.example.com/parley"},
		{"https://hooks.example.com/parley?token=s3cret&x=1", "https://hooks.example.com/parley?REDACTED"},
		{"http://u:p@10.0.0.1/in?k=s3cret#s3cret", "http://REDACTED@10.0.0.1/in?REDACTED"},
		{"http://[::1]:9000/a%2Fb?sig=s3cret", "http://[::1]:9000/a%2Fb?REDACTED"},
		{"http://u:s3cret@host/%zz", "(unparseable URL)"},
	} {
		if got := redactURL(tc.in); got != tc.want {
			t.Errorf("redactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A batch dropped after its retries is logged without the credentials in
// its URL.
func TestDroppedBatchLogHoldsNoCredentials(t *testing.T) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusInternalServerError) })}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	var logs bytes.Buffer
	hook := "http://parley:pa55word-in-userinfo@" + ln.Addr().String() + "/hook?token=s3cret-in-query#frag"
	d, err := New(Config{URLs: []string{hook}, Secret: secret, MaxRetries: 1,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	d.Publish(msgEvent(1))
	waitFor(t, "the batch dropped", func() bool { return d.Stats().Dropped == 1 })
	d.Close() // no more log writes
	out := logs.String()
	if !strings.Contains(out, "batch dropped") || !strings.Contains(out, ln.Addr().String()+"/hook?REDACTED") {
		t.Fatalf("the drop is not logged with the redacted URL: %q", out)
	}
	for _, leak := range []string{"pa55word", "parley:", "s3cret", "token=", "frag"} {
		if strings.Contains(out, leak) {
			t.Fatalf("the log holds %q: %q", leak, out)
		}
	}
}

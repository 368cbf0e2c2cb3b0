package hook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/webhook/signature"
)

const testSecret = "hook-test-secret"

// wireEvent is a request body as the package doc specifies it, decoded
// without the package's own types so that the test checks the format.
type wireEvent struct {
	Type           string           `json:"type"`
	MessageID      string           `json:"message_id"`
	ClientMsgID    string           `json:"client_msg_id"`
	Sender         string           `json:"sender"`
	ConversationID string           `json:"conversation_id"`
	Recipient      string           `json:"recipient"`
	TargetSeq      string           `json:"target_seq"`
	ContentType    string           `json:"content_type"`
	Text           *string          `json:"text"`
	Payload        *string          `json:"payload"`
	Attachments    []wireAttachment `json:"attachments"`
	Change         json.RawMessage  `json:"change"`
	IdempotencyKey string           `json:"idempotency_key"`
}

type wireAttachment struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Size        int64  `json:"size"`
	ContentType string `json:"content_type"`
}

// received is one verified request.
type received struct {
	ev    wireEvent
	key   string // Idempotency-Key
	proto int    // HTTP major version
}

// hookServer is a real local hook (127.0.0.1) that verifies the signature,
// headers and body of every request before answer runs; a request that
// fails verification fails the test and gets a 400.
type hookServer struct {
	t      *testing.T
	srv    *httptest.Server
	secret string
	answer atomic.Pointer[func(w http.ResponseWriter, r *http.Request, ev wireEvent)]

	requests          atomic.Int64 // verified requests received
	inFlight, maxSeen atomic.Int64

	mu   sync.Mutex
	seen []received
}

// newHookServer starts a hook answering with answer (nil: allow).
func newHookServer(t *testing.T, answer func(w http.ResponseWriter, r *http.Request, ev wireEvent)) *hookServer {
	return newHookServerOn(t, nil, answer)
}

// newHookServerOn starts a hook on ln (nil: a new 127.0.0.1 port).
func newHookServerOn(t *testing.T, ln net.Listener, answer func(w http.ResponseWriter, r *http.Request, ev wireEvent)) *hookServer {
	s := &hookServer{t: t, secret: testSecret}
	s.setAnswer(answer)
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if ln != nil {
		s.srv.Listener.Close()
		s.srv.Listener = ln
	}
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

func (s *hookServer) url() string { return s.srv.URL + "/hook" }

func (s *hookServer) setAnswer(answer func(w http.ResponseWriter, r *http.Request, ev wireEvent)) {
	if answer == nil {
		answer = reply(`{"action":"allow"}`)
	}
	s.answer.Store(&answer)
}

func (s *hookServer) serve(w http.ResponseWriter, r *http.Request) {
	n := s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	for {
		m := s.maxSeen.Load()
		if n <= m || s.maxSeen.CompareAndSwap(m, n) {
			break
		}
	}
	ev, key, err := s.verify(r)
	if err != nil {
		s.t.Errorf("hook server: %v", err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.requests.Add(1)
	s.mu.Lock()
	s.seen = append(s.seen, received{ev: ev, key: key, proto: r.ProtoMajor})
	s.mu.Unlock()
	(*s.answer.Load())(w, r, ev)
}

func (s *hookServer) verify(r *http.Request) (wireEvent, string, error) {
	var ev wireEvent
	if r.Method != http.MethodPost || r.URL.Path != "/hook" {
		return ev, "", fmt.Errorf("%s %s", r.Method, r.URL.Path)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return ev, "", fmt.Errorf("Content-Type %q", ct)
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return ev, "", err
	}
	ts := r.Header.Get("X-Parley-Timestamp")
	if !signature.Verify(s.secret, ts, r.Header.Get("X-Parley-Signature"), body) {
		return ev, "", fmt.Errorf("bad signature %q over %q", r.Header.Get("X-Parley-Signature"), body)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > 5*time.Minute {
		return ev, "", fmt.Errorf("timestamp %q", ts)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields() // a field the doc does not list fails the test
	if err := dec.Decode(&ev); err != nil {
		return ev, "", fmt.Errorf("body %q: %v", body, err)
	}
	if ev.Type == "" || ev.Sender == "" {
		return ev, "", fmt.Errorf("body %q: no type or sender", body)
	}
	if content := ev.Text != nil || ev.Payload != nil; content == (ev.Type == string(EventGroupChange)) || ev.Text != nil && ev.Payload != nil {
		return ev, "", fmt.Errorf("body %q: text and payload", body)
	}
	key := r.Header.Get("Idempotency-Key")
	if want := wantKey(ev.Sender, ev.ClientMsgID); key != want || ev.IdempotencyKey != want {
		return ev, "", fmt.Errorf("Idempotency-Key %q, idempotency_key %q, want %q", key, ev.IdempotencyKey, want)
	}
	return ev, key, nil
}

// wantKey is the Idempotency-Key as the package doc defines it.
func wantKey(sender, clientMsgID string) string {
	if clientMsgID == "" {
		return ""
	}
	esc := func(s string) string {
		var b strings.Builder
		for _, c := range []byte(s) {
			if strings.IndexByte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~", c) >= 0 {
				b.WriteByte(c)
			} else {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
		return b.String()
	}
	return esc(sender) + ":" + esc(clientMsgID)
}

func (s *hookServer) received() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.seen...)
}

// reply answers 200 with body.
func reply(body string) func(http.ResponseWriter, *http.Request, wireEvent) {
	return func(w http.ResponseWriter, _ *http.Request, _ wireEvent) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

// hang answers only once the client has given up (its request's context
// ends when the client drops the connection), then writes an allow the
// client no longer reads: a hook slower than any timeout.
func hang(w http.ResponseWriter, r *http.Request, _ wireEvent) {
	<-r.Context().Done()
	io.WriteString(w, `{"action":"allow"}`)
}

var allEvents = []EventType{EventDirectSend, EventGroupSend, EventEdit, EventGroupChange}

// hookConfig is a hook on url for every event type with a generous timeout
// (the tests of timeouts set a short one).
func hookConfig(url string, p Policy) HookConfig {
	return HookConfig{URL: url, Events: allEvents, Secret: testSecret, Policy: p, Timeout: 10 * time.Second}
}

func newHooks(t *testing.T, cfg Config) *Hooks {
	t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	h, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	return h
}

// textEvent is a 1:1 text message from alice to bob.
func textEvent(clientMsgID, text string) Event {
	return Event{
		Type: EventDirectSend, MessageID: 1 << 60, ClientMsgID: clientMsgID,
		Sender: "alice", ConversationID: "p:alice:bob", Recipient: "bob",
		ContentType: "text", Payload: []byte(text),
	}
}

// logBuffer collects log lines, safe for concurrent use.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Count(l.b.String(), s)
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

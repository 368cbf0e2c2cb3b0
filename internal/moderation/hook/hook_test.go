package hook

import (
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAllowSendsTheEventAsDocumented(t *testing.T) {
	s := newHookServer(t, nil)
	h := newHooks(t, Config{Hooks: []HookConfig{hookConfig(s.url(), FailClosed)}})
	ev := textEvent("m 1/é", "hello")
	ev.Attachments = []Attachment{{ID: "f1", Name: "cat.jpg", Size: 48213, ContentType: "image/jpeg"}}

	d, err := h.Decide(context.Background(), ev)
	if err != nil || d.Action != Allow || d.Failure != "" {
		t.Fatalf("Decide = %+v, %v; want a plain allow", d, err)
	}
	got := s.received()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	w := got[0].ev
	if w.Type != "message.direct" || w.MessageID != "1152921504606846976" || w.ClientMsgID != "m 1/é" ||
		w.Sender != "alice" || w.ConversationID != "p:alice:bob" || w.Recipient != "bob" ||
		w.ContentType != "text" || w.Text == nil || *w.Text != "hello" || w.Payload != nil || w.TargetSeq != "" {
		t.Errorf("body %+v", w)
	}
	if len(w.Attachments) != 1 || w.Attachments[0] != (wireAttachment{"f1", "cat.jpg", 48213, "image/jpeg"}) {
		t.Errorf("attachments %+v", w.Attachments)
	}
	if got[0].key != "alice:m%201%2F%C3%A9" {
		t.Errorf("Idempotency-Key %q", got[0].key)
	}
	st := h.Stats().Hooks[0]
	if st.Allow != 1 || st.PolicyApplied != 0 || st.Breaker != "closed" || st.Latency.Count != 1 || st.InFlight != 0 {
		t.Errorf("stats %+v", st)
	}
}

func TestContentAsTextOrBase64(t *testing.T) {
	s := newHookServer(t, nil)
	h := newHooks(t, Config{Hooks: []HookConfig{hookConfig(s.url(), FailClosed)}})
	for _, c := range []struct {
		contentType string
		payload     []byte
		text        bool
	}{
		{"text", []byte("hi"), true},
		{"text/markdown", []byte("*hi*"), true},
		{"text", []byte{}, true},           // empty text is still sent, as ""
		{"text", []byte{0xff, 'a'}, false}, // not UTF-8: base64
		{"image", []byte{0, 1, 2, 0xff}, false},
		{"application/json", []byte(`{"a":1}`), false},
	} {
		ev := textEvent("", "")
		ev.ContentType, ev.Payload = c.contentType, c.payload
		if _, err := h.Decide(context.Background(), ev); err != nil {
			t.Fatal(err)
		}
		got := s.received()
		w := got[len(got)-1]
		if w.key != "" {
			t.Errorf("Idempotency-Key %q without a client message id", w.key)
		}
		if c.text {
			if w.ev.Text == nil || *w.ev.Text != string(c.payload) {
				t.Errorf("%s %q: text %v", c.contentType, c.payload, w.ev.Text)
			}
			continue
		}
		if w.ev.Payload == nil || *w.ev.Payload != base64.StdEncoding.EncodeToString(c.payload) {
			t.Errorf("%s %q: payload %v", c.contentType, c.payload, w.ev.Payload)
		}
	}
}

func TestEditAndGroupChangeBodies(t *testing.T) {
	s := newHookServer(t, nil)
	h := newHooks(t, Config{Hooks: []HookConfig{hookConfig(s.url(), FailClosed)}})
	edit := Event{Type: EventEdit, ClientMsgID: "e1", Sender: "alice", ConversationID: "g:1", TargetSeq: 7, ContentType: "text", Payload: []byte("fixed")}
	change := Event{Type: EventGroupChange, ClientMsgID: "c1", Sender: "alice", ConversationID: "g:1",
		Change: json.RawMessage(`{"kind":"MESSAGE_KIND_MEMBERS_ADDED","event":{"userIds":["carol"]}}`)}
	for _, ev := range []Event{edit, change} {
		if d, err := h.Decide(context.Background(), ev); err != nil || d.Action != Allow {
			t.Fatalf("%s: %+v %v", ev.Type, d, err)
		}
	}
	got := s.received()
	if e := got[0].ev; e.Type != "message.edit" || e.TargetSeq != "7" || e.MessageID != "" || e.Recipient != "" || *e.Text != "fixed" {
		t.Errorf("edit body %+v", e)
	}
	if e := got[1].ev; e.Type != "group.change" || e.Text != nil || e.Payload != nil || e.ContentType != "" ||
		string(e.Change) != `{"kind":"MESSAGE_KIND_MEMBERS_ADDED","event":{"userIds":["carol"]}}` {
		t.Errorf("group change body %+v, change %s", e, e.Change)
	}
	if _, err := h.Decide(context.Background(), Event{Type: EventGroupChange, Sender: "a", Change: json.RawMessage(`{`)}); err == nil {
		t.Error("Change that is not JSON: no error")
	}
	if _, err := h.Decide(context.Background(), Event{Type: "message.other", Sender: "a"}); err == nil {
		t.Error("unknown event type: no error")
	}
}

func TestReject(t *testing.T) {
	s := newHookServer(t, reply(`{"action":"reject","code":"spam","reason":"Links are not allowed here","extra":1}`))
	cfg := hookConfig(s.url(), FailOpen)
	cfg.Name = "filter"
	h := newHooks(t, Config{Hooks: []HookConfig{cfg}})
	d, err := h.Decide(context.Background(), textEvent("m1", "buy now http://x"))
	if err != nil {
		t.Fatal(err)
	}
	want := Decision{Action: Reject, Code: "spam", Reason: "Links are not allowed here", Hook: "filter"}
	if d.Action != want.Action || d.Code != want.Code || d.Reason != want.Reason || d.Hook != want.Hook || d.Failure != "" || d.Temporary() {
		t.Errorf("Decide = %+v, want %+v", d, want)
	}
	if st := h.Stats().Hooks[0]; st.Reject != 1 || st.Name != "filter" {
		t.Errorf("stats %+v", st)
	}
}

func TestReplace(t *testing.T) {
	s := newHookServer(t, reply(`{"action":"replace","text":"I *** you"}`))
	h := newHooks(t, Config{Hooks: []HookConfig{hookConfig(s.url(), FailClosed)}})
	d, err := h.Decide(context.Background(), textEvent("m1", "I hate you"))
	if err != nil || d.Action != Replace || d.ContentType != "text" || string(d.Payload) != "I *** you" {
		t.Fatalf("Decide = %+v, %v", d, err)
	}

	// A new content type and a binary payload; an empty text.
	s.setAnswer(reply(`{"action":"replace","content_type":"image","payload":"AAEC/w=="}`))
	d, _ = h.Decide(context.Background(), textEvent("m2", "x"))
	if d.Action != Replace || d.ContentType != "image" || string(d.Payload) != "\x00\x01\x02\xff" {
		t.Errorf("Decide = %+v", d)
	}
	s.setAnswer(reply(`{"action":"replace","text":""}`))
	d, _ = h.Decide(context.Background(), textEvent("m3", "x"))
	if d.Action != Replace || d.ContentType != "text" || len(d.Payload) != 0 {
		t.Errorf("Decide = %+v", d)
	}
	if st := h.Stats().Hooks[0]; st.Replace != 3 {
		t.Errorf("stats %+v", st)
	}
}

func TestChainReplaceThenReject(t *testing.T) {
	first := newHookServer(t, reply(`{"action":"replace","text":"cleaned"}`))
	second := newHookServer(t, func(w http.ResponseWriter, r *http.Request, ev wireEvent) {
		if ev.Text != nil && *ev.Text == "cleaned" {
			reply(`{"action":"reject","code":"still_bad","reason":"no"}`)(w, r, ev)
			return
		}
		reply(`{"action":"allow"}`)(w, r, ev)
	})
	a, b := hookConfig(first.url(), FailClosed), hookConfig(second.url(), FailClosed)
	a.Name, b.Name = "a", "b"
	h := newHooks(t, Config{Hooks: []HookConfig{a, b}})
	d, err := h.Decide(context.Background(), textEvent("m1", "dirty"))
	if err != nil || d.Action != Reject || d.Code != "still_bad" || d.Hook != "b" {
		t.Fatalf("Decide = %+v, %v; want b's reject of the replaced text", d, err)
	}
	if got := second.received(); len(got) != 1 || *got[0].ev.Text != "cleaned" || got[0].key != "alice:m1" {
		t.Errorf("second hook got %+v", got)
	}

	// Replace, then allow: the replaced content is the decision.
	second.setAnswer(nil)
	d, _ = h.Decide(context.Background(), textEvent("m2", "dirty"))
	if d.Action != Replace || string(d.Payload) != "cleaned" || d.ContentType != "text" {
		t.Errorf("Decide = %+v", d)
	}

	// A reject ends the chain.
	first.setAnswer(reply(`{"action":"reject","code":"bad"}`))
	d, _ = h.Decide(context.Background(), textEvent("m3", "dirty"))
	if d.Action != Reject || d.Hook != "a" || second.requests.Load() != 2 {
		t.Errorf("Decide = %+v; second hook asked %d times, want 2", d, second.requests.Load())
	}
}

func TestChainFailOpenGoesOn(t *testing.T) {
	down := "http://" + closedPort(t) + "/hook"
	s := newHookServer(t, reply(`{"action":"replace","text":"ok"}`))
	a, b := hookConfig(down, FailOpen), hookConfig(s.url(), FailClosed)
	h := newHooks(t, Config{Hooks: []HookConfig{a, b}})
	d, err := h.Decide(context.Background(), textEvent("m1", "x"))
	if err != nil || d.Action != Replace || string(d.Payload) != "ok" || d.Failure != FailureError || !strings.Contains(d.Hook, "127.0.0.1") {
		t.Fatalf("Decide = %+v, %v", d, err)
	}
}

func TestNoHookForTheType(t *testing.T) {
	s := newHookServer(t, reply(`{"action":"reject","code":"no"}`))
	cfg := hookConfig(s.url(), FailClosed)
	cfg.Events = []EventType{EventGroupSend}
	h := newHooks(t, Config{Hooks: []HookConfig{cfg}})
	if h.Wants(EventDirectSend) || !h.Wants(EventGroupSend) {
		t.Error("Wants")
	}
	d, err := h.Decide(context.Background(), textEvent("m1", "x"))
	if err != nil || d.Action != Allow || s.requests.Load() != 0 {
		t.Errorf("Decide = %+v, %v, %d requests", d, err, s.requests.Load())
	}
}

func TestTimeoutAppliesThePolicy(t *testing.T) {
	for _, p := range []Policy{FailOpen, FailClosed} {
		t.Run(p.String(), func(t *testing.T) {
			s := newHookServer(t, hang)
			cfg := hookConfig(s.url(), p)
			cfg.Timeout = 50 * time.Millisecond
			h := newHooks(t, Config{Hooks: []HookConfig{cfg}})
			d, err := h.Decide(context.Background(), textEvent("m1", "x"))
			if err != nil || d.Failure != FailureTimeout {
				t.Fatalf("Decide = %+v, %v; want the policy on a timeout", d, err)
			}
			if p == FailOpen && (d.Action != Allow || d.Temporary()) {
				t.Errorf("fail open: %+v", d)
			}
			if p == FailClosed && (d.Action != Reject || d.Code != CodeUnavailable || d.Reason != "" || !d.Temporary()) {
				t.Errorf("fail closed: %+v", d)
			}
			st := h.Stats().Hooks[0]
			if st.Timeout != 1 || st.PolicyApplied != 1 || st.Allow != 0 || st.Error != 0 || st.Latency.Count != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

func TestCallerGivesUp(t *testing.T) {
	release := make(chan struct{})
	s := newHookServer(t, func(w http.ResponseWriter, r *http.Request, ev wireEvent) {
		<-release
		reply(`{"action":"allow"}`)(w, r, ev)
	})
	cfg := hookConfig(s.url(), FailClosed)
	cfg.MaxInFlight = 1
	cfg.Timeout = 5 * time.Second
	h := newHooks(t, Config{Hooks: []HookConfig{cfg}})
	first := make(chan Decision, 1)
	go func() {
		d, _ := h.Decide(context.Background(), textEvent("m0", "x"))
		first <- d
	}()
	waitFor(t, "the first request", func() bool { return s.requests.Load() == 1 })
	// The second caller gives up while its call waits behind the first.
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(20 * time.Millisecond)
		cancel()
	}()
	d, err := h.Decide(ctx, textEvent("m1", "x"))
	if !errors.Is(err, context.Canceled) || !reflect.DeepEqual(d, Decision{}) {
		t.Fatalf("Decide = %+v, %v; want no decision and the caller's error", d, err)
	}
	close(release)
	if d := <-first; d.Action != Allow || d.Failure != "" {
		t.Errorf("first: %+v", d)
	}
	h.Close() // waits for every call, the dropped one too
	st := h.Stats().Hooks[0]
	if st.Canceled != 1 || st.PolicyApplied != 0 || st.Breaker != "closed" || s.requests.Load() != 1 {
		t.Errorf("stats %+v, %d requests: a call whose caller left before it was sent is dropped, and is not the hook's failure", st, s.requests.Load())
	}
}

// A hook that refuses connections: the breaker opens after
// FailureThreshold failures, then calls are not made (the hook, back up,
// sees none) until the cool-down ends and one probe closes it again. Each
// change is logged once.
func TestBreakerDownThenBack(t *testing.T) {
	addr := closedPort(t)
	logs := &logBuffer{}
	cfg := hookConfig("http://"+addr+"/hook", FailClosed)
	cfg.FailureThreshold = 3
	cfg.BreakerCooldown = 300 * time.Millisecond
	h := newHooks(t, Config{Hooks: []HookConfig{cfg}, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	for i := range 3 {
		d, err := h.Decide(context.Background(), textEvent("m", "x"))
		if err != nil || d.Failure != FailureError || d.Code != CodeUnavailable {
			t.Fatalf("call %d: %+v, %v; want the policy on connection refused", i, d, err)
		}
	}
	if st := h.Stats().Hooks[0]; st.Breaker != "open" || st.Error != 3 {
		t.Fatalf("stats %+v; want the breaker open after 3 failures", st)
	}

	// The hook comes back on the same address while the breaker is open.
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	s := newHookServerOn(t, ln, nil)

	d, _ := h.Decide(context.Background(), textEvent("m", "x"))
	if d.Failure != FailureBreakerOpen || d.Action != Reject || s.requests.Load() != 0 {
		t.Fatalf("Decide = %+v with %d requests; want the policy at once, no request", d, s.requests.Load())
	}
	var last Decision
	waitFor(t, "the breaker to close", func() bool {
		last, _ = h.Decide(context.Background(), textEvent("m", "x"))
		return last.Failure == ""
	})
	if last.Action != Allow || s.requests.Load() != 1 {
		t.Errorf("Decide = %+v, %d requests; want the probe's allow, the only request", last, s.requests.Load())
	}
	st := h.Stats().Hooks[0]
	if st.Breaker != "closed" || st.Allow != 1 || st.BreakerOpen < 1 || st.PolicyApplied != st.Error+st.BreakerOpen {
		t.Errorf("stats %+v", st)
	}
	if o, c := logs.count("circuit breaker open"), logs.count("circuit breaker closed"); o != 1 || c != 1 {
		t.Errorf("logged open %d times and closed %d times, want once each:\n%s", o, c, logs.b.String())
	}
	if !strings.Contains(logs.b.String(), "connection refused") {
		t.Errorf("the open log does not say why:\n%s", logs.b.String())
	}
}

// A malformed answer fails the call: a failed half-open probe opens the
// breaker again; calls stop reaching the hook.
func TestBreakerMalformedStopsCalls(t *testing.T) {
	s := newHookServer(t, func(w http.ResponseWriter, _ *http.Request, _ wireEvent) {
		http.Error(w, "oops", http.StatusInternalServerError)
	})
	cfg := hookConfig(s.url(), FailOpen)
	cfg.FailureThreshold = 2
	cfg.BreakerCooldown = 100 * time.Millisecond
	h := newHooks(t, Config{Hooks: []HookConfig{cfg}})
	for range 10 {
		d, _ := h.Decide(context.Background(), textEvent("m", "x"))
		if d.Action != Allow || d.Failure == "" {
			t.Fatalf("Decide = %+v", d)
		}
	}
	if n := s.requests.Load(); n != 2 {
		t.Fatalf("%d requests, want 2 (then the breaker is open)", n)
	}
	waitFor(t, "a half-open probe", func() bool {
		h.Decide(context.Background(), textEvent("m", "x"))
		return s.requests.Load() == 3
	})
	if st := h.Stats().Hooks[0]; st.Breaker != "open" || st.Malformed != 3 {
		t.Errorf("stats %+v; want the breaker open again after the failed probe", st)
	}
}

func TestMalformedAnswers(t *testing.T) {
	long := strings.Repeat("x", 257)
	cases := []struct {
		name   string
		answer func(http.ResponseWriter, *http.Request, wireEvent)
	}{
		{"status 500", func(w http.ResponseWriter, _ *http.Request, _ wireEvent) { w.WriteHeader(500) }},
		{"status 404 with an allow", func(w http.ResponseWriter, _ *http.Request, _ wireEvent) {
			w.WriteHeader(404)
			w.Write([]byte(`{"action":"allow"}`))
		}},
		{"redirect", func(w http.ResponseWriter, r *http.Request, _ wireEvent) {
			http.Redirect(w, r, "/elsewhere", http.StatusTemporaryRedirect)
		}},
		{"204 no body", func(w http.ResponseWriter, _ *http.Request, _ wireEvent) { w.WriteHeader(204) }},
		{"not JSON", reply(`allow`)},
		{"JSON null", reply(`null`)},
		{"a JSON array", reply(`[{"action":"allow"}]`)},
		{"trailing data", reply(`{"action":"allow"} {}`)},
		{"no action", reply(`{}`)},
		{"unknown action", reply(`{"action":"maybe"}`)},
		{"action in capitals", reply(`{"action":"ALLOW"}`)},
		{"oversize", reply(`{"action":"allow","pad":"` + strings.Repeat("x", 64<<10) + `"}`)},
		{"reject without code", reply(`{"action":"reject","reason":"no"}`)},
		{"reject code in capitals", reply(`{"action":"reject","code":"Spam"}`)},
		{"reject code too long", reply(`{"action":"reject","code":"` + strings.Repeat("a", 65) + `"}`)},
		{"reject with Parley's code", reply(`{"action":"reject","code":"hook_unavailable"}`)},
		{"reject reason too long", reply(`{"action":"reject","code":"x","reason":"` + long + `"}`)},
		{"replace with nothing", reply(`{"action":"replace"}`)},
		{"replace text and payload", reply(`{"action":"replace","text":"a","payload":"YQ=="}`)},
		{"replace bad base64", reply(`{"action":"replace","payload":"not base64!"}`)},
		{"replace empty content type", reply(`{"action":"replace","content_type":""}`)},
		{"replace content type too long", reply(`{"action":"replace","content_type":"` + strings.Repeat("a", 65) + `"}`)},
		{"replace text not a string", reply(`{"action":"replace","text":5}`)},
	}
	s := newHookServer(t, nil)
	cfg := hookConfig(s.url(), FailClosed)
	cfg.FailureThreshold = 1000 // count them all; the breaker is tested above
	h := newHooks(t, Config{Hooks: []HookConfig{cfg}})
	for i, c := range cases {
		s.setAnswer(c.answer)
		d, err := h.Decide(context.Background(), textEvent("m", "x"))
		if err != nil || d.Failure != FailureMalformed || d.Code != CodeUnavailable {
			t.Errorf("%s: Decide = %+v, %v; want the policy on a malformed answer", c.name, d, err)
		}
		if st := h.Stats().Hooks[0]; st.Malformed != uint64(i+1) || st.PolicyApplied != uint64(i+1) || st.Error != 0 {
			t.Errorf("%s: stats %+v; want it counted once, as malformed", c.name, st)
		}
	}
	if n := s.requests.Load(); n != int64(len(cases)) {
		t.Errorf("%d requests, want %d (no redirect followed)", n, len(cases))
	}

	// A replace of a group change, which has no content.
	s.setAnswer(reply(`{"action":"replace","text":"x"}`))
	d, _ := h.Decide(context.Background(), Event{Type: EventGroupChange, Sender: "alice", Change: json.RawMessage(`{}`)})
	if d.Failure != FailureMalformed {
		t.Errorf("replace of a group change: %+v", d)
	}
	// Just under the size limit is fine.
	s.setAnswer(reply(`{"action":"allow","pad":"` + strings.Repeat("x", 64<<10-30) + `"}`))
	if d, _ := h.Decide(context.Background(), textEvent("m", "x")); d.Failure != "" || d.Action != Allow {
		t.Errorf("an answer under the limit: %+v", d)
	}
}

// Many concurrent calls never have more than MaxInFlight requests at the
// hook at once (measured by the hook): with the hook's own transport, and
// with a caller's client that does not limit connections itself.
func TestMaxInFlight(t *testing.T) {
	for _, own := range []bool{true, false} {
		t.Run(map[bool]string{true: "own transport", false: "caller's client"}[own], func(t *testing.T) {
			s := newHookServer(t, func(w http.ResponseWriter, r *http.Request, ev wireEvent) {
				time.Sleep(2 * time.Millisecond) // so the requests overlap
				reply(`{"action":"allow"}`)(w, r, ev)
			})
			cfg := hookConfig(s.url(), FailClosed)
			cfg.MaxInFlight = 4
			c := Config{Hooks: []HookConfig{cfg}}
			if !own {
				tr := &http.Transport{MaxIdleConnsPerHost: 64}
				t.Cleanup(tr.CloseIdleConnections)
				c.Client = &http.Client{Transport: tr}
			}
			h := newHooks(t, c)
			const callers, each = 32, 10
			var wg sync.WaitGroup
			for range callers {
				wg.Go(func() {
					for range each {
						d, err := h.Decide(context.Background(), textEvent("m", "x"))
						if err != nil || d.Action != Allow || d.Failure != "" {
							t.Errorf("Decide = %+v, %v", d, err)
							return
						}
					}
				})
			}
			wg.Wait()
			if m := s.maxSeen.Load(); m > 4 {
				t.Errorf("%d requests in flight at the hook, MaxInFlight is 4", m)
			}
			if n := s.requests.Load(); n != callers*each {
				t.Errorf("%d requests, want %d", n, callers*each)
			}
			t.Logf("at most %d in flight at the hook", s.maxSeen.Load())
		})
	}
}

// A call that finds every slot taken for its whole timeout gets the policy.
func TestNoSlot(t *testing.T) {
	s := newHookServer(t, func(w http.ResponseWriter, r *http.Request, ev wireEvent) {
		time.Sleep(20 * time.Millisecond)
		reply(`{"action":"allow"}`)(w, r, ev)
	})
	cfg := hookConfig(s.url(), FailOpen)
	cfg.MaxInFlight = 1
	cfg.Timeout = 50 * time.Millisecond
	cfg.FailureThreshold = 1000 // the timeouts below must not open the breaker
	h := newHooks(t, Config{Hooks: []HookConfig{cfg}})
	const calls = 10
	ds := make([]Decision, calls)
	var wg sync.WaitGroup
	for i := range calls {
		wg.Go(func() {
			d, err := h.Decide(context.Background(), textEvent(fmt.Sprint("m", i), "x"))
			if err != nil || d.Action != Allow {
				t.Errorf("Decide = %+v, %v; want allow (answered or fail open)", d, err)
			}
			ds[i] = d
		})
	}
	wg.Wait()
	// One request at a time, 20 ms each: the calls queued past their 50 ms
	// are answered by the policy without a request.
	noSlot := 0
	for _, d := range ds {
		if d.Failure == FailureNoSlot {
			noSlot++
		}
	}
	st := h.Stats().Hooks[0]
	// (Not "one at a time at the hook": a request the client gave up on at
	// its timeout may still be in the hook's handler when the next arrives.)
	if noSlot == 0 || st.NoSlot != uint64(noSlot) || s.requests.Load() != int64(calls-noSlot) {
		t.Errorf("%d no_slot decisions, stats %+v, %d requests; want some no_slot, and a request for each of the others",
			noSlot, st, s.requests.Load())
	}
}

// An https hook is spoken to in HTTP/2, over kept connections.
func TestHTTPSUsesHTTP2(t *testing.T) {
	s := &hookServer{t: t, secret: testSecret}
	s.setAnswer(nil)
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.EnableHTTP2 = true
	s.srv.StartTLS()
	t.Cleanup(s.srv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(s.srv.Certificate())
	h := newHooks(t, Config{Hooks: []HookConfig{hookConfig(s.url(), FailClosed)}, RootCAs: roots})
	for range 3 {
		if d, err := h.Decide(context.Background(), textEvent("m", "x")); err != nil || d.Failure != "" {
			t.Fatalf("Decide = %+v, %v", d, err)
		}
	}
	for _, r := range s.received() {
		if r.proto != 2 {
			t.Errorf("HTTP/%d, want HTTP/2", r.proto)
		}
	}
}

func TestCloseWaitsThenRefuses(t *testing.T) {
	release := make(chan struct{})
	s := newHookServer(t, func(w http.ResponseWriter, r *http.Request, ev wireEvent) {
		<-release
		reply(`{"action":"allow"}`)(w, r, ev)
	})
	cfg := hookConfig(s.url(), FailClosed)
	cfg.Events = []EventType{EventDirectSend}
	h, err := New(Config{Hooks: []HookConfig{cfg}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	result := make(chan Decision, 1)
	go func() {
		d, _ := h.Decide(context.Background(), textEvent("m", "x"))
		result <- d
	}()
	waitFor(t, "the request", func() bool { return s.requests.Load() == 1 })
	closed := make(chan struct{})
	go func() { h.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned with a call in flight")
	case <-time.After(20 * time.Millisecond):
	}
	close(release)
	<-closed
	if d := <-result; d.Action != Allow || d.Failure != "" {
		t.Errorf("the call in flight: %+v", d)
	}
	for _, ev := range []Event{textEvent("m", "x"), {Type: EventGroupSend, Sender: "alice"}} {
		if _, err := h.Decide(context.Background(), ev); !errors.Is(err, ErrClosed) {
			t.Errorf("Decide(%s) after Close: %v", ev.Type, err)
		}
	}
}

func TestNewValidates(t *testing.T) {
	ok := hookConfig("http://127.0.0.1:1/hook", FailOpen)
	for name, mod := range map[string]func(*HookConfig){
		"no URL":            func(c *HookConfig) { c.URL = "" },
		"ftp URL":           func(c *HookConfig) { c.URL = "ftp://x/" },
		"no host":           func(c *HookConfig) { c.URL = "http:///x" },
		"no secret":         func(c *HookConfig) { c.Secret = "" },
		"no policy":         func(c *HookConfig) { c.Policy = 0 },
		"no events":         func(c *HookConfig) { c.Events = nil },
		"unknown event":     func(c *HookConfig) { c.Events = []EventType{"message.stored"} },
		"event type twice":  func(c *HookConfig) { c.Events = []EventType{EventEdit, EventEdit} },
		"policy out of set": func(c *HookConfig) { c.Policy = 3 },
	} {
		c := ok
		mod(&c)
		if _, err := New(Config{Hooks: []HookConfig{c}}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := New(Config{Hooks: []HookConfig{ok, ok}}); err == nil {
		t.Error("two hooks named alike: no error")
	}
	secretURL := ok
	secretURL.URL = "https://user:pw@example.com/hook?token=t"
	h, err := New(Config{Hooks: []HookConfig{secretURL}})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if name := h.Stats().Hooks[0].Name; strings.Contains(name, "pw") || strings.Contains(name, "token") {
		t.Errorf("default name %q shows credentials", name)
	}
}

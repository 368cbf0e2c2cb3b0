package hook

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// countingDecider decides with dec and counts its calls.
type countingDecider struct {
	calls atomic.Int64
	dec   Decision
	err   error
}

func (c *countingDecider) decide(_ context.Context, _ Event) (Decision, error) {
	c.calls.Add(1)
	return c.dec, c.err
}

func TestCacheKeepsUntilMaxAge(t *testing.T) {
	c := NewDecisionCache(CacheConfig{MaxAge: time.Minute})
	now := time.Unix(1_000_000, 0)
	c.now = func() time.Time { return now }
	f := &countingDecider{dec: Decision{Action: Reject, Code: "spam"}}
	for range 3 {
		d, err := c.Decide(context.Background(), textEvent("m1", "x"), f.decide)
		if err != nil || d.Code != "spam" {
			t.Fatalf("Decide = %+v, %v", d, err)
		}
	}
	if f.calls.Load() != 1 {
		t.Errorf("decided %d times, want once", f.calls.Load())
	}
	// Another sender, another client message id, another type: other keys.
	other := textEvent("m1", "x")
	other.Sender = "carol"
	edit := textEvent("m1", "x")
	edit.Type = EventEdit
	for _, ev := range []Event{other, textEvent("m2", "x"), edit} {
		c.Decide(context.Background(), ev, f.decide)
	}
	if f.calls.Load() != 4 {
		t.Errorf("decided %d times, want 4", f.calls.Load())
	}
	now = now.Add(time.Minute + time.Second)
	c.Decide(context.Background(), textEvent("m1", "x"), f.decide)
	if f.calls.Load() != 5 {
		t.Errorf("decided %d times, want a new call after MaxAge", f.calls.Load())
	}
	if st := c.Stats(); st.Entries != 1 || st.Hits != 2 || st.Misses != 5 || st.Evicted != 0 {
		t.Errorf("stats %+v; want the 3 others expired with the first", st)
	}
}

func TestCacheBoundsEntriesAndBytes(t *testing.T) {
	f := &countingDecider{}
	c := NewDecisionCache(CacheConfig{MaxEntries: 3})
	for _, id := range []string{"a", "b", "c", "d", "e"} {
		c.Decide(context.Background(), textEvent(id, "x"), f.decide)
	}
	if st := c.Stats(); st.Entries != 3 || st.Evicted != 2 {
		t.Errorf("stats %+v", st)
	}
	c.Decide(context.Background(), textEvent("e", "x"), f.decide) // kept
	c.Decide(context.Background(), textEvent("a", "x"), f.decide) // evicted, the oldest
	if f.calls.Load() != 6 {
		t.Errorf("decided %d times, want 6", f.calls.Load())
	}

	// Replaced payloads count: 10 decisions of ~1 KiB in a 4 KiB budget.
	big := &countingDecider{dec: Decision{Action: Replace, ContentType: "text", Payload: make([]byte, 1000)}}
	c = NewDecisionCache(CacheConfig{MaxBytes: 4096})
	for i := range 10 {
		c.Decide(context.Background(), textEvent(strings.Repeat("k", i+1), "x"), big.decide)
		if st := c.Stats(); st.Bytes > 4096 {
			t.Fatalf("stats %+v: over MaxBytes", st)
		}
	}
	if st := c.Stats(); st.Entries != 3 || st.Evicted != 7 {
		t.Errorf("stats %+v", st)
	}
	// A decision larger than the whole budget is not kept (nor does it
	// push the others out).
	huge := &countingDecider{dec: Decision{Action: Replace, Payload: make([]byte, 5000)}}
	c.Decide(context.Background(), textEvent("huge", "x"), huge.decide)
	c.Decide(context.Background(), textEvent("huge", "x"), huge.decide)
	if st := c.Stats(); huge.calls.Load() != 2 || st.Entries != 3 {
		t.Errorf("stats %+v, %d calls", st, huge.calls.Load())
	}
}

// A retry must not carry content the first decision did not see.
func TestCacheOtherContentDecidedAfresh(t *testing.T) {
	c := NewDecisionCache(CacheConfig{})
	allow := &countingDecider{}
	reject := &countingDecider{dec: Decision{Action: Reject, Code: "bad"}}
	c.Decide(context.Background(), textEvent("m1", "fine"), allow.decide)
	for _, mod := range []func(*Event){
		func(e *Event) { e.Payload = []byte("nasty") },
		func(e *Event) { e.ContentType = "text/html" },
		func(e *Event) { e.Recipient = "carol" },
		func(e *Event) { e.ConversationID = "p:alice:carol" },
		func(e *Event) { e.Attachments = []Attachment{{ID: "f1"}} },
	} {
		ev := textEvent("m1", "fine")
		mod(&ev)
		if d, _ := c.Decide(context.Background(), ev, reject.decide); d.Action != Reject {
			t.Errorf("changed content got %+v", d)
		}
	}
	// Shifting bytes between fields is other content too.
	ev := textEvent("m1", "")
	ev.ConversationID += "fine"
	c.Decide(context.Background(), ev, reject.decide)
	// The first decision is still kept for the first content; a new
	// message id alone is the same content.
	ev = textEvent("m1", "fine")
	ev.MessageID++
	if d, _ := c.Decide(context.Background(), ev, reject.decide); d.Action != Allow {
		t.Errorf("the first content got %+v", d)
	}
	if st := c.Stats(); reject.calls.Load() != 6 || st.Mismatches != 6 || st.Entries != 1 {
		t.Errorf("stats %+v, %d calls", st, reject.calls.Load())
	}
}

func TestCacheKeepsNoErrorNorTemporary(t *testing.T) {
	c := NewDecisionCache(CacheConfig{})
	failing := &countingDecider{err: errors.New("closed")}
	temporary := &countingDecider{dec: Decision{Action: Reject, Code: CodeUnavailable, Failure: FailureTimeout}}
	failOpen := &countingDecider{dec: Decision{Action: Allow, Failure: FailureTimeout}}
	for range 2 {
		c.Decide(context.Background(), textEvent("e", "x"), failing.decide)
		c.Decide(context.Background(), textEvent("t", "x"), temporary.decide)
		c.Decide(context.Background(), textEvent("o", "x"), failOpen.decide)
		c.Decide(context.Background(), textEvent("", "x"), failOpen.decide) // no client message id: never kept
	}
	if failing.calls.Load() != 2 || temporary.calls.Load() != 2 || failOpen.calls.Load() != 3 {
		t.Errorf("calls: error %d, temporary %d, fail-open %d; want 2, 2, 3",
			failing.calls.Load(), temporary.calls.Load(), failOpen.calls.Load())
	}
	if st := c.Stats(); st.Entries != 1 {
		t.Errorf("stats %+v", st)
	}
}

// When the first call ends without a decision (its caller gave up), a
// waiting retry decides in its place.
func TestCacheWaiterTakesOverFromACallerThatGaveUp(t *testing.T) {
	c := NewDecisionCache(CacheConfig{})
	entered := make(chan struct{})
	var calls atomic.Int64
	decide := func(ctx context.Context, _ Event) (Decision, error) {
		if calls.Add(1) == 1 {
			close(entered)
			<-ctx.Done()
			return Decision{}, ctx.Err()
		}
		return Decision{Action: Reject, Code: "second"}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan error, 1)
	go func() {
		_, err := c.Decide(ctx, textEvent("m1", "x"), decide)
		first <- err
	}()
	<-entered
	retry := make(chan Decision, 1)
	go func() {
		d, err := c.Decide(context.Background(), textEvent("m1", "x"), decide)
		if err != nil {
			t.Error(err)
		}
		retry <- d
	}()
	cancel()
	if err := <-first; !errors.Is(err, context.Canceled) {
		t.Errorf("first: %v", err)
	}
	if d := <-retry; d.Code != "second" {
		t.Errorf("retry: %+v", d)
	}
	if calls.Load() != 2 {
		t.Errorf("%d calls", calls.Load())
	}
}

func TestCacheWaiterGivesUp(t *testing.T) {
	c := NewDecisionCache(CacheConfig{})
	entered, release := make(chan struct{}), make(chan struct{})
	decide := func(context.Context, Event) (Decision, error) {
		close(entered)
		<-release
		return Decision{Action: Allow}, nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Decide(context.Background(), textEvent("m1", "x"), decide)
	}()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Decide(ctx, textEvent("m1", "x"), decide); !errors.Is(err, context.Canceled) {
		t.Errorf("waiter: %v", err)
	}
	close(release)
	<-done
}

func TestCacheLeaderPanics(t *testing.T) {
	c := NewDecisionCache(CacheConfig{})
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic was swallowed")
			}
		}()
		c.Decide(context.Background(), textEvent("m1", "x"), func(context.Context, Event) (Decision, error) { panic("boom") })
	}()
	f := &countingDecider{}
	if _, err := c.Decide(context.Background(), textEvent("m1", "x"), f.decide); err != nil || f.calls.Load() != 1 {
		t.Errorf("after a panic: %v, %d calls", err, f.calls.Load())
	}
}

// A hook that answers only after the client gave up: the policy's decision
// is used and counted once; through a DecisionCache a retry of the client
// message id gets that decision without a second request, unless it was a
// temporary FailClosed rejection.
func TestLateAnswerAndRetry(t *testing.T) {
	for _, p := range []Policy{FailOpen, FailClosed} {
		t.Run(p.String(), func(t *testing.T) {
			s := newHookServer(t, hang)
			cfg := hookConfig(s.url(), p)
			cfg.Timeout = 50 * time.Millisecond
			h := newHooks(t, Config{Hooks: []HookConfig{cfg}})
			cache := NewDecisionCache(CacheConfig{})
			first, err := cache.Decide(context.Background(), textEvent("m1", "x"), h.Decide)
			if err != nil || first.Failure != FailureTimeout {
				t.Fatalf("Decide = %+v, %v", first, err)
			}
			// The retry is decided, if at all, by the same hook without the
			// short timeout, so that a slow machine cannot time it out too.
			s.setAnswer(reply(`{"action":"reject","code":"changed_mind"}`))
			patient := newHooks(t, Config{Hooks: []HookConfig{hookConfig(s.url(), p)}})
			retry, err := cache.Decide(context.Background(), textEvent("m1", "x"), patient.Decide)
			if err != nil {
				t.Fatal(err)
			}
			st := h.Stats().Hooks[0]
			if st.Timeout != 1 || st.PolicyApplied != 1 || st.Allow != 0 || st.Reject != 0 {
				t.Errorf("stats %+v; want the timeout counted once, the late answer not at all", st)
			}
			if p == FailOpen {
				if !reflect.DeepEqual(retry, first) || s.requests.Load() != 1 {
					t.Errorf("retry = %+v (first %+v), %d requests; want the first decision, no request", retry, first, s.requests.Load())
				}
				return
			}
			// FailClosed told the sender to retry: the retry asks again.
			if retry.Code != "changed_mind" || s.requests.Load() != 2 {
				t.Errorf("retry = %+v, %d requests", retry, s.requests.Load())
			}
		})
	}
}

// Concurrent retries of one client message id wait for the first call: the
// hook is asked once.
func TestCacheSingleFlight(t *testing.T) {
	release := make(chan struct{})
	s := newHookServer(t, func(w http.ResponseWriter, r *http.Request, ev wireEvent) {
		<-release
		reply(`{"action":"replace","text":"once"}`)(w, r, ev)
	})
	h := newHooks(t, Config{Hooks: []HookConfig{hookConfig(s.url(), FailClosed)}})
	cache := NewDecisionCache(CacheConfig{})
	const n = 20
	var wg sync.WaitGroup
	results := make([]Decision, n)
	for i := range n {
		wg.Go(func() {
			d, err := cache.Decide(context.Background(), textEvent("m1", "x"), h.Decide)
			if err != nil {
				t.Error(err)
			}
			results[i] = d
		})
	}
	waitFor(t, "the first request", func() bool { return s.requests.Load() == 1 })
	close(release)
	wg.Wait()
	for i, d := range results {
		if d.Action != Replace || string(d.Payload) != "once" {
			t.Errorf("call %d: %+v", i, d)
		}
	}
	if got := s.requests.Load(); got != 1 {
		t.Errorf("%d requests, want 1", got)
	}
	if st := cache.Stats(); st.Misses != 1 || st.Hits+st.Shared != n-1 || st.Entries != 1 {
		t.Errorf("cache stats %+v", st)
	}
}

// Calls that do not wait join the decision in progress for their key and
// all get it; later ones get the kept decision at once; the hooks are
// asked once.
func TestCacheAsyncSingleFlight(t *testing.T) {
	c := NewDecisionCache(CacheConfig{})
	var asked int
	var pending []func(Decision, error)
	decide := func(ev Event, cb func(Decision, error)) { asked++; pending = append(pending, cb) }
	ev := textEvent("m-1", "hi")
	got := make([]Decision, 3)
	for i := range 3 {
		c.DecideAsync(ev, decide, func(d Decision, err error) {
			if err != nil {
				t.Error(err)
			}
			got[i] = d
		})
	}
	if asked != 1 {
		t.Fatalf("asked %d times, want 1", asked)
	}
	pending[0](Decision{Action: Reject, Code: "spam"}, nil)
	for i, d := range got {
		if d.Action != Reject || d.Code != "spam" {
			t.Errorf("call %d got %+v", i, d)
		}
	}
	var later Decision
	c.DecideAsync(ev, decide, func(d Decision, _ error) { later = d })
	if asked != 1 || later.Code != "spam" {
		t.Errorf("a later retry: asked %d, got %+v", asked, later)
	}
	if st := c.Stats(); st.Misses != 1 || st.Shared != 2 || st.Hits != 1 || st.Entries != 1 {
		t.Errorf("stats %+v", st)
	}
	// Other content under the same key is decided afresh.
	c.DecideAsync(textEvent("m-1", "other"), decide, func(Decision, error) {})
	if asked != 2 {
		t.Errorf("other content: asked %d times, want 2", asked)
	}
}

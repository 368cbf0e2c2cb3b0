package hook

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
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

// batchHook is a real local hook speaking the batch form: it verifies each
// request's signature and body, and decides each event by its text.
type batchHook struct {
	srv              *httptest.Server
	requests, events atomic.Int64
	biggest          atomic.Int64
	delay            time.Duration
	answer           func(n int, texts []string) string // nil: the rule below
}

func newBatchHook(t *testing.T, delay time.Duration) *batchHook {
	h := &batchHook{delay: delay}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ts := r.Header.Get("X-Parley-Timestamp")
		if !signature.Verify(testSecret, ts, r.Header.Get("X-Parley-Signature"), body) {
			t.Errorf("batch hook: bad signature")
			http.Error(w, "signature", http.StatusBadRequest)
			return
		}
		var req struct {
			Events []wireEvent `json:"events"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&req); err != nil || len(req.Events) == 0 {
			t.Errorf("batch hook: body %q: %v", body, err)
			http.Error(w, "body", http.StatusBadRequest)
			return
		}
		if n, _ := strconv.Atoi(r.Header.Get("X-Parley-Batch")); n != len(req.Events) {
			t.Errorf("X-Parley-Batch %q for %d events", r.Header.Get("X-Parley-Batch"), len(req.Events))
		}
		h.requests.Add(1)
		h.events.Add(int64(len(req.Events)))
		for {
			m := h.biggest.Load()
			if int64(len(req.Events)) <= m || h.biggest.CompareAndSwap(m, int64(len(req.Events))) {
				break
			}
		}
		time.Sleep(h.delay)
		texts := make([]string, len(req.Events))
		for i, ev := range req.Events {
			if ev.IdempotencyKey != wantKey(ev.Sender, ev.ClientMsgID) {
				t.Errorf("idempotency_key %q", ev.IdempotencyKey)
			}
			if ev.Text != nil {
				texts[i] = *ev.Text
			}
		}
		if h.answer != nil {
			io.WriteString(w, h.answer(len(req.Events), texts))
			return
		}
		var out []string
		for _, text := range texts {
			switch {
			case strings.HasPrefix(text, "bad"):
				out = append(out, `{"action":"reject","code":"spam","reason":"no `+text+`"}`)
			case strings.HasPrefix(text, "swap"):
				out = append(out, `{"action":"replace","text":"swapped `+text+`"}`)
			default:
				out = append(out, `{"action":"allow"}`)
			}
		}
		io.WriteString(w, `{"decisions":[`+strings.Join(out, ",")+`]}`)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func batchConfig(url string, inFlight, batch int) Config {
	hc := hookConfig(url, FailClosed)
	hc.MaxInFlight, hc.MaxBatch, hc.Timeout = inFlight, batch, 2*time.Second
	return Config{Hooks: []HookConfig{hc}}
}

// While every request slot is busy, calls queue and go out together; each
// gets its own event's decision.
func TestBatchesFormUnderLoad(t *testing.T) {
	h := newBatchHook(t, 20*time.Millisecond)
	hooks := newHooks(t, batchConfig(h.srv.URL+"/hook", 1, 16))
	const n = 64
	var wg sync.WaitGroup
	ds := make([]Decision, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			text := "hi " + strconv.Itoa(i)
			switch i % 3 {
			case 1:
				text = "bad " + strconv.Itoa(i)
			case 2:
				text = "swap " + strconv.Itoa(i)
			}
			d, err := hooks.Decide(t.Context(), textEvent(fmt.Sprintf("m-%d", i), text))
			if err != nil {
				t.Error(err)
			}
			ds[i] = d
		}()
	}
	wg.Wait()
	for i, d := range ds {
		switch i % 3 {
		case 0:
			if d.Action != Allow || d.Failure != "" {
				t.Errorf("%d: %+v, want allow", i, d)
			}
		case 1:
			if d.Action != Reject || d.Code != "spam" || d.Reason != "no bad "+strconv.Itoa(i) {
				t.Errorf("%d: %+v, want its own reject", i, d)
			}
		case 2:
			if d.Action != Replace || string(d.Payload) != "swapped swap "+strconv.Itoa(i) {
				t.Errorf("%d: %+v, want its own replace", i, d)
			}
		}
	}
	if got := h.events.Load(); got != n {
		t.Errorf("%d events reached the hook, want %d (each once)", got, n)
	}
	if r := h.requests.Load(); r >= n || h.biggest.Load() < 2 || h.biggest.Load() > 16 {
		t.Errorf("%d requests for %d events, biggest batch %d: want batches of 2-16", r, n, h.biggest.Load())
	}
}

// A batch answer with the wrong number of decisions fails every event of
// it, as the policy says; one malformed decision fails only its event.
func TestBatchMalformed(t *testing.T) {
	h := newBatchHook(t, 0)
	h.answer = func(n int, texts []string) string {
		if strings.HasPrefix(texts[0], "short") {
			return `{"decisions":[]}`
		}
		out := make([]string, n)
		for i, text := range texts {
			out[i] = `{"action":"allow"}`
			if strings.HasPrefix(text, "odd") {
				out[i] = `{"action":"maybe"}`
			}
		}
		return `{"decisions":[` + strings.Join(out, ",") + `]}`
	}
	hooks := newHooks(t, batchConfig(h.srv.URL+"/hook", 4, 8))
	d, err := hooks.Decide(t.Context(), textEvent("a", "short"))
	if err != nil || d.Action != Reject || d.Failure != FailureMalformed || !d.Temporary() {
		t.Errorf("count mismatch: %+v, %v; want the fail-closed policy", d, err)
	}
	d, err = hooks.Decide(t.Context(), textEvent("b", "odd"))
	if err != nil || d.Failure != FailureMalformed {
		t.Errorf("bad decision: %+v, %v; want malformed", d, err)
	}
	d, err = hooks.Decide(t.Context(), textEvent("c", "fine"))
	if err != nil || d.Action != Allow || d.Failure != "" {
		t.Errorf("good decision: %+v, %v", d, err)
	}
	if st := hooks.Stats().Hooks[0]; st.Malformed != 2 || st.Allow != 1 {
		t.Errorf("stats %+v: want 2 malformed, 1 allow", st)
	}
}

// A call that cannot get a slot nor be taken into a batch within its
// timeout gets its policy's decision: no_slot, or timeout when the slot
// freed just in time for a request that then hung too.
func TestBatchNoSlot(t *testing.T) {
	block := make(chan struct{})
	h := newBatchHook(t, 0)
	h.answer = func(n int, texts []string) string {
		<-block
		return `{"decisions":[` + strings.Repeat(`{"action":"allow"},`, n-1) + `{"action":"allow"}]}`
	}
	cfg := batchConfig(h.srv.URL+"/hook", 1, 1<<10)
	cfg.Hooks[0].Timeout = 200 * time.Millisecond
	cfg.Hooks[0].Policy = FailOpen
	hooks := newHooks(t, cfg)
	defer close(block)
	first := make(chan Decision)
	go func() {
		d, _ := hooks.Decide(t.Context(), textEvent("first", "x"))
		first <- d
	}()
	waitFor(t, "the first request", func() bool { return h.requests.Load() == 1 })
	d, err := hooks.Decide(t.Context(), textEvent("second", "y"))
	if err != nil || d.Action != Allow || (d.Failure != FailureNoSlot && d.Failure != FailureTimeout) {
		t.Errorf("second: %+v, %v; want fail-open no_slot", d, err)
	}
	if d := <-first; d.Failure != FailureTimeout {
		t.Errorf("first: %+v, want timeout", d)
	}
}

package hook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/internal/webhook/signature"
)

// queue holds a hook's calls waiting for a request. No goroutine waits per
// call: a call that finds fewer than `senders` goroutines sending starts
// one, and each sender takes what is queued — up to max calls, sent in one
// request (the batch form when the hook has MaxBatch > 1) — until the queue
// is empty. So requests carry several calls only while every sender is
// busy, and no call waits for a batch to fill.
type queue struct {
	max     int // calls per request
	senders int // goroutines sending at most (MaxInFlight)

	mu     sync.Mutex
	calls  []*waiter
	active int // senders running

	inFlight atomic.Int64 // requests being sent now
}

// waiter is one call in a queue.
type waiter struct {
	ev       *Event
	deadline time.Time
	gaveUp   *atomic.Bool // the caller left (nil: it never does)
	done     func(Decision, error)
	d        Decision
	err      *callError
}

func (q *queue) push(k *hook, w *waiter) {
	q.mu.Lock()
	q.calls = append(q.calls, w)
	start := q.active < q.senders
	if start {
		q.active++
	}
	q.mu.Unlock()
	if start {
		go k.sendLoop()
	}
}

// take removes up to max calls from the front; nil when there are none, and
// then the sender leaves (counted out under the same lock as push counts
// senders in, so no call is left without one).
func (q *queue) take() []*waiter {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := min(len(q.calls), q.max)
	if n == 0 {
		q.active--
		return nil
	}
	// By bytes too: a request of max calls with large payloads would be
	// max times the largest message.
	size := 0
	for i, w := range q.calls[:n] {
		if size += len(w.ev.Payload); i > 0 && size > maxBatchBytes {
			n = i
			break
		}
	}
	out := make([]*waiter, n)
	copy(out, q.calls)
	rest := copy(q.calls, q.calls[n:])
	clear(q.calls[rest:])
	q.calls = q.calls[:rest]
	if rest == 0 && cap(q.calls) > 1024 {
		q.calls = nil // a burst's backlog is not kept
	}
	return out
}

// maxBatchBytes bounds the payload bytes of one batch request (one call
// larger than it still goes, alone).
const maxBatchBytes = 1 << 20

// errCaller ends the chain of a call whose caller left before it was sent.
var errCaller = errors.New("hook: the caller gave up")

// sendLoop sends what the queue holds, one request at a time, until it is empty.
func (k *hook) sendLoop() {
	for batch := k.q.take(); batch != nil; batch = k.q.take() {
		k.send(batch)
	}
}

// send makes one request of the calls in batch (those that are still
// wanted and in time) and answers each of them.
func (k *hook) send(batch []*waiter) {
	now := time.Now()
	live := batch[:0]
	for _, w := range batch {
		switch {
		case w.gaveUp != nil && w.gaveUp.Load():
			w.done(Decision{}, errCaller) // nobody reads it; the chain ends
		case !now.Before(w.deadline):
			// Queued for its whole timeout: every sender was busy.
			w.done(k.fail(FailureNoSlot), nil)
		default:
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		return
	}
	allowed, err := k.breaker.Allow()
	if err != nil { // opened meanwhile, or half-open with its probe out
		for _, w := range live {
			w.done(k.fail(FailureBreakerOpen), nil)
		}
		return
	}
	deadline := live[0].deadline
	for _, w := range live[1:] {
		if w.deadline.Before(deadline) {
			deadline = w.deadline
		}
	}
	// Not any caller's context: one that gives up must not end the request
	// that carries the others' calls.
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	k.q.inFlight.Add(1)
	start := time.Now()
	var cerr *callError
	if k.batched {
		cerr = k.postBatch(ctx, live)
	} else {
		live[0].d, cerr = k.post(ctx, live[0].ev)
	}
	k.c.latency.Observe(time.Since(start))
	k.q.inFlight.Add(-1)
	if cerr != nil {
		if ctx.Err() != nil && cerr.failure == FailureError {
			cerr.failure = FailureTimeout // the transport's error was our deadline
		}
		k.c.setLastFailure(cerr.Error())
		allowed(cerr)
		for _, w := range live {
			w.done(k.fail(cerr.failure), nil)
		}
		return
	}
	allowed(nil)
	for _, w := range live {
		if w.err != nil { // its own decision in a batch answer was malformed
			k.c.setLastFailure(w.err.Error())
			w.done(k.fail(w.err.failure), nil)
			continue
		}
		d := w.d
		k.c.answered(d.Action)
		if d.Action == Reject {
			d.Hook = k.name
		}
		w.done(d, nil)
	}
}

// batchAnswerJSON is a batch answer: one decision per event, in order.
type batchAnswerJSON struct {
	Decisions []json.RawMessage `json:"decisions"`
}

// postBatch sends the events of batch in one request and sets each
// waiter's decision (or, for an answer of its own that is malformed, its
// error). The error is the request's: every waiter fails with it.
func (k *hook) postBatch(ctx context.Context, batch []*waiter) *callError {
	size := 16
	for _, w := range batch {
		size += 300 + len(w.ev.Payload)*4/3 // base64, or text with some escapes
	}
	body := append(make([]byte, 0, size), `{"events":[`...)
	for i, w := range batch {
		if i > 0 {
			body = append(body, ',')
		}
		body = appendRequest(body, w.ev)
	}
	body = append(body, `]}`...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, k.url, bytes.NewReader(body))
	if err != nil {
		return &callError{FailureError, "request: " + err.Error()}
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "parley-hook/1")
	req.Header.Set("X-Parley-Timestamp", ts)
	req.Header.Set("X-Parley-Signature", "v1="+signature.Sign(k.secret, ts, body))
	req.Header.Set("X-Parley-Batch", strconv.Itoa(len(batch)))
	resp, err := k.client.Do(req)
	if err != nil {
		return &callError{FailureError, redactErr(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, k.maxAnswer))
		return &callError{FailureMalformed, "status " + strconv.Itoa(resp.StatusCode)}
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, k.maxAnswer+1))
	if err != nil {
		return &callError{FailureError, "reading the answer: " + redactErr(err)}
	}
	if int64(len(answer)) > k.maxAnswer {
		return &callError{FailureMalformed, "answer longer than " + strconv.FormatInt(k.maxAnswer, 10) + " bytes"}
	}
	var a batchAnswerJSON
	if err := json.Unmarshal(answer, &a); err != nil {
		return &callError{FailureMalformed, "not a JSON object: " + err.Error()}
	}
	if len(a.Decisions) != len(batch) {
		return &callError{FailureMalformed, "decisions: " + strconv.Itoa(len(a.Decisions)) + " for " + strconv.Itoa(len(batch)) + " events"}
	}
	for i, w := range batch {
		d, err := parseAnswer(a.Decisions[i], w.ev)
		if err != nil {
			w.err = &callError{FailureMalformed, "decision " + strconv.Itoa(i) + ": " + err.Error()}
			continue
		}
		w.d = d
	}
	return nil
}

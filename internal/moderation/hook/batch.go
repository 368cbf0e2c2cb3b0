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
	"time"

	"github.com/parleyim/parley/internal/webhook/signature"
)

// batcher queues the calls of a hook with MaxBatch > 1. No goroutine of its
// own: a call that gets a request slot sends, in one request, every call
// queued then (up to MaxBatch; its own may already be in another's), so
// batches form only while all slots are busy and no call waits for one to
// fill.
type batcher struct {
	max   int
	mu    sync.Mutex
	queue []*waiter
}

// waiter is one call waiting in a batcher.
type waiter struct {
	ev       *Event
	deadline time.Time
	done     chan struct{} // closed when d or err is set
	d        Decision
	err      *callError
	taken    bool // a sender took it (guarded by batcher.mu)
}

func (b *batcher) push(w *waiter) {
	b.mu.Lock()
	b.queue = append(b.queue, w)
	b.mu.Unlock()
}

// take removes up to max waiters from the queue's front.
func (b *batcher) take() []*waiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := min(len(b.queue), b.max)
	if n == 0 {
		return nil
	}
	out := make([]*waiter, n)
	copy(out, b.queue)
	for _, w := range out {
		w.taken = true
	}
	rest := copy(b.queue, b.queue[n:])
	clear(b.queue[rest:])
	b.queue = b.queue[:rest]
	return out
}

func (b *batcher) isTaken(w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return w.taken
}

// withdraw removes w if no sender took it; false when one did (its answer
// is on its way, within the sender's deadline).
func (b *batcher) withdraw(w *waiter) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if w.taken {
		return false
	}
	for i, q := range b.queue {
		if q == w {
			b.queue = append(b.queue[:i], b.queue[i+1:]...)
			return true
		}
	}
	return false
}

// callBatched is call for a hook with a batcher.
func (k *hook) callBatched(ctx context.Context, ev *Event) (Decision, error) {
	w := &waiter{ev: ev, deadline: time.Now().Add(k.timeout), done: make(chan struct{})}
	k.batch.push(w)
	timer := time.NewTimer(k.timeout)
	defer timer.Stop()
	for {
		select {
		case <-w.done:
			return k.settle(ctx, w)
		case k.slots <- struct{}{}:
			if batch := k.batch.take(); len(batch) > 0 {
				k.send(batch)
			}
			<-k.slots
			if k.batch.isTaken(w) {
				// In this batch or another sender's: answered by its
				// deadline, which is no later than ours.
				<-w.done
				return k.settle(ctx, w)
			}
			// Still queued (a full batch went before it): try again.
		case <-timer.C:
			if k.batch.withdraw(w) {
				return k.fail(FailureNoSlot), nil
			}
			<-w.done // a sender has it; its request ends by its deadline
			return k.settle(ctx, w)
		case <-ctx.Done():
			if k.batch.withdraw(w) {
				k.c.canceled.Add(1)
				return Decision{}, ctx.Err()
			}
			<-w.done
			return k.settle(ctx, w)
		}
	}
}

// settle turns a waiter's outcome into call's answer.
func (k *hook) settle(ctx context.Context, w *waiter) (Decision, error) {
	if w.err == nil {
		k.c.answered(w.d.Action)
		if w.d.Action == Reject {
			w.d.Hook = k.name
		}
		return w.d, nil
	}
	if ctx.Err() != nil {
		k.c.canceled.Add(1)
		return Decision{}, ctx.Err()
	}
	return k.fail(w.err.failure), nil
}

// send posts batch as one request (holding a slot) and answers its waiters.
func (k *hook) send(batch []*waiter) {
	finish := func(err *callError) {
		for _, w := range batch {
			if w.err == nil && err != nil {
				w.err = err
			}
			close(w.done)
		}
	}
	done, err := k.breaker.Allow()
	if err != nil {
		finish(&callError{FailureBreakerOpen, "breaker open"})
		return
	}
	deadline := batch[0].deadline
	for _, w := range batch[1:] {
		if w.deadline.Before(deadline) {
			deadline = w.deadline
		}
	}
	// Not any caller's context: a caller who gives up must not end the
	// request that carries the others' events.
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	cerr := k.postBatch(ctx, batch)
	k.c.latency.Observe(time.Since(start))
	if cerr != nil {
		if ctx.Err() != nil && cerr.failure == FailureError {
			cerr.failure = FailureTimeout
		}
		k.c.setLastFailure(cerr.Error())
		done(cerr)
		finish(cerr)
		return
	}
	done(nil)
	finish(nil)
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
		return &callError{FailureMalformed, errors.New("decisions: " + strconv.Itoa(len(a.Decisions)) + " for " + strconv.Itoa(len(batch)) + " events").Error()}
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

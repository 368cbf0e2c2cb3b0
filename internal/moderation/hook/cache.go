package hook

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"
	"time"
)

// CacheConfig bounds a DecisionCache. Zero values take the stated defaults.
type CacheConfig struct {
	// MaxEntries is the most decisions kept. Default 100,000.
	MaxEntries int
	// MaxBytes bounds the decisions kept, in bytes (keys, codes, reasons and
	// replaced payloads, plus about 200 bytes of overhead each). Default 32 MiB.
	MaxBytes int64
	// MaxAge is how long a decision is kept. Default 10 minutes.
	MaxAge time.Duration
}

// entryOverhead approximates an entry's fixed cost in bytes (map slot,
// list element, entry struct, digest), for MaxBytes.
const entryOverhead = 200

// DecisionCache remembers decisions by (event type, sender, client message
// id), so that a retried send gets the first decision instead of asking
// the hooks again; concurrent retries wait for the first call (see the
// package doc, Retries). No goroutines: expired entries go on the next
// call. Safe for concurrent use.
type DecisionCache struct {
	maxEntries int
	maxBytes   int64
	maxAge     time.Duration
	now        func() time.Time // time.Now; tests of age move it
	seeds      [2]maphash.Seed  // of contentDigest

	mu sync.Mutex
	// entries holds the decided entries and the ones being decided.
	entries map[cacheKey]*cacheEntry
	// order holds the decided entries, oldest first: all have the same
	// MaxAge, so the front expires first and is the first to go for room.
	order fifo
	bytes int64 // of the entries in order
	stats CacheStats
}

// CacheStats are a DecisionCache's state and running totals.
type CacheStats struct {
	Entries int   // decisions kept now
	Bytes   int64 // their bytes, as MaxBytes counts them
	// Hits: calls answered from a kept decision; Shared: calls that waited
	// for a concurrent call with the same key and took its decision;
	// Misses: calls that asked the hooks.
	Hits, Shared, Misses uint64
	// Mismatches: calls whose key was known with other content, decided
	// afresh and not kept.
	Mismatches uint64
	// Evicted: decisions dropped for room before their age.
	Evicted uint64
}

type cacheKey struct {
	typ                 EventType
	sender, clientMsgID string
}

type cacheEntry struct {
	key    cacheKey
	digest digest        // of the content the decision is about
	done   chan struct{} // closed once dec and err are set
	dec    Decision
	err    error
	kept   bool      // in order, counted in bytes
	at     time.Time // when decided
	size   int64     // bytes, as MaxBytes counts them
	// waiters are DecideAsync's calls waiting for the decision in progress.
	waiters []func(Decision, error)
}

// fifo is a growable ring of entries: only its front is ever removed, so a
// slice does what a linked list would without an allocation per entry.
type fifo struct {
	ring    []*cacheEntry
	head, n int
}

func (q *fifo) Len() int { return q.n }

func (q *fifo) push(e *cacheEntry) {
	if q.n == len(q.ring) {
		grown := make([]*cacheEntry, max(16, 2*len(q.ring)))
		for i := range q.n {
			grown[i] = q.ring[(q.head+i)%len(q.ring)]
		}
		q.ring, q.head = grown, 0
	}
	q.ring[(q.head+q.n)%len(q.ring)] = e
	q.n++
}

// front is the oldest entry; nil when empty.
func (q *fifo) front() *cacheEntry {
	if q.n == 0 {
		return nil
	}
	return q.ring[q.head]
}

func (q *fifo) pop() {
	q.ring[q.head] = nil
	q.head = (q.head + 1) % len(q.ring)
	q.n--
}

// NewDecisionCache returns an empty cache.
func NewDecisionCache(cfg CacheConfig) *DecisionCache {
	c := &DecisionCache{
		maxEntries: cfg.MaxEntries, maxBytes: cfg.MaxBytes, maxAge: cfg.MaxAge, now: time.Now,
		seeds:   [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()},
		entries: make(map[cacheKey]*cacheEntry),
	}
	if c.maxEntries <= 0 {
		c.maxEntries = 100_000
	}
	if c.maxBytes <= 0 {
		c.maxBytes = 32 << 20
	}
	if c.maxAge <= 0 {
		c.maxAge = 10 * time.Minute
	}
	return c
}

// Decide returns the decision kept for ev's key if there is one about the
// same content; waits for a call in progress for the key and returns its
// decision (kept or not); or else calls
// decide (typically Hooks.Decide) and keeps what it returns, unless it is
// an error or a Temporary rejection. An event without a ClientMsgID is
// passed to decide as is. The error is decide's, or ctx's when ctx ends
// while waiting.
func (c *DecisionCache) Decide(ctx context.Context, ev Event, decide func(context.Context, Event) (Decision, error)) (Decision, error) {
	if ev.ClientMsgID == "" {
		return decide(ctx, ev)
	}
	key := cacheKey{ev.Type, ev.Sender, ev.ClientMsgID}
	digest := c.contentDigest(&ev)
	for {
		c.mu.Lock()
		c.expire()
		e := c.entries[key]
		switch {
		case e == nil:
			e = &cacheEntry{key: key, digest: digest, done: make(chan struct{})}
			c.entries[key] = e
			c.stats.Misses++
			c.mu.Unlock()
			return c.lead(ctx, key, e, ev, decide)
		case e.digest != digest:
			// Another content under a known key: a retry must not carry
			// content the first decision did not see. Decide it alone.
			c.stats.Mismatches++
			c.mu.Unlock()
			return decide(ctx, ev)
		case e.kept:
			c.stats.Hits++
			d := e.dec
			c.mu.Unlock()
			return d, nil
		}
		c.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return Decision{}, ctx.Err()
		}
		if e.err == nil {
			c.mu.Lock()
			c.stats.Shared++
			c.mu.Unlock()
			return e.dec, nil
		}
		// The first call ended without a decision (its caller went away):
		// try again, one of the waiters leading.
	}
}

// lead calls decide for the entry e it added, then keeps or removes e and
// wakes the waiters.
func (c *DecisionCache) lead(ctx context.Context, key cacheKey, e *cacheEntry, ev Event, decide func(context.Context, Event) (Decision, error)) (d Decision, err error) {
	finished := false
	defer func() {
		if !finished { // decide panicked: let the waiters go, and keep nothing
			err = errLeaderPanicked
		}
		c.complete(key, e, d, err)
	}()
	d, err = decide(ctx, ev)
	finished = true
	return d, err
}

var errLeaderPanicked = errors.New("hook: the decision call panicked")

// complete records the decision for e, keeps it or drops it, and lets the
// waiters go.
func (c *DecisionCache) complete(key cacheKey, e *cacheEntry, d Decision, err error) {
	c.mu.Lock()
	e.dec, e.err = d, err
	e.size = entrySize(key, d)
	if err == nil && !d.Temporary() && e.size <= c.maxBytes {
		e.kept, e.at = true, c.now()
		c.order.push(e)
		c.bytes += e.size
		for c.order.Len() > c.maxEntries || c.bytes > c.maxBytes {
			c.removeFront()
			c.stats.Evicted++
		}
	} else {
		delete(c.entries, key)
	}
	close(e.done)
	waiters := e.waiters
	e.waiters = nil
	c.mu.Unlock()
	for _, w := range waiters {
		w(d, err)
	}
}

// DecideAsync is Decide for a caller that does not wait: done gets the
// decision exactly once, at once when it is kept, else when decide calls
// back (decide is typically Hooks.DecideAsync). A call for a key being
// decided joins it, whether that call waits (Decide) or not.
func (c *DecisionCache) DecideAsync(ev Event, decide func(Event, func(Decision, error)), done func(Decision, error)) {
	if ev.ClientMsgID == "" {
		decide(ev, done)
		return
	}
	key := cacheKey{ev.Type, ev.Sender, ev.ClientMsgID}
	digest := c.contentDigest(&ev)
	c.mu.Lock()
	c.expire()
	e := c.entries[key]
	switch {
	case e == nil:
		e = &cacheEntry{key: key, digest: digest, done: make(chan struct{})}
		c.entries[key] = e
		c.stats.Misses++
		c.mu.Unlock()
		decide(ev, func(d Decision, err error) {
			c.complete(key, e, d, err)
			done(d, err)
		})
	case e.digest != digest:
		c.stats.Mismatches++
		c.mu.Unlock()
		decide(ev, done)
	case e.kept:
		c.stats.Hits++
		d := e.dec
		c.mu.Unlock()
		done(d, nil)
	default:
		c.stats.Shared++
		e.waiters = append(e.waiters, done)
		c.mu.Unlock()
	}
}

// expire drops the entries older than MaxAge. c.mu is held.
func (c *DecisionCache) expire() {
	cutoff := c.now().Add(-c.maxAge)
	for e := c.order.front(); e != nil && !e.at.After(cutoff); e = c.order.front() {
		c.removeFront()
	}
}

// removeFront drops the oldest kept entry. c.mu is held.
func (c *DecisionCache) removeFront() {
	e := c.order.front()
	c.bytes -= e.size
	c.order.pop()
	delete(c.entries, e.key)
}

// Stats returns the cache's state and totals.
func (c *DecisionCache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.stats
	st.Entries, st.Bytes = c.order.Len(), c.bytes
	return st
}

func entrySize(k cacheKey, d Decision) int64 {
	return int64(entryOverhead + len(k.typ) + len(k.sender) + len(k.clientMsgID) +
		len(d.Code) + len(d.Reason) + len(d.ContentType) + len(d.Payload) + len(d.Hook))
}

// digest is a content's hash: two 64-bit hashes with seeds chosen at
// random per cache, so that no client can make two contents collide on
// purpose (it would let a retry carry content the hooks never saw).
type digest [2]uint64

// contentDigest hashes what a decision is about besides its key: every
// field but the key's and MessageID (a retry may get a new one), each
// length-prefixed so that no two events hash alike by shifting bytes.
func (c *DecisionCache) contentDigest(ev *Event) digest {
	var out digest
	for i, seed := range c.seeds {
		var h maphash.Hash
		h.SetSeed(seed)
		num := func(v uint64) { maphash.WriteComparable(&h, v) }
		str := func(s string) { num(uint64(len(s))); h.WriteString(s) }
		str(ev.ConversationID)
		str(ev.Recipient)
		num(ev.TargetSeq)
		str(ev.ContentType)
		num(uint64(len(ev.Payload)))
		h.Write(ev.Payload)
		num(uint64(len(ev.Attachments)))
		for _, a := range ev.Attachments {
			str(a.ID)
			str(a.Name)
			num(uint64(a.Size))
			str(a.ContentType)
		}
		num(uint64(len(ev.Change)))
		h.Write(ev.Change)
		out[i] = h.Sum64()
	}
	return out
}

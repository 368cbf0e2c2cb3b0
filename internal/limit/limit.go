// Package limit holds the rate limits Parley applies: token buckets, one per
// key (a user, an IP address, an API key), kept in a sharded map that drops
// keys idle long enough to be full again, so memory follows the active keys.
package limit

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
)

// Rate is a sustained rate with a burst. The zero Rate allows everything.
// (A Parley server's configuration spells unlimited -1; the server turns
// that into the zero Rate.)
type Rate struct {
	// PerSecond is the sustained rate; 0 or less means unlimited.
	PerSecond float64
	// Burst is how many may pass at once after a quiet spell; at least 1
	// (default: PerSecond, but at least 1).
	Burst float64
}

// Unlimited reports whether r allows everything.
func (r Rate) Unlimited() bool { return r.PerSecond <= 0 }

func (r Rate) burst() float64 {
	b := r.Burst
	if b <= 0 {
		b = r.PerSecond
	}
	if b < 1 {
		b = 1
	}
	return b
}

const shards = 32

type bucket struct {
	tokens float64
	last   int64 // unix nanoseconds of the last refill
}

type shard struct {
	mu sync.Mutex
	m  map[string]*bucket // guarded by mu
}

// Keyed is a token bucket per key. Safe for concurrent use.
type Keyed struct {
	// p is the rate in force: swapped whole by SetRate, so a check reads
	// one pointer and takes no lock beyond its shard's.
	p      atomic.Pointer[params]
	seed   maphash.Seed
	now    func() int64
	shards [shards]shard
}

type params struct {
	rate  Rate
	burst float64
}

// NewKeyed returns the limiter for rate; nil when rate is unlimited (Allow on
// a nil *Keyed always allows).
func NewKeyed(rate Rate) *Keyed {
	if rate.Unlimited() {
		return nil
	}
	return NewVar(rate)
}

// NewVar returns a limiter whose rate SetRate may change later; never nil
// (while unlimited, Allow costs one atomic load).
func NewVar(rate Rate) *Keyed {
	k := &Keyed{seed: maphash.MakeSeed(), now: func() int64 { return time.Now().UnixNano() }}
	k.SetRate(rate)
	for i := range k.shards {
		k.shards[i].m = make(map[string]*bucket)
	}
	return k
}

// SetRate changes the rate from now on, keeping every key's bucket: a
// lower burst caps the tokens a bucket holds at its next refill.
func (k *Keyed) SetRate(rate Rate) { k.p.Store(&params{rate: rate, burst: rate.burst()}) }

// Unlimited reports whether k allows everything now (nil does).
func (k *Keyed) Unlimited() bool { return k == nil || k.p.Load().rate.Unlimited() }

// Allow takes one token from key's bucket; false when it is empty.
func (k *Keyed) Allow(key string) bool {
	if k.Unlimited() {
		return true
	}
	sh, b, _ := k.refilled(key)
	defer sh.mu.Unlock()
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// refilled locks key's shard and returns key's bucket refilled to now (a
// new key's is full), with the rate it was refilled at. The caller
// unlocks the shard.
func (k *Keyed) refilled(key string) (*shard, *bucket, *params) {
	sh := &k.shards[maphash.String(k.seed, key)%shards]
	p := k.p.Load()
	now := k.now()
	sh.mu.Lock()
	b := sh.m[key]
	if b == nil {
		// Keys past the shard's share of maxKeys are first swept of idle
		// (full) buckets, which hold no information.
		if len(sh.m) >= maxKeysPerShard {
			k.sweep(sh, now, p)
		}
		b = &bucket{tokens: p.burst, last: now}
		sh.m[key] = b
		return sh, b, p
	}
	b.tokens = min(b.tokens+float64(now-b.last)/1e9*p.rate.PerSecond, p.burst)
	b.last = now
	return sh, b, p
}

// maxKeysPerShard bounds a shard before it sweeps. Past it, with every key
// busy, the map grows with the active keys (a bounded set: connected users,
// or IPs that connect), never with idle ones.
const maxKeysPerShard = 4096

// sweep drops buckets that have refilled completely: forgetting them changes nothing.
func (k *Keyed) sweep(sh *shard, now int64, p *params) {
	for key, b := range sh.m {
		if b.tokens+float64(now-b.last)/1e9*p.rate.PerSecond >= p.burst {
			delete(sh.m, key)
		}
	}
}

// Len is the number of keys tracked (for tests and metrics).
func (k *Keyed) Len() int {
	if k == nil {
		return 0
	}
	n := 0
	for i := range k.shards {
		k.shards[i].mu.Lock()
		n += len(k.shards[i].m)
		k.shards[i].mu.Unlock()
	}
	return n
}

// Take takes n tokens from key's bucket, going into debt if it holds fewer,
// and returns how long the caller should wait before going on: zero while
// the bucket was not in debt. For a rate of bytes (an upload), n is the
// bytes just read; the caller sleeps the answer, so every stream of one key
// together keeps to the rate.
func (k *Keyed) Take(key string, n float64) time.Duration {
	if n <= 0 || k.Unlimited() {
		return 0
	}
	sh, b, p := k.refilled(key)
	defer sh.mu.Unlock()
	if p.rate.Unlimited() {
		return 0 // changed to unlimited since the check above
	}
	b.tokens -= n
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / p.rate.PerSecond * 1e9)
}

package hook

import (
	"sync/atomic"

	"github.com/parleyim/parley/internal/metrics"
)

// HookStats are one hook's running totals.
type HookStats struct {
	Name string
	// Breaker is the circuit breaker's state: "closed", "open" or "half-open".
	Breaker  string
	InFlight int // requests in flight now

	// Answers, by action.
	Allow, Reject, Replace uint64
	// Calls that failed, by failure (each also counted in PolicyApplied).
	Timeout, Error, Malformed uint64
	// Calls not made: the breaker was open (or half-open with its probe
	// out), or no slot freed up within the Timeout.
	BreakerOpen, NoSlot uint64
	// PolicyApplied counts the decisions the Policy made: the sum of the
	// five failures above.
	PolicyApplied uint64
	// Canceled counts calls the caller gave up on first (no decision).
	Canceled uint64
	// Latency of the requests made, answered or not.
	Latency metrics.Snapshot
}

// Stats are the hooks' running totals, in configuration order.
type Stats struct {
	Hooks []HookStats
}

// Stats returns a snapshot of the counters.
func (h *Hooks) Stats() Stats {
	st := Stats{Hooks: make([]HookStats, len(h.hooks))}
	for i, k := range h.hooks {
		c := &k.c
		st.Hooks[i] = HookStats{
			Name:          k.name,
			Breaker:       k.breaker.State().String(),
			InFlight:      int(k.q.inFlight.Load()),
			Allow:         c.allow.Load(),
			Reject:        c.reject.Load(),
			Replace:       c.replace.Load(),
			Timeout:       c.timeout.Load(),
			Error:         c.errors.Load(),
			Malformed:     c.malformed.Load(),
			BreakerOpen:   c.breakerOpen.Load(),
			NoSlot:        c.noSlot.Load(),
			PolicyApplied: c.policy.Load(),
			Canceled:      c.canceled.Load(),
			Latency:       c.latency.Snapshot(),
		}
	}
	return st
}

// counters are a hook's totals: atomics, so recording never waits.
type counters struct {
	allow, reject, replace                atomic.Uint64
	timeout, errors, malformed            atomic.Uint64
	breakerOpen, noSlot, policy, canceled atomic.Uint64
	latency                               *metrics.Histogram
	last                                  atomic.Pointer[string] // the last failure's detail, for the breaker's log
}

func (c *counters) init() { c.latency = metrics.NewHistogram(metrics.LatencyBuckets) }

func (c *counters) answered(a Action) {
	switch a {
	case Allow:
		c.allow.Add(1)
	case Reject:
		c.reject.Add(1)
	case Replace:
		c.replace.Add(1)
	}
}

func (c *counters) failed(f Failure) {
	switch f {
	case FailureTimeout:
		c.timeout.Add(1)
	case FailureError:
		c.errors.Add(1)
	case FailureMalformed:
		c.malformed.Add(1)
	case FailureBreakerOpen:
		c.breakerOpen.Add(1)
	case FailureNoSlot:
		c.noSlot.Add(1)
	}
	c.policy.Add(1)
}

func (c *counters) setLastFailure(s string) { c.last.Store(&s) }

func (c *counters) lastFailure() string {
	if p := c.last.Load(); p != nil {
		return *p
	}
	return ""
}

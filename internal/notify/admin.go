package notify

import (
	"context"
	"time"

	"github.com/parleyim/parley/internal/metrics"
	"github.com/parleyim/parley/internal/notify/provider"
)

// TargetInfo is a device's target as the admin API shows it: the token is
// cut short (it is a credential of sorts), the log is the device's latest
// attempts on this node, newest first.
type TargetInfo struct {
	DeviceID  string    `json:"device_id"`
	Kind      string    `json:"kind"`
	Token     string    `json:"token"`
	Topic     string    `json:"topic,omitempty"`
	Sandbox   bool      `json:"sandbox,omitempty"`
	UpdatedAt time.Time `json:"updated_at"`
	Log       []Attempt `json:"log"`
}

// Targets lists uid's devices with a target, with their push logs.
func (n *Notifier) Targets(ctx context.Context, uid string) ([]TargetInfo, error) {
	ts, err := n.store.PushTargets(ctx, uid)
	if err != nil {
		return nil, err
	}
	out := make([]TargetInfo, 0, len(ts))
	for _, t := range ts {
		out = append(out, TargetInfo{DeviceID: t.DeviceID, Kind: t.Kind, Token: shortToken(t.Token), Topic: t.Topic,
			Sandbox: t.Sandbox, UpdatedAt: t.UpdatedAt, Log: n.Log(t.UserID, t.DeviceID)})
	}
	return out, nil
}

func shortToken(s string) string {
	if len(s) <= 16 {
		return s
	}
	return s[:16] + "…"
}

// TestResult is one device's answer to a test notification.
type TestResult struct {
	DeviceID string        `json:"device_id"`
	Kind     string        `json:"kind"`
	Outcome  string        `json:"outcome"`
	Status   int           `json:"status"`
	Reason   string        `json:"reason,omitempty"`
	Error    string        `json:"error,omitempty"`
	Latency  time.Duration `json:"latency_ns"`
}

// Test sends a test notification to each of uid's devices at once (one
// attempt each, not queued) and reports each platform's answer. A target
// the platform reports gone is removed, as for any notification.
func (n *Notifier) Test(ctx context.Context, uid string) ([]TestResult, error) {
	ts, err := n.store.PushTargets(ctx, uid)
	if err != nil {
		return nil, err
	}
	out := make([]TestResult, 0, len(ts))
	for _, t := range ts {
		res := TestResult{DeviceID: t.DeviceID, Kind: t.Kind}
		pl := n.providers[t.Kind]
		if pl == nil {
			res.Outcome, res.Error = OutcomeFailed, t.Kind+" is not configured on this server"
			out = append(out, res)
			continue
		}
		start := time.Now()
		r := pl.attempt(&job{target: t, test: true, n: provider.Notification{
			Title: "Test notification", Body: "Push notifications reach this device.", Badge: -1, Count: 1,
			CollapseID: "parley-test", TTL: time.Minute, High: true}})
		res.Latency, res.Status, res.Reason = time.Since(start), r.Status, r.Reason
		switch {
		case r.OK():
			res.Outcome = OutcomeSent
		case r.Invalid:
			res.Outcome = OutcomeRemoved
		default:
			res.Outcome = OutcomeFailed
		}
		if r.Err != nil {
			res.Error = r.Err.Error()
		}
		out = append(out, res)
	}
	return out, nil
}

// PlatformStats are one platform's running totals.
type PlatformStats struct {
	Kind                                                 string
	Sent, Invalid, Rejected, Exhausted, Dropped, Retries uint64
	Queued, Retrying                                     int
	Latency, Age                                         metrics.Snapshot
}

// Stats are the notifier's running totals.
type Stats struct {
	Considered     uint64 // messages that opened or joined a window
	SkippedPending uint64 // messages not considered: pending memory full
	Windows        uint64 // windows decided
	Decided        uint64 // recipients whose devices were checked
	Offline        uint64 // recipients named in message.offline events
	Devices        int    // devices with coalescing state
	Waiting        int    // devices with a batch waiting
	Platforms      []PlatformStats
}

// Stats reads the running totals.
func (n *Notifier) Stats() Stats {
	if n == nil {
		return Stats{}
	}
	st := Stats{Considered: n.stats.considered.Load(), SkippedPending: n.stats.skippedPending.Load(),
		Windows: n.stats.windows.Load(), Decided: n.stats.decided.Load(), Offline: n.stats.offline.Load()}
	st.Devices, st.Waiting = n.devices.pending()
	for _, k := range n.Kinds() {
		pl := n.providers[k]
		st.Platforms = append(st.Platforms, PlatformStats{Kind: k, Sent: pl.sent.Load(), Invalid: pl.invalid.Load(),
			Rejected: pl.rejected.Load(), Exhausted: pl.exhausted.Load(), Dropped: pl.dropped.Load(), Retries: pl.retries.Load(),
			Queued: len(pl.queue), Retrying: int(pl.retrying.Load()), Latency: pl.latency.Snapshot(), Age: pl.age.Snapshot()})
	}
	return st
}

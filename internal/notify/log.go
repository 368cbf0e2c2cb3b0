package notify

import (
	"sync"
	"time"

	"github.com/parleyim/parley/internal/store"
)

// Outcomes of an attempt.
const (
	OutcomeSent     = "sent"     // the platform accepted it
	OutcomeRetrying = "retrying" // a temporary failure; it is tried again
	OutcomeFailed   = "failed"   // refused, or retries ran out
	OutcomeRemoved  = "removed"  // the platform said the target is gone; it was removed
	OutcomeDropped  = "dropped"  // the platform's queue was full
)

// Attempt is one entry of a device's push log.
type Attempt struct {
	Time           time.Time     `json:"time"`
	Kind           string        `json:"kind"`
	ConversationID string        `json:"conversation_id"`
	Seq            uint64        `json:"seq,string"`
	Count          int           `json:"count"`
	Outcome        string        `json:"outcome"`
	Status         int           `json:"status"`
	Reason         string        `json:"reason,omitempty"`
	Error          string        `json:"error,omitempty"`
	Latency        time.Duration `json:"latency_ns"`
	Try            int           `json:"try,omitempty"`
	Test           bool          `json:"test,omitempty"`
}

// pushLog keeps the last attempts per device, for a bounded number of
// devices (the device logged least recently is forgotten first).
type pushLog struct {
	mu      sync.Mutex
	size    int
	devices int
	logs    map[string]*deviceLog // guarded by mu
	order   []string              // guarded by mu: keys in the order first logged
}

type deviceLog struct {
	// entries grow to size (most devices never reach it, and a device's
	// first attempt should not cost a whole log), then are a ring whose
	// oldest entry is at next.
	entries []Attempt
	next    int
}

func (l *pushLog) init(size, devices int) {
	l.size, l.devices = size, devices
	l.logs = make(map[string]*deviceLog)
}

func (l *pushLog) add(t store.PushTarget, a Attempt) {
	key := targetKey(t)
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.logs[key]
	if d == nil {
		for len(l.logs) >= l.devices && len(l.order) > 0 {
			delete(l.logs, l.order[0])
			l.order = l.order[1:]
		}
		d = &deviceLog{}
		l.logs[key] = d
		l.order = append(l.order, key)
	}
	if len(d.entries) < l.size {
		d.entries = append(d.entries, a)
		return
	}
	d.entries[d.next] = a
	d.next = (d.next + 1) % l.size
}

// Log returns a device's attempts, newest first.
func (n *Notifier) Log(userID, deviceID string) []Attempt {
	l := &n.plog
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.logs[userID+"\x00"+deviceID]
	if d == nil {
		return []Attempt{}
	}
	k := len(d.entries)
	out := make([]Attempt, 0, k)
	for i := 1; i <= k; i++ {
		out = append(out, d.entries[(d.next-i+k)%k])
	}
	return out
}

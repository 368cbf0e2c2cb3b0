package presence

import (
	"sync"
	"time"
)

const (
	// TypingInterval: at most one typing indicator per user and conversation
	// is forwarded per interval; the rest are dropped.
	TypingInterval = 2 * time.Second
	// typingSweepMin is the size of the typing table below which it is never swept.
	typingSweepMin = 4096
)

type typingKey struct{ user, conv string }

// TypingLimiter remembers when each (user, conversation) last had a typing
// indicator forwarded. The zero value is ready to use.
type TypingLimiter struct {
	mu      sync.Mutex
	last    map[typingKey]time.Time // guarded by mu; swept of expired entries as it grows
	sweepAt int                     // guarded by mu; the size that triggers the next sweep
}

// Allow reports whether a typing indicator of (user, conv) may be forwarded
// now, and if so records it.
func (l *TypingLimiter) Allow(user, conv string, now time.Time) bool {
	k := typingKey{user, conv}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last = make(map[typingKey]time.Time)
		l.sweepAt = typingSweepMin
	}
	if t, ok := l.last[k]; ok && now.Sub(t) < TypingInterval {
		return false
	}
	if len(l.last) >= l.sweepAt {
		for k, t := range l.last {
			if now.Sub(t) >= TypingInterval {
				delete(l.last, k)
			}
		}
		// The table holds only users who typed in the last interval; sweep
		// again once it has doubled.
		l.sweepAt = max(typingSweepMin, 2*len(l.last))
	}
	l.last[k] = now
	return true
}

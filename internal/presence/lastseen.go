package presence

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/parleyim/parley/internal/store"
)

// lastSeenWriters bounds the concurrent last-seen writes (the store commits
// concurrent writes together).
const lastSeenWriters = 16

// lastSeenWriter records last-seen times in the store off the connection
// goroutines (a session may close on the gateway's shared writers, which
// must not wait for a durable write). Times not yet written are answered
// from memory.
type lastSeenWriter struct {
	store store.Store
	log   *slog.Logger
	life  context.Context // cancelled when the service stops

	mu       sync.Mutex
	pending  map[string]time.Time // guarded by mu: waiting to be written; one entry per user
	inflight map[string]time.Time // guarded by mu: being written by the running flush
	running  bool                 // guarded by mu: a flush goroutine is running
}

// record queues uid's last-seen time t, starting a flush if none runs.
func (w *lastSeenWriter) record(uid string, t time.Time) {
	w.mu.Lock()
	w.pending[uid] = t
	start := !w.running
	w.running = true
	w.mu.Unlock()
	if start {
		go w.flush()
	}
}

// flush writes queued last-seen times until none are left, then exits.
func (w *lastSeenWriter) flush() {
	for {
		w.mu.Lock()
		w.inflight = nil
		if len(w.pending) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		batch := w.pending
		w.pending = make(map[string]time.Time)
		w.inflight = batch
		w.mu.Unlock()

		sem := make(chan struct{}, lastSeenWriters)
		var wg sync.WaitGroup
		for uid, t := range batch {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer func() { <-sem; wg.Done() }()
				err := w.store.SetLastSeen(w.life, uid, t)
				if err != nil && !errors.Is(err, store.ErrClosed) && !errors.Is(err, store.ErrNoSpace) {
					w.log.Warn("last seen not recorded", "user", uid, "err", err)
				}
			}()
		}
		wg.Wait()
	}
}

// LastSeen returns when uid's last session ended (zero when unknown): a
// time not yet written, else the store's.
func (h *Hub) LastSeen(ctx context.Context, uid string) (time.Time, error) {
	w := &h.lastSeen
	w.mu.Lock()
	t, ok := w.pending[uid]
	if !ok {
		t, ok = w.inflight[uid]
	}
	w.mu.Unlock()
	if ok {
		return t, nil
	}
	return w.store.LastSeen(ctx, uid)
}

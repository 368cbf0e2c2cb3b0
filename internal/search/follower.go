package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"google.golang.org/protobuf/proto"
)

// FollowerConfig configures a Follower. Log, Messages and Index are
// required; zero values of the others take the defaults given.
type FollowerConfig struct {
	// Log is the store's message log, Messages the same store (EDIT
	// events read their target).
	Log      store.Log
	Messages MessageGetter
	Index    Index
	// BatchMessages bounds the log entries read and applied in one step.
	// 0 means 4096 (Bleve indexes larger batches much faster).
	BatchMessages int
	// BatchBytes bounds the bytes of messages read in one step (their
	// proto size). 0 means 4 MiB.
	BatchBytes int
	// Poll is how long the follower waits before reading the log again
	// once it has caught up. 0 means 200 ms.
	Poll time.Duration
	// MaxBackoff caps the wait after a failing store or index (doubling
	// from Poll). 0 means 30 s.
	MaxBackoff time.Duration
	// Share is the part of wall time the follower spends indexing while
	// messages are being sent (the store's log grew since its last step)
	// and its lag is small: after a batch that took d it rests
	// d·(1−share)/share. The share grows with the lag, linearly from Share
	// at no lag to all of the time at MaxLag or MaxLagBytes, so the
	// follower never falls further behind than those bounds; once sends
	// stop it indexes at full speed. Sends never wait for the follower
	// either way. 0 means 0.25; 1 or more: never rest.
	Share float64
	// MaxLag bounds the log entries the follower lets itself fall behind
	// the store to leave the cores to sends. 0 means 250,000.
	MaxLag uint64
	// MaxLagBytes bounds the same lag in bytes of messages (estimated from
	// the sizes of the messages read so far). 0 means 128 MiB.
	MaxLagBytes int64
	// BusyBatchMessages bounds the entries of a batch while the follower
	// shares the cores with sends (smaller batches keep each burst of
	// indexing short: Bleve analyses a batch on every core; but each batch
	// is a segment: smaller ones cost more CPU per message and slow
	// searches until merged). 0 means BatchMessages.
	BusyBatchMessages int
	// Logger gets one line per failure streak. nil means slog.Default().
	Logger *slog.Logger
}

// FollowerStats are a follower's figures, for metrics.
type FollowerStats struct {
	// Position is the log position the index holds; StorePosition the
	// store's newest seen (Lag is their difference, in log positions:
	// about a message each).
	Position, StorePosition uint64
	// Applied counts log entries applied; Skipped those whose message
	// could not be read (corrupt); Errors failed steps (each retried).
	Applied, Skipped, Errors uint64
	// Rested is the time the follower rested behind the store to leave
	// the cores to sends (FollowerConfig.Share).
	Rested time.Duration
	// LastError is the newest failure ("" after a step succeeds).
	LastError string
}

// Lag is how many log positions the index is behind the store.
func (s FollowerStats) Lag() uint64 {
	if s.StorePosition > s.Position {
		return s.StorePosition - s.Position
	}
	return 0
}

// Follower keeps an Index up to date with a store's Log: one goroutine
// reads the log from the index's saved position and applies each batch's
// changes with the position after it, atomically, so a crash never skips
// nor re-applies a batch (and a re-applied one would be harmless: a Put
// replaces, a Delete of nothing is nothing). It only reads the store, so
// it never holds up a send; on errors it backs off and tries again.
type Follower struct {
	cfg     FollowerConfig
	log     *slog.Logger
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
	started atomic.Bool

	// Written by the goroutine, read by Stats and WaitFor.
	pos, storePos           atomic.Uint64
	applied, skipped, errsN atomic.Uint64
	rested                  atomic.Int64 // nanoseconds
	// Only the goroutine (or CatchUp) uses these.
	busy       bool    // the store grew at the last step: batches are small
	entryBytes float64 // running average of a log entry's message bytes
	lastErr    atomic.Pointer[string]
	progress   chan struct{} // closed and replaced on every step; guarded by progMu
	progMu     sync.Mutex
}

// NewFollower returns a follower; Start runs it.
func NewFollower(cfg FollowerConfig) (*Follower, error) {
	if cfg.Log == nil || cfg.Messages == nil || cfg.Index == nil {
		return nil, errors.New("search: follower needs Log, Messages and Index")
	}
	if cfg.BatchMessages <= 0 {
		cfg.BatchMessages = 4096
	}
	if cfg.BatchBytes <= 0 {
		cfg.BatchBytes = 4 << 20
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 200 * time.Millisecond
	}
	if cfg.MaxBackoff <= 0 {
		cfg.MaxBackoff = 30 * time.Second
	}
	if cfg.Share <= 0 {
		cfg.Share = 0.25
	}
	if cfg.MaxLag == 0 {
		cfg.MaxLag = 250_000
	}
	if cfg.MaxLagBytes <= 0 {
		cfg.MaxLagBytes = 128 << 20
	}
	if cfg.BusyBatchMessages <= 0 {
		cfg.BusyBatchMessages = cfg.BatchMessages
	}
	cfg.BusyBatchMessages = min(cfg.BusyBatchMessages, cfg.BatchMessages)
	l := cfg.Logger
	if l == nil {
		l = slog.Default()
	}
	return &Follower{cfg: cfg, log: l, stop: make(chan struct{}), done: make(chan struct{}),
		progress: make(chan struct{})}, nil
}

// Start runs the follower in its own goroutine until Stop. Once only.
func (f *Follower) Start() {
	if f.started.CompareAndSwap(false, true) {
		go f.run()
	}
}

// Stop stops the follower and waits for it (a step in progress finishes
// or is cancelled). The index stays open: its owner closes it.
func (f *Follower) Stop() {
	f.once.Do(func() { close(f.stop) })
	if f.started.Load() {
		<-f.done
	}
}

// Stats returns the follower's figures.
func (f *Follower) Stats() FollowerStats {
	s := FollowerStats{Position: f.pos.Load(), StorePosition: f.storePos.Load(),
		Applied: f.applied.Load(), Skipped: f.skipped.Load(), Errors: f.errsN.Load(),
		Rested: time.Duration(f.rested.Load())}
	if p := f.lastErr.Load(); p != nil {
		s.LastError = *p
	}
	return s
}

// WaitFor waits until the index holds log position pos (e.g. the store's
// LastLogPos after a write), ctx ends, or the follower stops.
func (f *Follower) WaitFor(ctx context.Context, pos uint64) error {
	for {
		f.progMu.Lock()
		ch := f.progress
		f.progMu.Unlock()
		if f.pos.Load() >= pos {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-f.done:
			return errors.New("search: follower stopped")
		}
	}
}

func (f *Follower) signal() {
	f.progMu.Lock()
	close(f.progress)
	f.progress = make(chan struct{})
	f.progMu.Unlock()
}

func (f *Follower) run() {
	defer close(f.done)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-f.stop:
			cancel()
		case <-ctx.Done():
		}
	}()

	started := false
	wait := time.Duration(0)
	failing := false
	for {
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-f.stop:
				t.Stop()
				return
			case <-t.C:
			}
		}
		var caughtUp bool
		var err error
		if !started {
			err = f.start(ctx)
			started = err == nil
		}
		var st stepInfo
		if err == nil {
			st, err = f.step(ctx)
			caughtUp = st.caughtUp
		}
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			f.errsN.Add(1)
			msg := err.Error()
			f.lastErr.Store(&msg)
			if !failing {
				f.log.Error("search: indexing messages failed; retrying with backoff", "err", err)
			}
			failing = true
			wait = min(max(2*wait, f.cfg.Poll), f.cfg.MaxBackoff)
		default:
			if failing {
				f.log.Info("search: indexing messages again")
				f.lastErr.Store(nil)
			}
			failing = false
			wait = 0
			if caughtUp {
				wait = f.cfg.Poll
			} else if rest := f.rest(st); rest > 0 {
				if !f.restWhileSending(ctx, rest) {
					return
				}
			}
		}
	}
}

// start reads the index's position. An index ahead of the store (the store
// lost its newest writes, or was restored from an older backup) would skip
// every new message up to its position: it follows from the store's newest
// position instead, and says that the index needs a rebuild.
func (f *Follower) start(ctx context.Context) error {
	// The store's position first: while the index cannot be read, the lag
	// still shows how much waits.
	last, err := f.cfg.Log.LastLogPos(ctx)
	if err != nil {
		return fmt.Errorf("search: store log position: %w", err)
	}
	f.storePos.Store(last)
	pos, err := f.cfg.Index.Position(ctx)
	if err != nil {
		return fmt.Errorf("search: index position: %w", err)
	}
	if pos > last {
		f.log.Error("search: the index is ahead of the store (store restored or its newest writes lost); following from the store's position: run 'parley reindex' to drop messages the store no longer has",
			"index_pos", pos, "store_pos", last)
		pos = last
	}
	f.pos.Store(pos)
	f.storePos.Store(last)
	f.signal()
	return nil
}

// stepInfo is what one step did.
type stepInfo struct {
	caughtUp bool          // nothing was left to read
	took     time.Duration // reading and applying the batch
	grew     bool          // the store's position moved since the step before
	lag      uint64        // log positions still to index after the batch
}

// rest is how long the follower rests after step st (FollowerConfig.Share):
// none when it caught up, when the store did not grow (nobody is sending),
// or when it is at its lag bounds (or has no lag); else the rest that makes its indexing
// take its share of the time, a share that grows with its lag.
func (f *Follower) rest(st stepInfo) time.Duration {
	if f.cfg.Share >= 1 || st.caughtUp || !st.grew || st.lag == 0 {
		return 0
	}
	share := f.share(st.lag)
	if share >= 1 {
		return 0
	}
	return min(time.Duration(float64(st.took)*(1-share)/share), maxRest)
}

// maxRest caps one rest (restWhileSending also ends it when sends stop).
const maxRest = 10 * time.Second

// restWhileSending rests for d, looking at the store every Poll: once its
// log has stopped growing (nobody sends) the rest ends, so the follower
// goes on at full speed at once. False when the follower is stopping.
func (f *Follower) restWhileSending(ctx context.Context, d time.Duration) bool {
	start := time.Now()
	defer func() { f.rested.Add(int64(time.Since(start))) }()
	last := f.storePos.Load()
	for left := d; left > 0; left = d - time.Since(start) {
		t := time.NewTimer(min(left, f.cfg.Poll))
		select {
		case <-f.stop:
			t.Stop()
			return false
		case <-t.C:
		}
		now, err := f.cfg.Log.LastLogPos(ctx)
		if err != nil || now == last {
			return ctx.Err() == nil
		}
		last = now
	}
	return true
}

// share is the part of the time to index at a lag of lag entries: Share at
// none, growing linearly to 1 at MaxLag entries or MaxLagBytes.
func (f *Follower) share(lag uint64) float64 {
	frac := float64(lag) / float64(f.cfg.MaxLag)
	if b := float64(lag) * f.entryBytes / float64(f.cfg.MaxLagBytes); b > frac {
		frac = b
	}
	if frac >= 1 {
		return 1
	}
	return f.cfg.Share + (1-f.cfg.Share)*frac
}

// step applies one batch of the log after the follower's position. Called
// by the follower's goroutine, or by CatchUp on a follower never started.
func (f *Follower) step(ctx context.Context) (st stepInfo, err error) {
	start := time.Now()
	if last, err := f.cfg.Log.LastLogPos(ctx); err == nil {
		st.grew = last > f.storePos.Load()
		f.storePos.Store(last)
	}
	pos := f.pos.Load()
	batch := f.cfg.BatchMessages
	if f.busy {
		batch = f.cfg.BusyBatchMessages
	}
	f.busy = st.grew
	entries, err := f.cfg.Log.LogAfter(ctx, pos, batch, f.cfg.BatchBytes)
	if err != nil {
		return st, fmt.Errorf("search: read store log: %w", err)
	}
	if len(entries) == 0 {
		st.caughtUp = true
		return st, nil
	}
	msgs := make([]*pb.Message, 0, len(entries))
	skipped, size := 0, 0
	for _, e := range entries {
		if e.Msg == nil {
			skipped++
			continue
		}
		msgs = append(msgs, e.Msg)
		size += proto.Size(e.Msg)
	}
	// A running average over about the last 16 batches (the first batch's
	// own average to begin with).
	if avg := float64(size) / float64(len(entries)); f.entryBytes == 0 {
		f.entryBytes = avg
	} else {
		f.entryBytes += (avg - f.entryBytes) / 16
	}
	changes, err := Changes(ctx, f.cfg.Messages, msgs)
	if err != nil {
		return st, fmt.Errorf("search: read edited messages: %w", err)
	}
	next := entries[len(entries)-1].Pos
	// The store publishes its position a moment after its log entries are
	// readable: what was read counts as stored, so a failing Apply shows
	// as lag.
	if next > f.storePos.Load() {
		f.storePos.Store(next)
	}
	if err := f.cfg.Index.Apply(ctx, changes, next); err != nil {
		return st, fmt.Errorf("search: index: %w", err)
	}
	f.pos.Store(next)
	if sp := f.storePos.Load(); sp > next {
		st.lag = sp - next
	}
	f.applied.Add(uint64(len(entries) - skipped))
	f.skipped.Add(uint64(skipped))
	f.signal()
	st.took = time.Since(start)
	return st, nil
}

// CatchUp initializes a follower that was not Started and applies the log
// until it has caught up with the store: a rebuild. progress, when not
// nil, is called after each step.
func (f *Follower) CatchUp(ctx context.Context, progress func(FollowerStats)) error {
	if err := f.start(ctx); err != nil {
		return err
	}
	for {
		st, err := f.step(ctx)
		if err != nil {
			return err
		}
		if progress != nil {
			progress(f.Stats())
		}
		if st.caughtUp {
			return nil
		}
	}
}

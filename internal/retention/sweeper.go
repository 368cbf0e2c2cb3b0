package retention

import (
	"context"
	"errors"
	"time"

	"github.com/parleyim/parley/internal/store"
)

// SweepStats is what one sweep did.
type SweepStats struct {
	// Disappeared: messages deleted because their expiry passed.
	Disappeared int
	// Expired: messages deleted below a raised floor.
	Expired int
	// Conversations whose floor was raised.
	Conversations int
	// Files deleted because no stored message carries them any more.
	Files int
}

// convPage is how many conversation ids one listing reads.
const convPage = 1000

// Run sweeps every Interval until ctx ends. Several nodes may run it at
// once over one store: the store's deletions are idempotent, so they only
// share the work (each deletes what the other has not yet).
func (s *Service) Run(ctx context.Context) {
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := s.Sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("retention: sweep failed; next one in an interval", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Sweep deletes what has expired now: disappearing messages past their
// expiry (found through the store's expiry index), then, for each
// conversation under a policy, the messages below its new floor.
func (s *Service) Sweep(ctx context.Context) (SweepStats, error) {
	var st SweepStats
	now := s.cfg.Now()
	for {
		refs, err := s.st.ExpiringMessages(ctx, now, s.cfg.Batch)
		if err != nil {
			return st, err
		}
		if len(refs) == 0 {
			break
		}
		gone, err := s.st.DeleteMessages(ctx, refs)
		if err != nil {
			return st, err
		}
		st.Disappeared += len(gone)
		s.forget(ctx, refs)
		if len(refs) < s.cfg.Batch {
			break
		}
	}
	visit := func(conv string) error {
		n, err := s.sweepConversation(ctx, conv, now)
		if n > 0 {
			st.Expired += n
			st.Conversations++
		}
		return err
	}
	if s.cfg.Default.Off() {
		convs, err := s.policyConversations(ctx)
		if err != nil {
			return st, err
		}
		for _, c := range convs {
			if err := visit(c); err != nil {
				return st, err
			}
		}
	} else {
		after := ""
		for {
			convs, err := s.st.StoredConversations(ctx, after, convPage)
			if err != nil {
				return st, err
			}
			for _, c := range convs {
				if err := visit(c); err != nil {
					return st, err
				}
			}
			if len(convs) < convPage {
				break
			}
			after = convs[len(convs)-1]
		}
	}
	if s.cfg.Files != nil {
		// Every sweep, not only one that deleted messages: it also finishes
		// what a crash or failure left.
		for {
			n, err := s.cfg.Files(ctx)
			st.Files += n
			if err != nil {
				return st, err
			}
			if n == 0 {
				break
			}
		}
	}
	if st.Expired+st.Disappeared > 0 {
		if err := s.st.ReclaimSpace(ctx, "", 0); err != nil {
			return st, err
		}
	}
	return st, nil
}

// sweepConversation raises conv's floor as its policy says and deletes the
// messages below it, one batch per store write.
func (s *Service) sweepConversation(ctx context.Context, conv string, now time.Time) (int, error) {
	p, err := s.effective(ctx, conv)
	if err != nil || p.Off() {
		return 0, err
	}
	floor, err := s.floorFor(ctx, conv, p, now)
	if err != nil {
		return 0, err
	}
	cur, err := s.st.MessageFloor(ctx, conv)
	if err != nil {
		return 0, err
	}
	if floor <= cur {
		// Unmoved, but a sweep that stopped half-way (a crash, an error)
		// is finished.
		if left, err := s.st.ExpiryUnfinished(ctx, conv); err != nil || !left {
			return 0, err
		}
	}
	n := 0
	for {
		start := time.Now()
		removed, more, err := s.st.ExpireBefore(ctx, conv, floor, s.cfg.Batch)
		if err != nil {
			return n, err
		}
		n += len(removed)
		s.forget(ctx, removed)
		if !more {
			break
		}
		if err := rest(ctx, time.Since(start)); err != nil {
			return n, err
		}
	}
	if n > 0 {
		if err := s.st.ReclaimSpace(ctx, conv, floor); err != nil {
			return n, err
		}
	}
	return n, nil
}

// floorFor computes conv's floor under p at now: the higher of last -
// Messages + 1 and the first seq sent at or after now - Days.
func (s *Service) floorFor(ctx context.Context, conv string, p Policy, now time.Time) (uint64, error) {
	last, err := s.st.LastSeq(ctx, conv)
	if err != nil || last == 0 {
		return 0, err
	}
	floor := uint64(0)
	if p.Messages > 0 && last > uint64(p.Messages) {
		floor = last - uint64(p.Messages) + 1
	}
	if p.Days > 0 {
		cutoff := now.Add(-time.Duration(p.Days) * 24 * time.Hour).UnixMilli()
		f, err := s.firstSince(ctx, conv, cutoff, last)
		if err != nil {
			return 0, err
		}
		floor = max(floor, f)
	}
	return floor, nil
}

// firstSince finds the first seq whose message was sent at or after cutoff
// (unix ms), by binary search over seqs (server times grow with seqs):
// O(log n) reads of one message each. last + 1 when every message is older.
func (s *Service) firstSince(ctx context.Context, conv string, cutoff int64, last uint64) (uint64, error) {
	lo, err := s.st.MessageFloor(ctx, conv)
	if err != nil {
		return 0, err
	}
	lo, hi := max(lo, 1), last+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		msgs, err := s.st.Messages(ctx, conv, mid-1, 1)
		if err != nil {
			return 0, err
		}
		if len(msgs) == 0 || msgs[0].Seq >= hi || msgs[0].ServerTime >= cutoff {
			hi = mid
		} else {
			lo = msgs[0].Seq + 1
		}
	}
	return lo, nil
}

// rest pauses between two batches for three times as long as the last one
// took (at most a second): a long sweep takes about a quarter of a core at
// most, and sends keep the rest of the machine meanwhile (resting as long
// as a batch took cost sends a fifth of their rate on two cores).
func rest(ctx context.Context, took time.Duration) error {
	t := time.NewTimer(min(3*took, time.Second))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// forget tells the search index about deleted messages. A failure is
// logged, not returned: searches leave out hits of messages that are gone
// (below the floor or no longer stored) whatever the index holds.
func (s *Service) forget(ctx context.Context, refs []store.MessageRef) {
	if s.cfg.Forget == nil || len(refs) == 0 {
		return
	}
	if err := s.cfg.Forget(ctx, refs); err != nil && !errors.Is(err, context.Canceled) {
		s.log.Warn("retention: the search index did not forget deleted messages", "n", len(refs), "err", err)
	}
}

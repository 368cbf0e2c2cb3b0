package search

import (
	"math"
	"testing"
	"time"
)

// TestFollowerShare: the follower's share of the time grows with its lag,
// from Share to all of it at MaxLag entries or MaxLagBytes, whichever
// comes first; at no lag, or when nobody sends, it does not rest.
func TestFollowerShare(t *testing.T) {
	f := &Follower{cfg: FollowerConfig{Share: 0.2, MaxLag: 1000, MaxLagBytes: 1 << 20}}
	f.entryBytes = 100 // 1 MiB is 10,486 entries: the entry bound comes first
	for _, c := range []struct {
		lag  uint64
		want float64
	}{{0, 0.2}, {500, 0.6}, {999, 0.2 + 0.8*0.999}, {1000, 1}, {5000, 1}} {
		if got := f.share(c.lag); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("share at lag %d = %v, want %v", c.lag, got, c.want)
		}
	}
	f.entryBytes = 4096 // now the byte bound comes first: 256 entries
	if got := f.share(128); math.Abs(got-0.6) > 1e-9 {
		t.Errorf("share at half the byte bound = %v, want 0.6", got)
	}
	if got := f.share(256); got != 1 {
		t.Errorf("share at the byte bound = %v, want 1", got)
	}

	f.entryBytes = 100
	took := 100 * time.Millisecond
	for _, c := range []struct {
		st   stepInfo
		want time.Duration
	}{
		{stepInfo{took: took, grew: true, lag: 1}, time.Duration(float64(took) * (1 - f.share(1)) / f.share(1))},
		{stepInfo{took: took, grew: true, lag: 500}, time.Duration(float64(took) * 0.4 / 0.6)},
		{stepInfo{took: took, grew: true, lag: 1000}, 0},      // at its bound
		{stepInfo{took: took, grew: false, lag: 500}, 0},      // nobody sends
		{stepInfo{took: took, grew: true, lag: 0}, 0},         // nothing left
		{stepInfo{took: took, grew: true, caughtUp: true}, 0}, // nothing read
	} {
		if got := f.rest(c.st); got != c.want {
			t.Errorf("rest after %+v = %v, want %v", c.st, got, c.want)
		}
	}
	if got := f.rest(stepInfo{took: time.Hour, grew: true, lag: 1}); got != maxRest {
		t.Errorf("rest after a batch of an hour = %v, want the cap %v", got, maxRest)
	}
	f.cfg.Share = 1
	if got := f.rest(stepInfo{took: took, grew: true, lag: 1}); got != 0 {
		t.Errorf("rest with a share of 1 = %v, want 0", got)
	}
}

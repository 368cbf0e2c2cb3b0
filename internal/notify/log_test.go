package notify

import (
	"slices"
	"testing"

	"github.com/parleyim/parley/internal/store"
)

// TestPushLogKeepsTheLastAttemptsNewestFirst: a device's log holds its
// last size attempts, newest first, before and after it wraps; the device
// logged first is forgotten first past the device bound.
func TestPushLogKeepsTheLastAttemptsNewestFirst(t *testing.T) {
	n := &Notifier{}
	n.plog.init(3, 2)
	dev := store.PushTarget{UserID: "u", DeviceID: "d"}
	seqs := func(uid, did string) []uint64 {
		var out []uint64
		for _, a := range n.Log(uid, did) {
			out = append(out, a.Seq)
		}
		return out
	}
	want := [][]uint64{{1}, {2, 1}, {3, 2, 1}, {4, 3, 2}, {5, 4, 3}, {6, 5, 4}, {7, 6, 5}}
	for i, w := range want {
		n.plog.add(dev, Attempt{Seq: uint64(i + 1)})
		if got := seqs("u", "d"); !slices.Equal(got, w) {
			t.Fatalf("after %d attempts the log is %v, want %v", i+1, got, w)
		}
	}
	n.plog.add(store.PushTarget{UserID: "v", DeviceID: "d"}, Attempt{Seq: 1})
	n.plog.add(store.PushTarget{UserID: "w", DeviceID: "d"}, Attempt{Seq: 1})
	if got := seqs("u", "d"); len(got) != 0 {
		t.Fatalf("the first device's log survived two more devices past a bound of two: %v", got)
	}
	if got := seqs("w", "d"); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("the newest device's log is %v", got)
	}
}

//go:build !race

package wordfilter

import "testing"

// TestCheckAllocs holds the message path's budget: a Check that matches
// nothing allocates only the matcher's iterator (two objects), whatever
// the script. (Not under -race, which adds allocations of its own.)
func TestCheckAllocs(t *testing.T) {
	f := mustNew(t, benchLists(2_000, true)...)
	for name, msg := range map[string]string{"en": msgEnglish, "zh": msgChinese, "short": msgShort} {
		f.Check(msg) // fill the pool
		// An average: a GC may empty the pool once and cost a refill.
		if n := testing.AllocsPerRun(50, func() { f.Check(msg) }); n >= 3 {
			t.Errorf("%s: %.1f allocations a Check, want 2", name, n)
		}
	}
}

package wordfilter

import (
	"fmt"
	"runtime"
	"testing"
)

// benchLists is a plausible configuration: 60 % of the entries refuse the
// message, 40 % are masked as whole words; both share one normalization.
func benchLists(n int, extraVariants bool) []List {
	w := genWords(n-1, 1)
	cut := n * 6 / 10
	lists := []List{
		{Name: "reject", Action: Reject, Words: w[:cut]},
		{Name: "mask", Action: Mask, Words: append(w[cut:len(w):len(w)], "darn"), WholeWords: true},
	}
	if extraVariants {
		lists = append(lists,
			List{Name: "leet", Action: Reject, Words: w[:100], Leet: true},
			List{Name: "spaced", Action: Reject, Words: w[100:200], IgnoreSeparators: true},
		)
	}
	return lists
}

func TestBenchMessages(t *testing.T) {
	f := mustNew(t, benchLists(10_000, true)...)
	for name, msg := range map[string]string{"en": msgEnglish, "zh": msgChinese, "short": msgShort} {
		if got := f.Check(msg); got.Action != None {
			t.Errorf("%s message matches: %+v", name, got)
		}
	}
	if got := f.Check(msgMasked); got.Action != Mask {
		t.Errorf("masked message: %+v", got)
	}
}

// BenchmarkCheck is Check on a chat message of about 200 bytes (and one of
// 40) against 10,000 generated entries (genWords).
//
// Measured on the 2-core development machine (go1.26, amd64, -cpu 1, six
// runs while other work ran on it), ns/op, B/op, allocs/op:
//
//	en, no match                 4,300–5,000 ns  128 B  2 allocs
//	en, 40 bytes, no match         930–1,150 ns  128 B  2 allocs
//	zh, no match                 3,400–4,400 ns  128 B  2 allocs
//	en, one word masked          5,100–5,800 ns  344 B  4 allocs
//	en, no match, 3 variants    11,100–13,300 ns  128 B  2 allocs
//
// The matcher's iterator is the two allocations (a match adds one, and the
// masked string one); the normalized text and its offsets come from a
// pool. The matcher is about 80 % of the time; each further normalization
// variant (Leet, IgnoreSeparators) scans the text once more.
func BenchmarkCheck(b *testing.B) {
	for _, bc := range []struct {
		name   string
		msg    string
		extras bool
		want   Action
	}{
		{"en-nomatch", msgEnglish, false, None},
		{"en-short-nomatch", msgShort, false, None},
		{"zh-nomatch", msgChinese, false, None},
		{"en-masked", msgMasked, false, Mask},
		{"en-nomatch-3variants", msgEnglish, true, None},
	} {
		f := mustNew(b, benchLists(10_000, bc.extras)...)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(bc.msg)))
			b.ReportAllocs()
			for b.Loop() {
				if r := f.Check(bc.msg); r.Action != bc.want {
					b.Fatalf("got %+v", r)
				}
			}
		})
	}
}

// BenchmarkNew builds filters from 10,000 and 100,000 generated entries;
// MB-heap is what the built filter keeps (live heap after GC, the lists it
// was given excluded), B/op all it allocated while building.
//
// Measured as BenchmarkCheck (ten runs):
//
//	              time          kept          allocated while building
//	10k entries   0.08–0.17 s    7.3 MB-heap   33 MB,  225k allocs
//	100k entries  1.0–2.7 s     66 MB-heap    317 MB, 2.0M allocs
//
// The matcher's states are 93 % of what is kept; most of what is allocated
// is the matcher builder's garbage. The worst the bounds allow,
// MaxPatternBytes of random 256-byte entries, took 4.7 s and 207 MB.
func BenchmarkNew(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			lists := benchLists(n, false)
			var keep *Filter
			b.ReportAllocs()
			before := liveHeap()
			for b.Loop() {
				keep = nil
				var err error
				if keep, err = New(lists); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(liveHeap()-before)/1e6, "MB-heap")
			runtime.KeepAlive(keep)
		})
	}
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

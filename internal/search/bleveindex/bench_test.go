package bleveindex

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/search"
)

// corpus makes n messages in convs conversations: words from a Zipf-like
// vocabulary of 5,000, every tenth message in Chinese, a minute apart.
// Conversations g:NNNN are groups; with direct set they are 1:1 instead,
// p:uK:vNNNN between user uK (K = NNNN/200 mod 5) and a peer, so each uK is in
// convs/5 of them, as a sender of the search benchmark is.
func corpus(n, convs int, direct ...bool) []search.Doc {
	r := rand.New(rand.NewPCG(1, 2))
	zipf := rand.NewZipf(r, 1.1, 1, 4999)
	han := []rune("我们明天在北京西站见面东京塔行上海大学生活工作时间问题朋友电话地址")
	docs := make([]search.Doc, n)
	for i := range docs {
		var b strings.Builder
		if i%10 == 9 {
			for range 8 + r.IntN(16) {
				b.WriteRune(han[r.IntN(len(han))])
			}
		} else {
			for w := range 4 + r.IntN(10) {
				if w > 0 {
					b.WriteByte(' ')
				}
				fmt.Fprintf(&b, "w%d", zipf.Uint64())
			}
		}
		c := i % convs
		docs[i] = search.Doc{ConversationID: fmt.Sprintf("g:%04d", c), Seq: uint64(i/convs + 1),
			From: fmt.Sprintf("u%d", r.IntN(200)), Text: b.String(), Time: 1_700_000_000_000 + int64(i)*60_000}
		if len(direct) > 0 && direct[0] {
			u, v := fmt.Sprintf("u%d", c/200%5), fmt.Sprintf("v%04d", c)
			docs[i].ConversationID, docs[i].From, docs[i].Members = "p:"+u+":"+v, u, []string{u, v}
		}
	}
	return docs
}

func indexAll(b *testing.B, ix *Index, docs []search.Doc) {
	indexBatches(b, ix, docs, 4096) // the follower's default batch
}

func indexBatches(b *testing.B, ix *Index, docs []search.Doc, batch int) {
	for i := 0; i < len(docs); i += batch {
		var cs []search.Change
		for j := i; j < min(i+batch, len(docs)); j++ {
			cs = append(cs, search.Change{Put: &docs[j]})
		}
		if err := ix.Apply(context.Background(), cs, uint64(i+len(cs))); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkIndex: messages indexed per second in batches, as the follower
// applies them, into a new index.
func BenchmarkIndex(b *testing.B) {
	docs := corpus(100_000, 1000, true)
	for _, batch := range []int{1024, 4096, 16384} {
		b.Run(fmt.Sprint(batch), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				ix := openTemp(b)
				b.StartTimer()
				indexBatches(b, ix, docs, batch)
				b.StopTimer()
				_ = ix.Close()
				b.StartTimer()
			}
			b.ReportMetric(float64(len(docs)*b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkIndexSegments: Bleve's defaults (each batch persisted as its
// own segment before Apply returns) against batches not waited for and a
// persister that naps, merging segments in memory before it writes them
// (fewer, larger segments). CPU of the whole process per message, the
// background merging until Close included; the segment files left.
func BenchmarkIndexSegments(b *testing.B) {
	docs := corpus(100_000, 1000, true)
	for _, c := range []struct {
		name string
		cfg  map[string]any
	}{
		{"default", nil},
		{"nap-1s", map[string]any{"unsafe_batch": true,
			"scorchPersisterOptions": map[string]any{"PersisterNapTimeMSec": 1000, "PersisterNapUnderNumFiles": 1000}}},
	} {
		for _, batch := range []int{1024, 4096} {
			b.Run(fmt.Sprintf("%s/%d", c.name, batch), func(b *testing.B) {
				files := 0
				var cpu time.Duration
				for range b.N {
					b.StopTimer()
					dir := b.TempDir() + "/search"
					ix, err := Open(dir, Options{Logger: quiet, scorch: c.cfg})
					if err != nil {
						b.Fatal(err)
					}
					c0 := processCPU()
					b.StartTimer()
					indexBatches(b, ix, docs, batch)
					_ = ix.Close()
					b.StopTimer()
					cpu += processCPU() - c0
					ents, _ := os.ReadDir(dir + "/store")
					files += len(ents)
					b.StartTimer()
				}
				b.ReportMetric(float64(len(docs)*b.N)/b.Elapsed().Seconds(), "msgs/s")
				b.ReportMetric(float64(cpu.Microseconds())/float64(len(docs)*b.N), "cpu-µs/msg")
				b.ReportMetric(float64(files)/float64(b.N), "files")
			})
		}
	}
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkSearch: one query's latency on 100,000 messages in 1,000
// conversations.
func BenchmarkSearch(b *testing.B) {
	docs := corpus(100_000, 1000)
	ix := openTemp(b)
	defer ix.Close()
	indexAll(b, ix, docs)
	ranges := func(n int, bounded bool) []search.Range {
		rs := make([]search.Range, n)
		for i := range rs {
			rs[i] = search.Range{ConversationID: fmt.Sprintf("g:%04d", i), From: 1}
			if bounded {
				rs[i].From = 10 // joined later: the newest are visible
			}
		}
		return rs
	}
	for _, c := range []struct {
		name string
		q    search.Query
	}{
		{"common-word/50-convs", search.Query{Text: "w1", Ranges: ranges(50, false), Limit: 20}},
		{"common-word/1000-convs", search.Query{Text: "w1", Ranges: ranges(1000, false), Limit: 20}},
		{"common-word/1000-bounded", search.Query{Text: "w1", Ranges: ranges(1000, true), Limit: 20}},
		{"rare-word/1000-convs", search.Query{Text: "w3000", Ranges: ranges(1000, false), Limit: 20}},
		{"two-words/1000-convs", search.Query{Text: "w2 w3", Ranges: ranges(1000, false), Limit: 20}},
		{"phrase/1000-convs", search.Query{Text: "w1 w2", Phrase: true, Ranges: ranges(1000, false), Limit: 20}},
		{"chinese-2/1000-convs", search.Query{Text: "北京", Ranges: ranges(1000, false), Limit: 20}},
		{"chinese-1/1000-convs", search.Query{Text: "京", Ranges: ranges(1000, false), Limit: 20}},
		{"common-word/1-conv", search.Query{Text: "w1", Ranges: ranges(1, false), Limit: 20}},
	} {
		b.Run(c.name, func(b *testing.B) { benchQuery(b, ix, c.q) })
	}
}

// BenchmarkSearchDirect: one query's latency on 100,000 messages in 1,000
// 1:1 conversations, as a user in 200 of them (the search benchmark's
// shape).
func BenchmarkSearchDirect(b *testing.B) {
	docs := corpus(100_000, 1000, true)
	ix := openTemp(b)
	defer ix.Close()
	indexAll(b, ix, docs)
	var rs []search.Range
	for c := range 200 { // u0's
		rs = append(rs, search.Range{ConversationID: fmt.Sprintf("p:u0:v%04d", c), From: 1, Member: true})
	}
	// The same ranges looked up one conversation at a time.
	byConv := slices.Clone(rs)
	for i := range byConv {
		byConv[i].Member = false
	}
	for _, c := range []struct {
		name string
		q    search.Query
	}{
		{"common-word/200-convs", search.Query{Text: "w1", UserID: "u0", Ranges: rs, Limit: 20}},
		{"common-word/200-convs-by-conv", search.Query{Text: "w1", UserID: "u0", Ranges: byConv, Limit: 20}},
		{"rare-word/200-convs-by-conv", search.Query{Text: "w3000", UserID: "u0", Ranges: byConv, Limit: 20}},
		{"rare-word/200-convs", search.Query{Text: "w3000", UserID: "u0", Ranges: rs, Limit: 20}},
		{"phrase/200-convs", search.Query{Text: "w1 w2", Phrase: true, UserID: "u0", Ranges: rs, Limit: 20}},
		{"chinese-2/200-convs", search.Query{Text: "北京", UserID: "u0", Ranges: rs, Limit: 20}},
		{"common-word/1-conv", search.Query{Text: "w1", UserID: "u0", Ranges: rs[:1], Limit: 20}},
	} {
		b.Run(c.name, func(b *testing.B) { benchQuery(b, ix, c.q) })
	}
}

func benchQuery(b *testing.B, ix *Index, q search.Query) {
	hits := 0
	for range b.N {
		r, err := ix.Search(context.Background(), q)
		if err != nil {
			b.Fatal(err)
		}
		hits = len(r.Hits)
	}
	if hits == 0 {
		b.Fatalf("%q found nothing", q.Text)
	}
}

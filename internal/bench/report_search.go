package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// SearchReport is the search scenario's result (JSON "search").
//
//	search_off                 the server keeps no index: only the load ran
//	senders, conversations     -t and --convs; seed --seed
//	messages                   text messages stored (acked) during the load
//	load_seconds, sends_per_sec  the load: first send to last ack, and messages / that
//	server_cpu_{load,catch_up}_percent  the server's CPU in each phase (100 = one core; 0: not sampled)
//	indexed_during_load        index entries applied (parley_search_indexed_total) from the first send to the last ack
//	indexed_per_sec_load       those / the load's seconds: indexing while sends go on
//	indexed_per_sec_after      entries applied per second from the last ack until the lag was 0
//	indexed_total              entries applied from the first send until caught up
//	lag_at_load_end, lag_peak  parley_search_index_lag (store log positions) at the last ack, and its highest sample
//	caught_up, catch_up_seconds  whether the lag reached 0 (within --drain), and how long after the last ack
//	index_series               one point a second: {t, indexed_per_sec, lag}
//	verify                     rare-word searches checked against the generator: see SearchVerify
//	query_steps                the query phases, one per --searchers number: see QueryStep
//	data_dir, search_bytes, store_bytes  DATA/search and DATA/store on disk (allocated bytes) at the end
//	search_bytes_per_million, store_bytes_per_million  the same per million messages stored
type SearchReport struct {
	SearchOff          bool          `json:"search_off"`
	Senders            int           `json:"senders"`
	Conversations      int           `json:"conversations"`
	Seed               uint64        `json:"seed"`
	Messages           uint64        `json:"messages"`
	LoadSeconds        float64       `json:"load_seconds"`
	SendsPerSec        float64       `json:"sends_per_sec"`
	ServerCPULoad      float64       `json:"server_cpu_load_percent"`
	ServerCPUCatchUp   float64       `json:"server_cpu_catch_up_percent"`
	IndexedDuringLoad  uint64        `json:"indexed_during_load"`
	IndexedPerSecLoad  float64       `json:"indexed_per_sec_load"`
	IndexedPerSecAfter float64       `json:"indexed_per_sec_after"`
	IndexedTotal       uint64        `json:"indexed_total"`
	LagAtLoadEnd       uint64        `json:"lag_at_load_end"`
	LagPeak            uint64        `json:"lag_peak"`
	CaughtUp           bool          `json:"caught_up"`
	CatchUpSeconds     float64       `json:"catch_up_seconds"`
	Series             []IndexSample `json:"index_series"`
	Verify             SearchVerify  `json:"verify"`
	Steps              []*QueryStep  `json:"query_steps"`
	DataDir            string        `json:"data_dir,omitempty"`
	SearchBytes        uint64        `json:"search_bytes,omitempty"`
	StoreBytes         uint64        `json:"store_bytes,omitempty"`
	SearchPerMillion   float64       `json:"search_bytes_per_million,omitempty"`
	StorePerMillion    float64       `json:"store_bytes_per_million,omitempty"`
}

// QueryStep is one query phase: searchers concurrent searchers for
// --duration (start_s to end_s, seconds since the load began).
//
//	queries           per kind (word, rare, phrase, cjk): see SearchKind
//	queries_per_sec   answered queries of all kinds / the phase's seconds
//	latency_summary, waited_summary  all kinds together
//	server_cpu_percent  the server's CPU in the phase (100 = one core)
type QueryStep struct {
	Searchers      int                    `json:"searchers"`
	StartS         float64                `json:"start_s"`
	EndS           float64                `json:"end_s"`
	Kinds          map[string]*SearchKind `json:"queries"`
	QueriesPerSec  float64                `json:"queries_per_sec"`
	LatencySummary Summary                `json:"latency_summary"`
	WaitedSummary  Summary                `json:"waited_summary"`
	ServerCPU      float64                `json:"server_cpu_percent"`
}

// IndexSample is one second of indexing: entries applied within it and
// the lag at its end.
type IndexSample struct {
	T             float64 `json:"t"`
	IndexedPerSec float64 `json:"indexed_per_sec"`
	Lag           uint64  `json:"lag"`
}

// SearchVerify is the check of the results: every sender searched every
// rare word (all pages, 100 hits a page); the distinct hits must number
// the sender's acked messages holding the word (up to those whose send got
// no answer), each in one of the sender's conversations and from it.
type SearchVerify struct {
	Searches   uint64         `json:"searches"`   // (sender, word) pairs checked
	Expected   uint64         `json:"expected"`   // hits the acked messages hold, summed
	Hits       uint64         `json:"hits"`       // distinct hits found, summed
	Mismatched uint64         `json:"mismatched"` // pairs whose hits were not as expected
	Unreadable uint64         `json:"unreadable"` // hits outside the searcher's conversations or not from it
	Refused    uint64         `json:"refused"`    // TOO_MANY_REQUESTS answers (retried)
	Seconds    float64        `json:"seconds"`
	Samples    []VerifySample `json:"samples"`
}

// VerifySample is one (sender, rare word) check.
type VerifySample struct {
	User        string `json:"user"`
	Query       string `json:"query"`
	Word        string `json:"word"`
	Expected    uint64 `json:"expected"`
	ExpectedMax uint64 `json:"expected_max"`
	Got         uint64 `json:"got"`
}

// SearchKind is one kind of query of the query phase.
//
//	answered     queries answered (after any retries)
//	refused      TOO_MANY_REQUESTS answers, each retried after 2–10 ms
//	abandoned    queries still refused when the phase ended
//	errors, codes  queries that failed otherwise, by outcome
//	hits, hits_avg  hits returned (a page is at most 20)
//	unreadable   hits outside the searcher's conversations (must be 0)
//	latency      the answered attempt: request → results
//	waited       as the user waits: first attempt → results, retries included
type SearchKind struct {
	Answered       uint64            `json:"answered"`
	Refused        uint64            `json:"refused"`
	Abandoned      uint64            `json:"abandoned"`
	Errors         uint64            `json:"errors"`
	Codes          map[string]uint64 `json:"codes,omitempty"`
	Hits           uint64            `json:"hits"`
	HitsAvg        float64           `json:"hits_avg"`
	Unreadable     uint64            `json:"unreadable"`
	PerSec         float64           `json:"per_sec"`
	Latency        *Histogram        `json:"latency"`
	LatencySummary Summary           `json:"latency_summary"`
	Waited         *Histogram        `json:"waited"`
	WaitedSummary  Summary           `json:"waited_summary"`
}

// phaseCPU is the server's mean CPU over the report's seconds within
// [a, b] (series entry i covers (i, i+1]); 0 when none was sampled.
func phaseCPU(series []Sample, a, b float64) float64 {
	var sum float64
	var n int
	for i, s := range series {
		mid := float64(i) + 0.5
		if mid >= a && mid <= b+0.5 && s.ServerCPUPercent > 0 {
			sum += s.ServerCPUPercent
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func (x *SearchReport) finalize(r *Report) {
	if x.LoadSeconds > 0 {
		x.SendsPerSec = float64(x.Messages) / x.LoadSeconds
	}
	x.ServerCPULoad = phaseCPU(r.Series, 0, x.LoadSeconds)
	if x.CaughtUp {
		x.ServerCPUCatchUp = phaseCPU(r.Series, x.LoadSeconds, x.LoadSeconds+x.CatchUpSeconds)
	}
	var errs, unreadable uint64
	for _, st := range x.Steps {
		qs := st.EndS - st.StartS
		st.ServerCPU = phaseCPU(r.Series, st.StartS, st.EndS)
		var answered uint64
		all, allW := NewHistogram(), NewHistogram()
		for _, k := range st.Kinds {
			k.LatencySummary, k.WaitedSummary = summarize(k.Latency), summarize(k.Waited)
			if qs > 0 {
				k.PerSec = float64(k.Answered) / qs
			}
			if k.Answered > 0 {
				k.HitsAvg = float64(k.Hits) / float64(k.Answered)
			}
			all.Merge(k.Latency)
			allW.Merge(k.Waited)
			answered += k.Answered
			errs += k.Errors
			unreadable += k.Unreadable
		}
		st.LatencySummary, st.WaitedSummary = summarize(all), summarize(allW)
		if qs > 0 {
			st.QueriesPerSec = float64(answered) / qs
		}
	}
	if x.Messages > 0 {
		x.SearchPerMillion = float64(x.SearchBytes) * 1e6 / float64(x.Messages)
		x.StorePerMillion = float64(x.StoreBytes) * 1e6 / float64(x.Messages)
	}
	if x.SearchOff {
		return
	}
	fail := func(n uint64, format string) {
		if n > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf(format, n))
		}
	}
	if !x.CaughtUp {
		r.Failures = append(r.Failures, fmt.Sprintf("the index had not caught up %.0f s after the last send (--drain)", x.CatchUpSeconds))
		return
	}
	if x.Verify.Searches == 0 {
		r.Failures = append(r.Failures, "no result was verified")
	}
	fail(x.Verify.Mismatched, "%d rare-word searches found other hits than the generator put in the sender's messages")
	fail(x.Verify.Unreadable+unreadable, "%d hits outside the searcher's conversations")
	fail(errs, "%d searches failed (not TOO_MANY_REQUESTS)")
}

func (x *SearchReport) writeText(b *strings.Builder) {
	fmt.Fprintf(b, "\nSearch: load (%d senders, %d conversations, texts in %d languages, seed %d):\n", x.Senders, x.Conversations, len(searchLangs), x.Seed)
	fmt.Fprintf(b, "  Messages stored:\t%d in %.1f s: %.1f sends/s", x.Messages, x.LoadSeconds, x.SendsPerSec)
	if x.ServerCPULoad > 0 {
		fmt.Fprintf(b, ", server CPU %.0f %% (%.0f sends/s per core)", x.ServerCPULoad, x.SendsPerSec*100/x.ServerCPULoad)
	}
	b.WriteString("\n")
	if x.SearchOff {
		b.WriteString("  Search index:\toff on this server (no index; nothing to query)\n")
	} else {
		b.WriteString("\nSearch: index (the server's /metrics: parley_search_indexed_total, parley_search_index_lag):\n")
		fmt.Fprintf(b, "  Indexed while sends went on:\t%d entries, %.1f/s\n", x.IndexedDuringLoad, x.IndexedPerSecLoad)
		fmt.Fprintf(b, "  Lag:\t%d at the last send, peak %d\n", x.LagAtLoadEnd, x.LagPeak)
		if x.CaughtUp {
			fmt.Fprintf(b, "  Caught up:\t%.1f s after the last send, indexing %.1f/s meanwhile", x.CatchUpSeconds, x.IndexedPerSecAfter)
			if x.ServerCPUCatchUp > 0 {
				fmt.Fprintf(b, ", server CPU %.0f %%", x.ServerCPUCatchUp)
			}
			b.WriteString("\n")
		} else {
			fmt.Fprintf(b, "  Caught up:\tNO, still behind %.0f s after the last send\n", x.CatchUpSeconds)
		}
		fmt.Fprintf(b, "  Entries indexed in all:\t%d\n", x.IndexedTotal)
		if len(x.Series) > 0 {
			b.WriteString("  Each second (t: indexed/s, lag):\n   ")
			step := max(1, (len(x.Series)+119)/120)
			for i := 0; i < len(x.Series); i += step {
				s := x.Series[i]
				fmt.Fprintf(b, " %.1fs:%.0f,%d", s.T, s.IndexedPerSec, s.Lag)
				if (i/step)%8 == 7 {
					b.WriteString("\n   ")
				}
			}
			b.WriteString("\n")
		}
		v := x.Verify
		b.WriteString("\nSearch: verification (each sender searches each rare word, every page):\n")
		fmt.Fprintf(b, "  Searches:\t%d in %.1f s (%d TOO_MANY_REQUESTS, retried)\n", v.Searches, v.Seconds, v.Refused)
		fmt.Fprintf(b, "  Hits:\t%d found, %d expected from the acked messages; %d searches mismatched; %d hits outside the searcher's conversations\n",
			v.Hits, v.Expected, v.Mismatched, v.Unreadable)
		for i, s := range v.Samples {
			if i >= 8 && s.Got >= s.Expected && s.Got <= s.ExpectedMax {
				continue
			}
			rng := fmt.Sprint(s.Expected)
			if s.ExpectedMax != s.Expected {
				rng = fmt.Sprintf("%d–%d", s.Expected, s.ExpectedMax)
			}
			fmt.Fprintf(b, "  %s %q (in the messages: %s):\texpected %s, found %d\n", s.User, s.Query, s.Word, rng, s.Got)
		}
		for _, st := range x.Steps {
			st.writeText(b)
		}
	}
	if x.DataDir != "" {
		b.WriteString("\nSearch: on disk (allocated bytes, at the end of the run):\n")
		fmt.Fprintf(b, "  DATA/search:\t%s, %s per million messages\n", mib(x.SearchBytes), mib(uint64(x.SearchPerMillion)))
		fmt.Fprintf(b, "  DATA/store:\t%s, %s per million messages (users, tokens, conversations and preallocated logs included: small runs overstate it)\n", mib(x.StoreBytes), mib(uint64(x.StorePerMillion)))
	}
}

func (st *QueryStep) writeText(b *strings.Builder) {
	fmt.Fprintf(b, "\nSearch: queries (%d searchers, one query in flight each, back to back, %.1f s, 20 hits a page):\n", st.Searchers, st.EndS-st.StartS)
	b.WriteString("  kind\tanswered\tper sec\thits avg\tp50\tp99\tmax\trefused (TOO_MANY_REQUESTS)\terrors\n")
	kinds := slices.Clone(searchKinds)
	for _, k := range slices.Sorted(maps.Keys(st.Kinds)) {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	var ans, ref, errs uint64
	for _, name := range kinds {
		k := st.Kinds[name]
		if k == nil {
			continue
		}
		ans, ref, errs = ans+k.Answered, ref+k.Refused, errs+k.Errors
		s := k.LatencySummary
		fmt.Fprintf(b, "  %s\t%d\t%.1f\t%.1f\t%.1f ms\t%.1f ms\t%.1f ms\t%d\t%d\n", name, k.Answered, k.PerSec, k.HitsAvg,
			pct(s, 50)*1e3, pct(s, 99)*1e3, s.SlowestS*1e3, k.Refused, k.Errors)
	}
	as := st.LatencySummary
	fmt.Fprintf(b, "  all\t%d\t%.1f\t\t%.1f ms\t%.1f ms\t%.1f ms\t%d\t%d\n", ans, st.QueriesPerSec, pct(as, 50)*1e3, pct(as, 99)*1e3, as.SlowestS*1e3, ref, errs)
	if ref > 0 {
		b.WriteString("  As the user waits (first attempt → results, retries after TOO_MANY_REQUESTS included):\n")
		for _, name := range kinds {
			if k := st.Kinds[name]; k != nil {
				s := k.WaitedSummary
				fmt.Fprintf(b, "  %s\tp50 %.1f ms\tp99 %.1f ms\tmax %.1f ms\n", name, pct(s, 50)*1e3, pct(s, 99)*1e3, s.SlowestS*1e3)
			}
		}
		ws := st.WaitedSummary
		fmt.Fprintf(b, "  all\tp50 %.1f ms\tp99 %.1f ms\tmax %.1f ms\n", pct(ws, 50)*1e3, pct(ws, 99)*1e3, ws.SlowestS*1e3)
	}
	if st.ServerCPU > 0 {
		fmt.Fprintf(b, "  Server CPU while querying:\t%.0f %%\n", st.ServerCPU)
	}
}

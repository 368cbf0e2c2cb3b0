package bench

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketBoundsHoldTheirValues(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		v := uint64(math.Exp(r.Float64() * 40)) // 1 ns .. ~2.4e17 ns
		i := bucketOf(v)
		lo, hi := bucketBounds(i)
		if v < lo || v > hi {
			if i != numBuckets-1 { // the last bucket clamps
				t.Fatalf("v=%d in bucket %d [%d,%d]", v, i, lo, hi)
			}
		}
		if lo > 0 && float64(hi-lo)/float64(lo) > 1.0/subCount {
			t.Fatalf("bucket %d [%d,%d] wider than 1/%d", i, lo, hi, subCount)
		}
	}
	for v := range uint64(1000) { // exact below 128, then contiguous
		lo, hi := bucketBounds(bucketOf(v))
		if v < lo || v > hi {
			t.Fatalf("v=%d in [%d,%d]", v, lo, hi)
		}
	}
}

// exactPercentile is the nearest-rank percentile of sorted values.
func exactPercentile(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q / 100 * float64(len(sorted))))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

func TestPercentilesWithinOnePercent(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	h := NewHistogram()
	var vals []time.Duration
	var sum time.Duration
	for range 100000 {
		// Log-normal around 2 ms with a long tail, like request latencies.
		v := time.Duration(math.Exp(r.NormFloat64()*1.2) * float64(2*time.Millisecond))
		vals = append(vals, v)
		sum += v
		h.Record(v)
	}
	slices.Sort(vals)
	for _, q := range append(percentiles, 0, 1, 100) {
		got, want := h.Percentile(q), exactPercentile(vals, q)
		if rel := math.Abs(float64(got-want)) / float64(want); rel > 0.01 {
			t.Errorf("p%v = %v, exact %v (%.2f%% off)", q, got, want, rel*100)
		}
	}
	if h.Min() != vals[0] || h.Max() != vals[len(vals)-1] {
		t.Errorf("min/max %v/%v, want %v/%v", h.Min(), h.Max(), vals[0], vals[len(vals)-1])
	}
	if h.Mean() != sum/time.Duration(len(vals)) {
		t.Errorf("mean %v, want %v", h.Mean(), sum/time.Duration(len(vals)))
	}
	if h.Count() != uint64(len(vals)) {
		t.Errorf("count %d", h.Count())
	}
}

func TestEmptyAndTinyHistograms(t *testing.T) {
	h := NewHistogram()
	if h.Percentile(50) != 0 || h.Min() != 0 || h.Max() != 0 || h.Mean() != 0 {
		t.Fatal("empty histogram should report zeros")
	}
	h.Record(-5) // clock steps: counted as 0
	h.Record(7 * time.Microsecond)
	if h.Percentile(50) != 0 || h.Percentile(100) != 7*time.Microsecond {
		t.Fatalf("p50 %v p100 %v", h.Percentile(50), h.Percentile(100))
	}
}

func TestMergeEqualsRecordingEverything(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	a, b, all := NewHistogram(), NewHistogram(), NewHistogram()
	for i := range 50000 {
		v := time.Duration(r.ExpFloat64() * float64(time.Millisecond))
		if i%3 == 0 {
			a.Record(v)
		} else {
			b.Record(v)
		}
		all.Record(v)
	}
	// Through JSON, as worker reports travel.
	var a2, b2 Histogram
	for _, p := range []struct {
		h   *Histogram
		dst *Histogram
	}{{a, &a2}, {b, &b2}} {
		j, err := json.Marshal(p.h)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(j, p.dst); err != nil {
			t.Fatal(err)
		}
	}
	m := NewHistogram()
	m.Merge(&a2)
	m.Merge(&b2)
	if m.Count() != all.Count() || m.Min() != all.Min() || m.Max() != all.Max() || m.Mean() != all.Mean() {
		t.Fatalf("merged count/min/max/mean %d/%v/%v/%v, want %d/%v/%v/%v",
			m.Count(), m.Min(), m.Max(), m.Mean(), all.Count(), all.Min(), all.Max(), all.Mean())
	}
	for _, q := range percentiles {
		if m.Percentile(q) != all.Percentile(q) {
			t.Errorf("p%v: merged %v, direct %v", q, m.Percentile(q), all.Percentile(q))
		}
	}
	if !slices.Equal(m.Buckets(), all.Buckets()) {
		t.Error("merged buckets differ")
	}
}

func TestHistogramJSONRejectsOtherLayouts(t *testing.T) {
	var h Histogram
	if err := json.Unmarshal([]byte(`{"sub_bucket_bits":5,"count":0,"buckets":[]}`), &h); err == nil {
		t.Error("accepted a different layout")
	}
	if err := json.Unmarshal([]byte(`{"sub_bucket_bits":7,"count":2,"buckets":[[3,1]]}`), &h); err == nil {
		t.Error("accepted a count that does not match the buckets")
	}
	if err := json.Unmarshal([]byte(`{"sub_bucket_bits":7,"count":1,"buckets":[[99999999,1]]}`), &h); err == nil {
		t.Error("accepted an out-of-range bucket")
	}
}

func TestSpreadCountsEverything(t *testing.T) {
	h := NewHistogram()
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Millisecond)
	}
	marks, counts := h.spread(4)
	var n uint64
	for _, c := range counts {
		n += c
	}
	if n != 1000 || len(marks) != 5 || marks[0] != time.Millisecond || marks[4] != time.Second || counts[0] != 1 {
		t.Fatalf("marks %v counts %v", marks, counts)
	}
}

func TestReportMerge(t *testing.T) {
	mk := func(req uint64, lat time.Duration, lost uint64, series []Sample) *Report {
		r := &Report{Processes: 1, Requests: req, OK: req, Latency: NewHistogram(), Status: map[string]uint64{"ok": req},
			TotalSeconds: float64(req) / 100, Delivery: &Delivery{Acked: req, Expected: req, Received: req - lost, Lost: lost, E2E: NewHistogram()},
			Series: series}
		for range req {
			r.Latency.Record(lat)
			r.Delivery.E2E.Record(2 * lat)
		}
		return r
	}
	a := mk(100, time.Millisecond, 0, []Sample{{T: 1, Requests: 60, Connected: 2}, {T: 1.5, Requests: 40, Connected: 2}})
	b := mk(300, 3*time.Millisecond, 1, []Sample{{T: 1, Requests: 100, Connected: 3}, {T: 2, Requests: 150}, {T: 2.7, Requests: 50}})
	a.merge(b)
	a.finalize()
	if a.Processes != 2 || a.Requests != 400 || a.Status["ok"] != 400 || a.TotalSeconds != 3 || a.RequestsPerSec != 400.0/3 {
		t.Fatalf("merged %+v", a)
	}
	if a.Latency.Count() != 400 || a.LatencySummary.FastestS != 0.001 || a.LatencySummary.SlowestS != 0.003 {
		t.Fatalf("latency %+v", a.LatencySummary)
	}
	if a.Delivery.Lost != 1 || a.Delivery.Expected != 400 || a.Delivery.E2E.Count() != 400 || a.Passed || len(a.Failures) != 1 {
		t.Fatalf("delivery %+v failures %v", a.Delivery, a.Failures)
	}
	if len(a.Series) != 3 || a.Series[0].Requests != 160 || a.Series[0].Connected != 5 || a.Series[1].Requests != 190 || a.Series[2].T != 2.7 {
		t.Fatalf("series %+v", a.Series)
	}
}

func TestStreamChecks(t *testing.T) {
	s := &stream{online: true}
	for k := uint64(1); k <= 5; k++ {
		s.onAck(k, k*2)
	}
	s.onReceive(1, 2)
	s.onReceive(3, 6)
	s.onReceive(2, 4) // late: out of order
	s.onReceive(3, 6) // again: duplicate
	d := tally([]*stream{s})
	if d.Expected != 5 || d.Received != 3 || d.Lost != 2 || d.Duplicated != 1 || d.OutOfOrder != 1 || d.AckOutOfOrder != 0 {
		t.Fatalf("%+v", d)
	}
	s.onAck(6, 3) // a seq below the previous ack's
	if tally([]*stream{s}).AckOutOfOrder != 1 {
		t.Fatal("ack disorder not counted")
	}
	p := makePayload(nil, 64, 7, 42)
	if id, k, at, ok := parsePayload(p); !ok || id != 7 || k != 42 || time.Since(time.Unix(0, at)) > time.Minute {
		t.Fatalf("payload %v %v %v %v", id, k, at, ok)
	}
	if _, _, _, ok := parsePayload([]byte("hello, not a bench message")); ok {
		t.Fatal("parsed a foreign payload")
	}
}

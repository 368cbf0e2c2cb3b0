package bench

import (
	"encoding/json"
	"errors"
	"math"
	"math/bits"
	"sort"
	"sync/atomic"
	"time"
)

// Histogram records durations in log-linear buckets, HDR-style: values below
// 2^subBits ns are exact, larger ones keep subBits bits of mantissa, so any
// recorded value is off by less than 1/128 (0.8%) of itself. The layout is
// fixed, so histograms from different processes merge by adding counts.
//
// Record is safe for concurrent use (atomics, no lock): every load goroutine
// records into one shared histogram without contention worth measuring.
type Histogram struct {
	counts [numBuckets]atomic.Uint64
	count  atomic.Uint64
	sum    atomic.Uint64 // ns; overflows only after ~584 years of latency
	min    atomic.Uint64 // ns; math.MaxUint64 while empty
	max    atomic.Uint64
}

const (
	subBits    = 7
	subCount   = 1 << subBits
	maxShift   = 40 // values >= 2^(maxShift+subBits) ns (~39 h) are clamped
	numBuckets = (maxShift + 2) * subCount
)

// NewHistogram returns an empty histogram.
func NewHistogram() *Histogram {
	h := &Histogram{}
	h.min.Store(math.MaxUint64)
	return h
}

// bucketOf maps a value in ns to its bucket index.
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(v) - 1 - subBits // >= 0
	if shift > maxShift {
		return numBuckets - 1
	}
	sub := int(v>>uint(shift)) - subCount // in [0, subCount)
	return (shift+1)*subCount + sub
}

// bucketBounds returns the lowest and highest value a bucket holds, in ns.
func bucketBounds(i int) (lo, hi uint64) {
	if i < subCount {
		return uint64(i), uint64(i)
	}
	shift := uint(i/subCount - 1)
	sub := uint64(i % subCount)
	lo = (subCount + sub) << shift
	return lo, lo + (1 << shift) - 1
}

// Record adds one duration (negative durations count as 0).
func (h *Histogram) Record(d time.Duration) {
	v := uint64(max(d, 0))
	h.counts[bucketOf(v)].Add(1)
	h.count.Add(1)
	h.sum.Add(v)
	for {
		m := h.min.Load()
		if v >= m || h.min.CompareAndSwap(m, v) {
			break
		}
	}
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			break
		}
	}
}

// recordBatch adds values in ns, as one goroutine collected them over a
// burst: an atomic add per value's bucket, the totals once (receivers of a
// big fan-out would otherwise contend on count and sum for every message).
func (h *Histogram) recordBatch(vs []uint64) {
	if len(vs) == 0 {
		return
	}
	var sum uint64
	lo, hi := uint64(math.MaxUint64), uint64(0)
	for _, v := range vs {
		h.counts[bucketOf(v)].Add(1)
		sum += v
		lo, hi = min(lo, v), max(hi, v)
	}
	h.count.Add(uint64(len(vs)))
	h.sum.Add(sum)
	for {
		m := h.min.Load()
		if lo >= m || h.min.CompareAndSwap(m, lo) {
			break
		}
	}
	for {
		m := h.max.Load()
		if hi <= m || h.max.CompareAndSwap(m, hi) {
			break
		}
	}
}

// Count is the number of recorded values.
func (h *Histogram) Count() uint64 { return h.count.Load() }

// Min is the smallest recorded value (0 when empty), exact.
func (h *Histogram) Min() time.Duration {
	if h.Count() == 0 {
		return 0
	}
	return time.Duration(h.min.Load())
}

// Max is the largest recorded value, exact.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Mean is the exact average of the recorded values.
func (h *Histogram) Mean() time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	return time.Duration(h.sum.Load() / n)
}

// Percentile returns the value at or below which q percent (0-100) of the
// recorded values fall: the midpoint of the bucket holding that rank, kept
// within the exact min and max.
func (h *Histogram) Percentile(q float64) time.Duration {
	n := h.Count()
	if n == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q / 100 * float64(n)))
	rank = min(max(rank, 1), n)
	if rank == n {
		return h.Max() // exact
	}
	var cum uint64
	for i := range h.counts {
		cum += h.counts[i].Load()
		if cum >= rank {
			lo, hi := bucketBounds(i)
			v := lo + (hi-lo)/2
			v = min(max(v, h.min.Load()), h.max.Load())
			return time.Duration(v)
		}
	}
	return h.Max()
}

// Merge adds o's values to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.Count() == 0 {
		return
	}
	for i := range o.counts {
		if c := o.counts[i].Load(); c != 0 {
			h.counts[i].Add(c)
		}
	}
	h.count.Add(o.count.Load())
	h.sum.Add(o.sum.Load())
	for v := o.min.Load(); ; {
		m := h.min.Load()
		if v >= m || h.min.CompareAndSwap(m, v) {
			break
		}
	}
	for v := o.max.Load(); ; {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			break
		}
	}
}

// Bucket is one non-empty bucket: values in [LowNs, HighNs] and how many.
type Bucket struct {
	LowNs  uint64
	HighNs uint64
	Count  uint64
}

// Buckets lists the non-empty buckets in ascending order.
func (h *Histogram) Buckets() []Bucket {
	var out []Bucket
	for i := range h.counts {
		if c := h.counts[i].Load(); c != 0 {
			lo, hi := bucketBounds(i)
			out = append(out, Bucket{lo, hi, c})
		}
	}
	return out
}

// histJSON is the wire form of a Histogram. Buckets are [index, count] pairs;
// bucket i < 128 holds exactly i ns, otherwise with s = i/128 - 1 and
// m = 128 + i%128 it holds [m<<s, (m+1)<<s) ns. sub_bucket_bits names the
// layout so that a reader can refuse a different one.
type histJSON struct {
	SubBucketBits int         `json:"sub_bucket_bits"`
	Count         uint64      `json:"count"`
	SumNs         uint64      `json:"sum_ns"`
	MinNs         uint64      `json:"min_ns"`
	MaxNs         uint64      `json:"max_ns"`
	Buckets       [][2]uint64 `json:"buckets"`
}

// MarshalJSON writes the sparse form above.
func (h *Histogram) MarshalJSON() ([]byte, error) {
	j := histJSON{SubBucketBits: subBits, Count: h.Count(), SumNs: h.sum.Load(),
		MinNs: uint64(h.Min()), MaxNs: h.max.Load(), Buckets: [][2]uint64{}}
	for i := range h.counts {
		if c := h.counts[i].Load(); c != 0 {
			j.Buckets = append(j.Buckets, [2]uint64{uint64(i), c})
		}
	}
	return json.Marshal(j)
}

// UnmarshalJSON reads the form MarshalJSON writes, replacing h's contents.
func (h *Histogram) UnmarshalJSON(b []byte) error {
	var j histJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	if j.SubBucketBits != subBits {
		return errors.New("bench: histogram layout differs (sub_bucket_bits)")
	}
	h.reset()
	var total uint64
	for _, p := range j.Buckets {
		if p[0] >= numBuckets {
			return errors.New("bench: histogram bucket index out of range")
		}
		h.counts[p[0]].Add(p[1])
		total += p[1]
	}
	if total != j.Count {
		return errors.New("bench: histogram count does not match its buckets")
	}
	h.count.Store(j.Count)
	h.sum.Store(j.SumNs)
	h.max.Store(j.MaxNs)
	if j.Count > 0 {
		h.min.Store(j.MinNs)
	}
	return nil
}

func (h *Histogram) reset() {
	for i := range h.counts {
		h.counts[i].Store(0)
	}
	h.count.Store(0)
	h.sum.Store(0)
	h.min.Store(math.MaxUint64)
	h.max.Store(0)
}

// spread returns kimbench's "Response time histogram": n+1 marks evenly
// spaced from the fastest to the slowest value, each with the number of
// values above the previous mark and at most this one.
func (h *Histogram) spread(n int) (marks []time.Duration, counts []uint64) {
	if h.Count() == 0 {
		return nil, nil
	}
	lo, hi := h.Min(), h.Max()
	step := (hi - lo) / time.Duration(n)
	marks = make([]time.Duration, n+1)
	for i := range marks {
		marks[i] = lo + time.Duration(i)*step
	}
	marks[n] = hi
	counts = make([]uint64, n+1)
	counts[0] = 1 // the fastest value itself, as kimbench's first mark shows
	for _, b := range h.Buckets() {
		if uint64(lo) >= b.LowNs && uint64(lo) <= b.HighNs {
			b.Count-- // counted at mark 0
		}
		// A bucket's values sit near its midpoint (kept inside [lo, hi]).
		v := time.Duration(b.LowNs + (b.HighNs-b.LowNs)/2)
		v = min(max(v, lo), hi)
		j := sort.Search(len(marks), func(k int) bool { return marks[k] >= v })
		counts[min(j, n)] += b.Count
	}
	return marks, counts
}

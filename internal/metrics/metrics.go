// Package metrics writes Parley's figures in the Prometheus text format
// (version 0.0.4) and holds the latency histograms the hot paths record
// into. It has no registry: the server reads its components' counters when
// /metrics is scraped, so recording costs one atomic add.
package metrics

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"sync/atomic"
	"time"
)

// LatencyBuckets are the upper bounds, in seconds, of the latency histograms.
var LatencyBuckets = []float64{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5}

// Histogram counts durations into fixed buckets. Safe for concurrent use.
type Histogram struct {
	bounds []float64       // seconds, ascending
	counts []atomic.Uint64 // counts[i]: observations <= bounds[i] and > bounds[i-1]; last: +Inf
	sumNs  atomic.Uint64
}

// NewHistogram returns a histogram with the given upper bounds (seconds, ascending).
func NewHistogram(bounds []float64) *Histogram {
	return &Histogram{bounds: bounds, counts: make([]atomic.Uint64, len(bounds)+1)}
}

// Observe records one duration.
func (h *Histogram) Observe(d time.Duration) {
	if d < 0 {
		d = 0
	}
	s := d.Seconds()
	i := sort.SearchFloat64s(h.bounds, s)
	h.counts[i].Add(1)
	h.sumNs.Add(uint64(d))
}

// Snapshot is a histogram's state at one moment.
type Snapshot struct {
	Bounds []float64 // seconds
	Counts []uint64  // per bucket (not cumulative); last is +Inf
	Count  uint64
	Sum    time.Duration
}

// Snapshot reads the histogram.
func (h *Histogram) Snapshot() Snapshot {
	s := Snapshot{Bounds: h.bounds, Counts: make([]uint64, len(h.counts)), Sum: time.Duration(h.sumNs.Load())}
	for i := range h.counts {
		s.Counts[i] = h.counts[i].Load()
		s.Count += s.Counts[i]
	}
	return s
}

// Quantile estimates the q-quantile (0..1) in seconds by linear
// interpolation inside its bucket; 0 when empty.
func (s Snapshot) Quantile(q float64) float64 {
	if s.Count == 0 {
		return 0
	}
	rank := q * float64(s.Count)
	var seen float64
	for i, c := range s.Counts {
		if seen+float64(c) >= rank && c > 0 {
			lo := 0.0
			if i > 0 {
				lo = s.Bounds[i-1]
			}
			if i == len(s.Bounds) {
				return lo // +Inf bucket: its lower bound is all we know
			}
			return lo + (s.Bounds[i]-lo)*(rank-seen)/float64(c)
		}
		seen += float64(c)
	}
	return s.Bounds[len(s.Bounds)-1]
}

// Sub returns s minus an earlier snapshot of the same histogram (the
// observations between the two).
func (s Snapshot) Sub(old Snapshot) Snapshot {
	d := Snapshot{Bounds: s.Bounds, Counts: make([]uint64, len(s.Counts)), Sum: s.Sum - old.Sum}
	for i := range s.Counts {
		if i < len(old.Counts) {
			d.Counts[i] = s.Counts[i] - old.Counts[i]
		} else {
			d.Counts[i] = s.Counts[i]
		}
		d.Count += d.Counts[i]
	}
	return d
}

// Writer writes metric families in the text format. Errors stick: the
// first one is returned by Flush and later writes do nothing.
type Writer struct {
	w *bufio.Writer
}

// NewWriter returns a Writer on w.
func NewWriter(w io.Writer) *Writer { return &Writer{w: bufio.NewWriter(w)} }

// Flush writes what is buffered.
func (w *Writer) Flush() error { return w.w.Flush() }

// Label is one name="value" pair.
type Label struct{ Name, Value string }

func (w *Writer) header(name, help, typ string) {
	fmt.Fprintf(w.w, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
}

func (w *Writer) sample(name string, labels []Label, v float64) {
	w.w.WriteString(name)
	if len(labels) > 0 {
		w.w.WriteByte('{')
		for i, l := range labels {
			if i > 0 {
				w.w.WriteByte(',')
			}
			w.w.WriteString(l.Name)
			w.w.WriteString(`="`)
			w.w.WriteString(escape(l.Value))
			w.w.WriteByte('"')
		}
		w.w.WriteByte('}')
	}
	w.w.WriteByte(' ')
	w.w.WriteString(formatFloat(v))
	w.w.WriteByte('\n')
}

// Counter writes a counter family with one unlabelled sample.
func (w *Writer) Counter(name, help string, v float64) {
	w.header(name, help, "counter")
	w.sample(name, nil, v)
}

// Gauge writes a gauge family with one unlabelled sample.
func (w *Writer) Gauge(name, help string, v float64) {
	w.header(name, help, "gauge")
	w.sample(name, nil, v)
}

// Sample is one labelled value of a family.
type Sample struct {
	Labels []Label
	Value  float64
}

// Family writes a counter or gauge family ("counter" or "gauge") with labelled samples.
func (w *Writer) Family(name, help, typ string, samples []Sample) {
	w.header(name, help, typ)
	for _, s := range samples {
		w.sample(name, s.Labels, s.Value)
	}
}

// Histogram writes a histogram family (buckets cumulative, in seconds).
func (w *Writer) Histogram(name, help string, s Snapshot) {
	w.header(name, help, "histogram")
	var cum uint64
	for i, b := range s.Bounds {
		cum += s.Counts[i]
		w.sample(name+"_bucket", []Label{{"le", formatFloat(b)}}, float64(cum))
	}
	w.sample(name+"_bucket", []Label{{"le", "+Inf"}}, float64(s.Count))
	w.sample(name+"_sum", nil, s.Sum.Seconds())
	w.sample(name+"_count", nil, float64(s.Count))
}

func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

func escape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			out = append(out, `\\`...)
		case '"':
			out = append(out, `\"`...)
		case '\n':
			out = append(out, `\n`...)
		default:
			out = append(out, c)
		}
	}
	return string(out)
}

package metrics

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestHistogramBucketsAndText(t *testing.T) {
	h := NewHistogram([]float64{0.001, 0.01, 0.1})
	h.Observe(500 * time.Microsecond) // bucket 0
	h.Observe(time.Millisecond)       // bucket 0 (le is inclusive)
	h.Observe(5 * time.Millisecond)   // bucket 1
	h.Observe(time.Second)            // +Inf
	s := h.Snapshot()
	if s.Count != 4 || s.Counts[0] != 2 || s.Counts[1] != 1 || s.Counts[2] != 0 || s.Counts[3] != 1 {
		t.Fatalf("counts %v (count %d)", s.Counts, s.Count)
	}
	var b bytes.Buffer
	w := NewWriter(&b)
	w.Histogram("x_seconds", "x.", s)
	w.Family("conns", "c.", "gauge", []Sample{{Labels: []Label{{"transport", `w"s`}}, Value: 3}})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`# TYPE x_seconds histogram`,
		`x_seconds_bucket{le="0.001"} 2`,
		`x_seconds_bucket{le="0.01"} 3`,
		`x_seconds_bucket{le="0.1"} 3`,
		`x_seconds_bucket{le="+Inf"} 4`,
		`x_seconds_count 4`,
		`conns{transport="w\"s"} 3`,
	} {
		if !strings.Contains(b.String(), want+"\n") {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}

func TestQuantileAndSub(t *testing.T) {
	h := NewHistogram([]float64{0.001, 0.01, 0.1})
	for i := 0; i < 90; i++ {
		h.Observe(500 * time.Microsecond)
	}
	old := h.Snapshot()
	for i := 0; i < 10; i++ {
		h.Observe(50 * time.Millisecond)
	}
	s := h.Snapshot()
	if q := s.Quantile(0.5); q <= 0 || q > 0.001 {
		t.Errorf("p50 %v, want within the first bucket", q)
	}
	if q := s.Quantile(0.99); q <= 0.01 || q > 0.1 {
		t.Errorf("p99 %v, want within (0.01, 0.1]", q)
	}
	d := s.Sub(old)
	if d.Count != 10 || d.Quantile(0.5) <= 0.01 {
		t.Errorf("delta %+v p50 %v", d.Counts, d.Quantile(0.5))
	}
}

package wordfilter

import "sync/atomic"

// Holder holds the current Filter for hot reload: readers Load it on every
// message, an admin change builds a new Filter with New and Stores it. A
// Check already running keeps the Filter it loaded; the old one is freed
// when the last such Check returns. The zero Holder holds nil, whose Check
// matches nothing.
type Holder struct {
	p atomic.Pointer[Filter]
}

// Load returns the current Filter, nil before the first Store.
func (h *Holder) Load() *Filter { return h.p.Load() }

// Store makes f the current Filter.
func (h *Holder) Store(f *Filter) { h.p.Store(f) }

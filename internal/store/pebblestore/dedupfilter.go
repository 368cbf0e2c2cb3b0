package pebblestore

import (
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/cockroachdb/pebble/v2"
)

// The de-dup filter: a Bloom filter over every de-dup key ('d') that may
// be stored, so that a new client message id — the common case, missing
// the de-dup cache — costs no Pebble lookup (a memtable search and a filter
// block on every level: a fifth of the server's CPU on the 1:1 bench). A
// key the filter has never seen is certainly not stored; one it has may be
// (a false positive, or a deleted key: filters never forget) and is looked
// up as before.
//
// Completeness is what de-dup correctness rests on. The filter is made
// empty with the caches (before the DB takes any write); from then on every
// Append and Apply adds its keys before committing (a failed commit may
// still have reached the WAL: its keys stay in the filter, harmlessly), and
// a background scan adds every key already on disk. Until the scan ends
// the filter is not ready and every miss is looked up. All access is under
// appendMu: the commit path already holds it, and the scan takes it once
// per chunk of keys.
//
// The Bloom filters come from github.com/bits-and-blooms/bloom (a kept,
// widely used implementation). They are chained: when one holds its
// capacity a new one twice its size is added, so the false-positive rate
// stays near dedupFilterFP per filter whatever the store holds, up to
// Options.DedupFilterBytes; past that the filter gives up (every miss is
// looked up, as without it) until the store is opened again.
type dedupFilter struct {
	filters []*bloom.BloomFilter
	n, cap  uint // keys in the newest filter, and its capacity
	bytes   int64
	max     int64 // Options.DedupFilterBytes
	ready   bool  // the scan of the keys on disk has ended
	full    bool  // over max: the filter is off
}

const (
	dedupFilterFirst = 1 << 20 // keys in the first filter (1.4 MiB: 1.38 bytes a key at dedupFilterFP)
	dedupFilterFP    = 0.005
	dedupScanChunk   = 4096
	// defaultDedupFilterBytes holds filters of 1+2+4+8+16 M keys (43 MiB):
	// ~32 M de-dup keys; the next filter (32 M keys, 44 MiB) would pass it.
	defaultDedupFilterBytes = 64 << 20
)

func newDedupFilter(max int64) *dedupFilter {
	f := &dedupFilter{max: max}
	f.grow(dedupFilterFirst)
	return f
}

func (f *dedupFilter) grow(capacity uint) {
	b := bloom.NewWithEstimates(capacity, dedupFilterFP)
	size := int64(b.Cap() / 8)
	if f.bytes+size > f.max {
		f.full, f.filters = true, nil
		return
	}
	f.filters = append(f.filters, b)
	f.n, f.cap, f.bytes = 0, capacity, f.bytes+size
}

// add records that key may be stored. Called with appendMu held.
func (f *dedupFilter) add(key []byte) {
	if f.full {
		return
	}
	if f.n == f.cap {
		if f.grow(2 * f.cap); f.full {
			return
		}
	}
	f.filters[len(f.filters)-1].Add(key)
	f.n++
}

// absent reports whether key is certainly not stored. Called with appendMu
// held.
func (f *dedupFilter) absent(key []byte) bool {
	if !f.ready || f.full {
		return false
	}
	for _, b := range f.filters {
		if b.Test(key) {
			return false
		}
	}
	return true
}

// scanDedupKeys adds the de-dup keys on disk to f, a chunk at a time: the
// store's locks are held only per chunk, so a reopen or Close is never
// kept waiting, and a filter replaced by a reopen (resetCaches) stops its
// scan: the reopen starts a new one.
func (s *Store) scanDedupKeys(f *dedupFilter) {
	lower := []byte{nsDedup}
	upper := prefixEnd(lower)
	keys := make([][]byte, 0, dedupScanChunk)
	var arena []byte
	start, total := time.Now(), 0
	for {
		select {
		case <-s.stop:
			return
		default:
		}
		keys, arena = keys[:0], arena[:0]
		s.closeMu.RLock()
		if s.closed {
			s.closeMu.RUnlock()
			return
		}
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: upper})
		if err == nil {
			for valid := it.First(); valid && len(keys) < dedupScanChunk; valid = it.Next() {
				arena = append(arena, it.Key()...)
				keys = append(keys, arena[len(arena)-len(it.Key()):])
			}
			err = it.Close()
		}
		if err != nil {
			s.closeMu.RUnlock()
			// The filter stays not ready (lookups as without it); the
			// next Open tries again.
			s.log.Warn("pebblestore: scanning de-dup keys for the filter failed; new ids are looked up on disk", "err", err)
			return
		}
		// closeMu (held) orders this with a reopen's resetCaches, appendMu
		// with the commit path's adds and lookups.
		s.appendMu.Lock()
		if s.dedupFilter != f {
			s.appendMu.Unlock()
			s.closeMu.RUnlock()
			return // reopened: a new scan runs
		}
		for _, k := range keys {
			f.add(k)
		}
		done := len(keys) < dedupScanChunk || f.full
		if done {
			f.ready = true
		}
		full := f.full
		s.appendMu.Unlock()
		s.closeMu.RUnlock()
		total += len(keys)
		if done {
			s.log.Debug("pebblestore: de-dup filter ready", "keys", total, "took", time.Since(start).Round(time.Millisecond), "over_dedup_filter_bytes", full)
			return
		}
		// The arena is reused: the next chunk starts after a copy of the last key.
		lower = append(append([]byte(nil), keys[len(keys)-1]...), 0)
	}
}

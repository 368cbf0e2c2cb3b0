package search

import (
	"hash/maphash"
	"sync"
)

// FoldCache remembers the folding of non-ASCII terms. Folding one (NFKD,
// accents dropped, case folding, NFC again) costs far more than looking it
// up, and chat text repeats its words: most of the terms of a message were
// folded before. Bounded by bytes: a shard that would pass its share is
// emptied and starts again (cheap, and terms in use come back at once).
// Safe for concurrent use; the zero value is not usable (NewFoldCache).
type FoldCache struct {
	seed   maphash.Seed
	shards [foldShards]foldShard
	// shardBytes bounds each shard's terms and their foldings.
	shardBytes int
}

const (
	foldShards = 16
	// maxCachedTerm: longer terms (rare) are folded every time.
	maxCachedTerm = 64
	// foldEntryOverhead approximates a map entry's own bytes (two slice
	// headers, the string header, the bucket's share).
	foldEntryOverhead = 64
)

type foldShard struct {
	mu    sync.Mutex
	m     map[string][]byte
	bytes int
}

// NewFoldCache returns a cache holding about maxBytes of terms (at least
// 64 KiB).
func NewFoldCache(maxBytes int) *FoldCache {
	maxBytes = max(maxBytes, 64<<10)
	return &FoldCache{seed: maphash.MakeSeed(), shardBytes: maxBytes / foldShards}
}

// Len is how many terms the cache holds.
func (c *FoldCache) Len() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += len(s.m)
		s.mu.Unlock()
	}
	return n
}

// Bytes is how many bytes the cache counts as held.
func (c *FoldCache) Bytes() int {
	n := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		n += s.bytes
		s.mu.Unlock()
	}
	return n
}

// fold returns term's folding, from the cache or by f.foldNew (then kept).
// The returned slice is shared: callers must not change it.
func (c *FoldCache) fold(term []byte, f *folder) []byte {
	if len(term) > maxCachedTerm {
		return f.foldNew(term)
	}
	s := &c.shards[maphash.Bytes(c.seed, term)%foldShards]
	s.mu.Lock()
	v, ok := s.m[string(term)] // no allocation: the compiler looks up without copying
	s.mu.Unlock()
	if ok {
		return v
	}
	v = f.foldNew(term)
	size := len(term) + len(v) + foldEntryOverhead
	s.mu.Lock()
	if s.m == nil || s.bytes+size > c.shardBytes {
		s.m, s.bytes = make(map[string][]byte), 0
	}
	if _, ok := s.m[string(term)]; !ok {
		s.m[string(term)] = v
		s.bytes += size
	}
	s.mu.Unlock()
	return v
}

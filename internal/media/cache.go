package media

import (
	"context"
	"sync"

	"github.com/parleyim/parley/internal/store"
)

// fileCache keeps recently used file records, so that a send carrying a
// file costs no store read (a read was 15 % of the server's CPU in a
// benchmark of sends with an attachment). It is safe to serve a cached
// record: what a send reads of it never changes, and a file is removed
// only by collection, which takes files that Attach already refuses.
type fileCache struct {
	mu sync.RWMutex
	m  map[string]store.File // guarded by mu; at most fileCacheSize
}

// fileCacheSize bounds the records kept (a few hundred bytes each).
const fileCacheSize = 16384

func (c *fileCache) get(id string) (store.File, bool) {
	c.mu.RLock() // every send with a file reads; writes are rare
	defer c.mu.RUnlock()
	f, ok := c.m[id]
	return f, ok
}

func (c *fileCache) put(f store.File) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]store.File)
	}
	if _, ok := c.m[f.ID]; !ok && len(c.m) >= fileCacheSize {
		// Full: drop an eighth, whichever the map gives first.
		n := fileCacheSize / 8
		for k := range c.m {
			delete(c.m, k)
			if n--; n == 0 {
				break
			}
		}
	}
	c.m[f.ID] = f
}

func (c *fileCache) drop(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, id)
}

// file returns a file's record, from the cache when it has it.
func (s *Service) file(ctx context.Context, id string) (store.File, error) {
	if f, ok := s.files.get(id); ok {
		return f, nil
	}
	f, err := s.store.GetFile(ctx, id)
	if err == nil {
		s.files.put(f)
	}
	return f, err
}

package server

import (
	"context"
	"net/http"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/parleyim/parley/internal/store"
)

// SetStoreFSForTest puts the embedded store on fs (a fault-injecting
// filesystem in tests) instead of the operating system's.
func SetStoreFSForTest(c *Config, fs vfs.FS) { c.storeFS = fs }

// WithDefaultsForTest is c with every default filled in, as New sees it.
func WithDefaultsForTest(c Config) Config { return c.withDefaults() }

// SetStoreWrapForTest makes the server use wrap(store) instead of the store
// it opened (a real store wrapped to stall in tests).
func SetStoreWrapForTest(c *Config, wrap func(store.Store) store.Store) { c.storeWrap = wrap }

// SetMediaOrphanGraceForTest sets how long a file no message carries any
// more can still be sent again before its bytes are deleted.
func SetMediaOrphanGraceForTest(c *Config, d time.Duration) { c.mediaOrphanGrace = d }

// SetPushClientForTest makes the push platform kind ("apns", "fcm",
// "webpush") use c (trusting a test's stand-in server).
func SetPushClientForTest(cfg *Config, kind string, c *http.Client) {
	if cfg.pushClients == nil {
		cfg.pushClients = make(map[string]*http.Client)
	}
	cfg.pushClients[kind] = c
}

// CollectMediaForTest runs the collection of unattached files as if it
// were now.
func (s *Server) CollectMediaForTest(now time.Time) (int, error) {
	return s.media.Collect(context.Background(), now)
}

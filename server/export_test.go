package server

import "github.com/cockroachdb/pebble/v2/vfs"

// SetStoreFSForTest puts the embedded store on fs (a fault-injecting
// filesystem in tests) instead of the operating system's.
func SetStoreFSForTest(c *Config, fs vfs.FS) { c.storeFS = fs }

// WithDefaultsForTest is c with every default filled in, as New sees it.
func WithDefaultsForTest(c Config) Config { return c.withDefaults() }

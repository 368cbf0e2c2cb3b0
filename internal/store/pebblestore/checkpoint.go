package pebblestore

import (
	"context"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// Checkpoint writes a consistent copy of the store into dest, a directory
// that must not exist yet, on the store's volume: Pebble hard-links the
// tables (immutable, so a link is a copy that costs no space until the
// store compacts them away) and copies the write-ahead logs and manifest.
// Every write acknowledged before the call is in the copy; writes go on
// meanwhile. The copy opens with Open like any store directory.
func (s *Store) Checkpoint(ctx context.Context, dest string) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	var opts []pebble.CheckpointOption
	if s.mode.Load() == modeRW {
		// Acknowledged writes of a NoSync store may sit in the WAL's
		// buffer: flushed, they are in the copied WAL. (A read-only store
		// writes nothing, and cannot log the flush record.)
		opts = append(opts, pebble.WithFlushedWAL())
	}
	if err := s.db.Checkpoint(dest, opts...); err != nil {
		return fmt.Errorf("pebblestore: checkpoint into %s: %w", dest, mapErr(err))
	}
	return nil
}

package server

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/parleyim/parley/internal/chat"
	"github.com/parleyim/parley/internal/search"
	"github.com/parleyim/parley/internal/search/bleveindex"
	"github.com/parleyim/parley/internal/store"
)

// searchPart is the node's message search: on the embedded store, a Bleve
// index in the data directory that follows the store's message log; on
// PostgreSQL, the database's own (pgstore's Search), with nothing of its
// own to run.
type searchPart struct {
	index    *bleveindex.Index // nil on PostgreSQL
	follower *search.Follower  // nil on PostgreSQL
	log      store.Log         // the store's log the follower reads; nil on PostgreSQL
	db       chat.Searcher     // the store, on PostgreSQL
}

// newSearch returns the node's search: the store itself when it searches
// (PostgreSQL); else the search index of cfg's data directory and the
// follower that feeds it from raw (the store as opened, which keeps the
// log) and st (the store the server uses, for reading messages). Nil when
// search is off or the store can neither search nor be followed.
func newSearch(cfg Config, raw, st store.Store) (*searchPart, error) {
	if cfg.Search == "off" {
		return nil, nil
	}
	// raw, not st: a wrapper of the store need not pass Search on.
	if db, ok := raw.(chat.Searcher); ok {
		return &searchPart{db: db}, nil
	}
	lg, ok := raw.(store.Log)
	if !ok {
		return nil, nil
	}
	ix, err := bleveindex.Open(filepath.Join(cfg.DataDir, bleveindex.Dir), bleveindex.Options{Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("search index: %w", err)
	}
	f, err := search.NewFollower(search.FollowerConfig{Log: lg, Messages: st, Index: ix, Logger: cfg.Logger})
	if err != nil {
		ix.Close()
		return nil, fmt.Errorf("search index: %w", err)
	}
	return &searchPart{index: ix, follower: f, log: lg}, nil
}

// searcher is what the chat service searches with; nil (no interface
// holding a nil pointer) when search is off.
func (p *searchPart) searcher() chat.Searcher {
	switch {
	case p == nil:
		return nil
	case p.db != nil:
		return p.db
	}
	return p.index
}

// lag is how many stored messages the index has not taken in yet, against
// the store's newest log position now (the follower's own figure is as of
// its last step, so it can read 0 just before it sees new messages).
func (p *searchPart) lag(ctx context.Context) uint64 {
	fs := p.follower.Stats()
	last, err := p.log.LastLogPos(ctx)
	if err != nil || last < fs.Position {
		return fs.Lag()
	}
	return last - fs.Position
}

// start starts the follower, if there is one.
func (p *searchPart) start() {
	if p != nil && p.follower != nil {
		p.follower.Start()
	}
}

// close stops the follower, then the index (before the store closes).
func (p *searchPart) close() error {
	if p == nil || p.index == nil {
		return nil
	}
	p.follower.Stop()
	return p.index.Close()
}

// purge makes erased messages' text leave the embedded index's files: it
// waits until the follower has taken in the store's log as it is now (the
// erasures), then merges the index. A no-op on PostgreSQL (its rows are
// the store's: PurgeDeleted vacuums them) and without search.
func (p *searchPart) purge(ctx context.Context) error {
	if p == nil || p.index == nil {
		return nil
	}
	pos, err := p.log.LastLogPos(ctx)
	if err != nil {
		return err
	}
	if err := p.follower.WaitFor(ctx, pos); err != nil {
		return err
	}
	return p.index.Merge(ctx)
}

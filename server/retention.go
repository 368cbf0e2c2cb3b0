package server

import (
	"context"

	"github.com/parleyim/parley/internal/media"
	"github.com/parleyim/parley/internal/retention"
	"github.com/parleyim/parley/internal/store"
)

// newRetention builds the node's retention service (docs/retention.md). Its
// sweeper deletes from the store and tells the embedded search index to
// forget what it deleted; PostgreSQL's search reads the message rows, which
// are gone with the messages.
func newRetention(cfg Config, st store.Store, sp *searchPart, ms *media.Service) *retention.Service {
	rc := retention.Config{
		Default:  retention.Policy{Days: cfg.RetentionDays, Messages: cfg.RetentionMessages},
		Interval: cfg.RetentionSweepInterval,
		Logger:   cfg.Logger,
	}
	if sp != nil && sp.index != nil {
		rc.Forget = func(ctx context.Context, refs []store.MessageRef) error {
			return sp.index.Forget(ctx, refs)
		}
	}
	if ms != nil {
		rc.Files = ms.CollectOrphans // files whose last message went
	}
	return retention.New(rc, st)
}

// sweeper runs a retention Service's sweeps in the background.
type sweeper struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (w *sweeper) start(rs *retention.Service) {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan struct{})
	go func() {
		defer close(w.done)
		rs.Run(ctx)
	}()
}

// stop ends the sweeps and waits for the one running, if any.
func (w *sweeper) stop() {
	if w.cancel == nil {
		return
	}
	w.cancel()
	<-w.done
}

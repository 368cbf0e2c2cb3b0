package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/parleyim/parley/internal/search"
	"github.com/parleyim/parley/internal/search/bleveindex"
	"github.com/parleyim/parley/internal/store/pebblestore"
)

// reindexCmd is 'parley reindex': rebuild the embedded search index from
// the embedded store, with the server stopped.
func reindexCmd(args []string) error {
	fs := flag.NewFlagSet("reindex", flag.ContinueOnError)
	dataDir := fs.String("data", "./data", "the server's data directory (stop the server first)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return reindex(ctx, *dataDir, os.Stdout, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

// reindex drops the search index in data and builds it again from every
// message the store logged. Interrupted, it leaves a partial index that the
// server completes from where it stopped.
func reindex(ctx context.Context, data string, out io.Writer, log *slog.Logger) error {
	storeDir := filepath.Join(data, "store")
	if _, err := os.Stat(storeDir); err != nil {
		return fmt.Errorf("parley reindex: no embedded store in %s: %w", data, err)
	}
	st, err := pebblestore.Open(storeDir, pebblestore.Options{Logger: log})
	if err != nil {
		// The store's lock file is held: by a server (EWOULDBLOCK) or, in
		// this process, by another open store (pebble's own error).
		if errors.Is(err, syscall.EWOULDBLOCK) || strings.Contains(err.Error(), "lock held by current process") {
			return fmt.Errorf("parley reindex: the data directory %s is in use: stop the server (parley serve) first, then run reindex: %w", data, err)
		}
		return fmt.Errorf("parley reindex: open store: %w", err)
	}
	defer st.Close()

	indexDir := filepath.Join(data, bleveindex.Dir)
	if err := os.RemoveAll(indexDir); err != nil {
		return fmt.Errorf("parley reindex: remove the old index: %w", err)
	}
	ix, err := bleveindex.Open(indexDir, bleveindex.Options{Logger: log})
	if err != nil {
		return fmt.Errorf("parley reindex: %w", err)
	}
	f, err := search.NewFollower(search.FollowerConfig{Log: st, Messages: st, Index: ix, Logger: log})
	if err != nil {
		_ = ix.Close()
		return fmt.Errorf("parley reindex: %w", err)
	}
	start := time.Now()
	last := start
	err = f.CatchUp(ctx, func(s search.FollowerStats) {
		if time.Since(last) >= 2*time.Second {
			last = time.Now()
			fmt.Fprintf(out, "indexed log position %d of %d\n", s.Position, s.StorePosition)
		}
	})
	if cerr := ix.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("parley reindex: %w (the server goes on from where it stopped)", err)
	}
	s := f.Stats()
	fmt.Fprintf(out, "reindexed %d messages (log position %d) in %s into %s\n", s.Applied, s.Position, time.Since(start).Round(time.Millisecond), indexDir)
	return nil
}

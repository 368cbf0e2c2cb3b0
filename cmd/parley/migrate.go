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

	"github.com/parleyim/parley/internal/migrate"
	"github.com/parleyim/parley/internal/store/pebblestore"
	"github.com/parleyim/parley/internal/store/pgstore"
)

// migrateCmd is 'parley migrate': copy a stopped node's embedded store into
// PostgreSQL for a cluster (docs/migrate.md).
func migrateCmd(args []string) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	from := fs.String("from", "", "the node's data directory (data_dir; stop the node first, or use a restored backup)")
	to := fs.String("to", "", "the PostgreSQL URL (postgres://...), as postgres_url of the cluster's nodes")
	schema := fs.String("schema", "parley", "the schema holding Parley's tables, as postgres_schema")
	verifyOnly := fs.Bool("verify-only", false, "only compare the source and the target; copy nothing")
	batch := fs.Int("batch-bytes", 4<<20, "the source bytes loaded per transaction")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // the usage is the answer
		}
		return err
	}
	if *from == "" || *to == "" || fs.NArg() > 0 {
		fs.Usage()
		return errors.New("parley migrate: --from DATA_DIR and --to postgres://... are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return runMigrate(ctx, migrateArgs{from: *from, to: *to, schema: *schema, verifyOnly: *verifyOnly, batch: *batch}, os.Stdout, log)
}

type migrateArgs struct {
	from, to, schema string
	verifyOnly       bool
	batch            int
}

// runMigrate copies (unless verifyOnly) and verifies; a difference is an
// error, so the command exits non-zero.
func runMigrate(ctx context.Context, a migrateArgs, out io.Writer, log *slog.Logger) error {
	storeDir := filepath.Join(a.from, "store")
	if _, err := os.Stat(storeDir); err != nil {
		return fmt.Errorf("parley migrate: no embedded store in %s: %w", a.from, err)
	}
	src, err := pebblestore.Open(storeDir, pebblestore.Options{Logger: log})
	if err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) || strings.Contains(err.Error(), "lock held by current process") {
			return fmt.Errorf("parley migrate: the data directory %s is in use by a running server: stop the node "+
				"(or migrate from a backup restored elsewhere), then run migrate again: %w", a.from, err)
		}
		return fmt.Errorf("parley migrate: open the embedded store: %w", err)
	}
	defer src.Close()
	// Counting a large table for the verification may take longer than a
	// server's query bound.
	dst, err := pgstore.Open(ctx, a.to, pgstore.Options{Schema: a.schema, Logger: log, QueryTimeout: 10 * time.Minute, MaxConns: 4})
	if err != nil {
		return fmt.Errorf("parley migrate: open PostgreSQL: %w", err)
	}
	defer dst.Close()
	im := dst.Importer()
	defer im.Close()
	opts := migrate.Options{BatchBytes: a.batch, Out: out}
	var rep migrate.Report
	if a.verifyOnly {
		rep, err = migrate.Verify(ctx, src.Exporter(), im, opts)
	} else {
		fmt.Fprintf(out, "migrating %s into schema %s\n", a.from, a.schema)
		rep, err = migrate.Run(ctx, src.Exporter(), im, opts)
	}
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("parley migrate: interrupted (run the same command again to continue): %w", err)
		}
		return fmt.Errorf("parley migrate: %w (run the same command again to continue)", err)
	}
	if !rep.OK() {
		return fmt.Errorf("parley migrate: the target differs from the source (%d differences above)", len(rep.Differences))
	}
	return nil
}

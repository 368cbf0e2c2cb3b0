package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyim/parley/internal/migrate/migratetest"
	"github.com/parleyim/parley/internal/store/pebblestore"
)

// TestMigrateCommand: a data directory in use is refused with the way out;
// once free, the copy verifies; --verify-only agrees, and reports a source
// changed since with a failure.
func TestMigrateCommand(t *testing.T) {
	url := migratetest.PGURL(t)
	ctx := context.Background()
	quiet := slog.New(slog.DiscardHandler)
	data := t.TempDir()
	open := func() *pebblestore.Store {
		st, err := pebblestore.Open(filepath.Join(data, "store"), pebblestore.Options{Logger: quiet, MinFreeDisk: -1})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	migratetest.Seed(t, st)
	args := migrateArgs{from: data, to: url, schema: migratetest.FreshSchema(t, url), batch: 1 << 10}

	var out bytes.Buffer
	if err := runMigrate(ctx, args, &out, quiet); err == nil || !strings.Contains(err.Error(), "stop the node") {
		t.Fatalf("migrate with the store open: %v, want a refusal naming the node", err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := runMigrate(ctx, args, &out, quiet); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "verified: the target holds every record of the source") {
		t.Fatalf("migrate said:\n%s", out.String())
	}
	out.Reset()
	args.verifyOnly = true
	if err := runMigrate(ctx, args, &out, quiet); err != nil || !strings.Contains(out.String(), "verified") {
		t.Fatalf("verify-only: %v\n%s", err, out.String())
	}

	st = open()
	if err := st.RaiseSeq(ctx, migratetest.Direct, 1000); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := runMigrate(ctx, args, &out, quiet); err == nil || !strings.Contains(out.String(), migratetest.Direct) {
		t.Fatalf("verify-only after the source changed: %v\n%s", err, out.String())
	}
	if err := migrateCmd([]string{"--from", data}); err == nil || !strings.Contains(err.Error(), "--to") {
		t.Fatalf("migrate without --to: %v", err)
	}
}

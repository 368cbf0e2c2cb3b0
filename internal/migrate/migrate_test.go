package migrate_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/migrate"
	"github.com/parleyim/parley/internal/migrate/migratetest"
	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/store/pebblestore"
	"github.com/parleyim/parley/internal/store/pgstore"
)

var quiet = slog.New(slog.DiscardHandler)

func openPebble(t *testing.T) *pebblestore.Store {
	t.Helper()
	s, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: quiet, MinFreeDisk: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func openPG(t *testing.T, url, schema string) *pgstore.Store {
	t.Helper()
	s, err := pgstore.Open(context.Background(), url, pgstore.Options{Schema: schema, Logger: quiet, ConnectTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// run migrates src into dst with its own importer.
func run(ctx context.Context, src *pebblestore.Store, dst *pgstore.Store, batch int) (migrate.Report, error) {
	im := dst.Importer()
	defer im.Close()
	return migrate.Run(ctx, src.Exporter(), im, migrate.Options{BatchBytes: batch})
}

// TestMigrateRoundTrip: every record kind seeded through store.Store into
// the embedded store reads back the same through pgstore after the
// migration, the verification agrees, and writes continue as on the source
// (resends are duplicates, seqs and audit ids go on, names stay taken).
func TestMigrateRoundTrip(t *testing.T) {
	url := migratetest.PGURL(t)
	src := openPebble(t)
	migratetest.Seed(t, src)
	dst := openPG(t, url, migratetest.FreshSchema(t, url))
	rep, err := run(context.Background(), src, dst, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verification: %v", rep.Differences)
	}
	if rep.Conversations != 4 { // migratetest's Direct, Group, Fading and MLSGroup
		t.Fatalf("verified %d conversations, want 4", rep.Conversations)
	}
	migratetest.Check(t, src, dst)
	migratetest.CheckWritesContinue(t, src, dst)
}

// cancelSink cancels the run's context at its n-th Write, before or after
// the write reaches the target.
type cancelSink struct {
	migrate.Sink
	n      int
	after  bool
	cancel context.CancelFunc
}

func (c *cancelSink) Write(ctx context.Context, kind migrate.Kind, recs []any, next []byte, done bool) error {
	c.n--
	if c.n == 0 && !c.after {
		c.cancel()
	}
	err := c.Sink.Write(ctx, kind, recs, next, done)
	if c.n == 0 && c.after {
		c.cancel()
	}
	return err
}

// TestMigrateResumes interrupts a migration of tiny batches at several
// points (a batch cancelled as it is written, a cancel just after one
// committed); each rerun continues, and the last one ends equal to an
// uninterrupted migration.
func TestMigrateResumes(t *testing.T) {
	url := migratetest.PGURL(t)
	src := openPebble(t)
	migratetest.Seed(t, src)
	dst := openPG(t, url, migratetest.FreshSchema(t, url))
	const batch = 64 // bytes: about one record per batch
	for i, stop := range []struct {
		n     int
		after bool
	}{{1, false}, {2, true}, {3, false}, {5, true}, {8, false}, {4, true}} {
		ctx, cancel := context.WithCancel(context.Background())
		im := dst.Importer()
		_, err := migrate.Run(ctx, src.Exporter(), &cancelSink{Sink: im, n: stop.n, after: stop.after, cancel: cancel},
			migrate.Options{BatchBytes: batch})
		im.Close()
		cancel()
		if err == nil {
			t.Fatalf("run %d: not interrupted (the seeded store has too few records for the test)", i)
		}
		if !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "context canceled") {
			t.Fatalf("run %d: %v, want a cancellation", i, err)
		}
	}
	rep, err := run(context.Background(), src, dst, batch)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.OK() {
		t.Fatalf("verification after resuming: %v", rep.Differences)
	}
	migratetest.Check(t, src, dst)
	// A rerun of a completed migration changes nothing and verifies.
	if rep, err := run(context.Background(), src, dst, batch); err != nil || !rep.OK() {
		t.Fatalf("rerun after completion: %v %v", rep.Differences, err)
	}
	migratetest.CheckWritesContinue(t, src, dst)
}

// TestMigrateRefusesOtherData: a target with data no migration wrote, or a
// migration from another source, is refused and left as it was.
func TestMigrateRefusesOtherData(t *testing.T) {
	url := migratetest.PGURL(t)
	ctx := context.Background()
	src := openPebble(t)
	migratetest.Seed(t, src)

	used := openPG(t, url, migratetest.FreshSchema(t, url))
	if err := used.CreateUser(ctx, store.User{ID: "zed", NameKey: "zed", PasswordHash: "h"}); err != nil {
		t.Fatal(err)
	}
	if _, err := run(ctx, src, used, 0); !errors.Is(err, migrate.ErrTargetInUse) {
		t.Fatalf("migrating into a schema with users: %v, want ErrTargetInUse", err)
	}
	if _, err := used.GetUser(ctx, "alice"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the refused target was written: GetUser(alice) = %v", err)
	}

	dst := openPG(t, url, migratetest.FreshSchema(t, url))
	if _, err := run(ctx, src, dst, 0); err != nil {
		t.Fatal(err)
	}
	other := openPebble(t)
	if err := other.CreateUser(ctx, store.User{ID: "x", NameKey: "x", PasswordHash: "h"}); err != nil {
		t.Fatal(err)
	}
	if _, err := run(ctx, other, dst, 0); !errors.Is(err, migrate.ErrTargetInUse) {
		t.Fatalf("migrating another source into a migrated schema: %v, want ErrTargetInUse", err)
	}
}

// TestVerifyFindsDifferences: a message deleted behind the migration's
// back is reported (count and conversation), not verified.
func TestVerifyFindsDifferences(t *testing.T) {
	url := migratetest.PGURL(t)
	ctx := context.Background()
	src := openPebble(t)
	migratetest.Seed(t, src)
	dst := openPG(t, url, migratetest.FreshSchema(t, url))
	if _, err := run(ctx, src, dst, 0); err != nil {
		t.Fatal(err)
	}
	if err := src.RaiseSeq(ctx, migratetest.Group, 100); err != nil { // the source changed after the move
		t.Fatal(err)
	}
	im := dst.Importer()
	defer im.Close()
	rep, err := migrate.Verify(ctx, src.Exporter(), im, migrate.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.OK() || !strings.Contains(strings.Join(rep.Differences, "\n"), migratetest.Group) {
		t.Fatalf("differences = %q, want one naming %s", rep.Differences, migratetest.Group)
	}
}

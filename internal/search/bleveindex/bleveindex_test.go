package bleveindex

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/parleyim/parley/internal/search"
	"github.com/parleyim/parley/internal/search/searchtest"
)

var quiet = slog.New(slog.DiscardHandler)

func openTemp(t testing.TB) *Index {
	t.Helper()
	ix, err := Open(t.TempDir()+"/search", Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

func TestConformance(t *testing.T) {
	searchtest.Run(t, func(t *testing.T) searchtest.Harness {
		return searchtest.Harness{Index: openTemp(t)}
	})
}

// TestReopenKeepsDocumentsAndPosition: what Apply returned from survives a
// close, with its position.
func TestReopenKeepsDocumentsAndPosition(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), Dir)
	ix, err := Open(dir, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if pos, err := ix.Position(ctx); err != nil || pos != 0 {
		t.Fatalf("new index at %d, %v", pos, err)
	}
	d := search.Doc{ConversationID: "g:1", Seq: 1, Text: "durable words", Time: 5}
	if err := ix.Apply(ctx, []search.Change{{Put: &d}}, 42); err != nil {
		t.Fatal(err)
	}
	if err := ix.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := ix.Search(ctx, search.Query{Text: "durable"}); !errors.Is(err, search.ErrClosed) {
		t.Fatalf("Search after Close: %v, want search.ErrClosed", err)
	}
	ix, err = Open(dir, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	if pos, err := ix.Position(ctx); err != nil || pos != 42 {
		t.Fatalf("reopened at %d, %v; want 42", pos, err)
	}
	r, err := ix.Search(ctx, search.Query{Text: "durable", Ranges: []search.Range{{ConversationID: "g:1", From: 1}}})
	if err != nil || len(r.Hits) != 1 {
		t.Fatalf("after reopen: %+v, %v", r, err)
	}
}

// TestOutdatedIndexIsRebuilt: an index of another format (or a damaged
// one) is dropped at Open: empty, at position 0, for the follower to
// rebuild.
func TestOutdatedIndexIsRebuilt(t *testing.T) {
	ctx := context.Background()
	for _, damage := range []func(ix *Index){
		func(ix *Index) { _ = ix.idx.SetInternal(keyFormat, []byte("0")) },
		func(ix *Index) { _ = ix.idx.SetInternal(keyPosition, []byte("bad")) },
	} {
		dir := filepath.Join(t.TempDir(), Dir)
		ix, err := Open(dir, Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		d := search.Doc{ConversationID: "g:1", Seq: 1, Text: "old words", Time: 5}
		if err := ix.Apply(ctx, []search.Change{{Put: &d}}, 7); err != nil {
			t.Fatal(err)
		}
		damage(ix)
		_ = ix.Close()
		ix, err = Open(dir, Options{Logger: quiet})
		if err != nil {
			t.Fatal(err)
		}
		pos, err := ix.Position(ctx)
		r, serr := ix.Search(ctx, search.Query{Text: "old", Ranges: []search.Range{{ConversationID: "g:1", From: 1}}})
		_ = ix.Close()
		if err != nil || pos != 0 || serr != nil || len(r.Hits) != 0 {
			t.Fatalf("reopened outdated index: position %d (%v), %d hits (%v); want an empty index", pos, err, len(r.Hits), serr)
		}
	}
}

// An index directory Bleve cannot open at all (empty, or holding stray
// files) is replaced by a new index, not a crash.
func TestUnopenableDirIsRebuilt(t *testing.T) {
	for name, fill := range map[string]func(dir string) error{
		"empty": func(string) error { return nil },
		"stray files": func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "index_meta.json"), []byte("{not json"), 0o600)
		},
	} {
		dir := filepath.Join(t.TempDir(), Dir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := fill(dir); err != nil {
			t.Fatal(err)
		}
		ix, err := Open(dir, Options{Logger: quiet})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if pos, err := ix.Position(context.Background()); err != nil || pos != 0 {
			t.Fatalf("%s: position %d, %v", name, pos, err)
		}
		_ = ix.Close()
	}
}

// TestCyrillicLettersKept: й and ї are letters, not accented и and і
// (while ё folds to е, as Russian writers do).
func TestCyrillicLettersKept(t *testing.T) {
	for _, c := range []struct{ a, b string }{{"мой", "мои"}, {"їжак", "іжак"}} {
		if terms(false, c.a) == terms(false, c.b) {
			t.Errorf("%q and %q fold to the same term", c.a, c.b)
		}
	}
	if terms(false, "ёлка") != terms(false, "елка") {
		t.Errorf("ё does not fold to е")
	}
}

// Searches at once share nothing they write (run under the race detector:
// a shared sort order once raced).
func TestConcurrentSearches(t *testing.T) {
	ctx := context.Background()
	ix, err := Open(filepath.Join(t.TempDir(), Dir), Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer ix.Close()
	var changes []search.Change
	for seq := uint64(1); seq <= 50; seq++ {
		d := search.Doc{ConversationID: "g:1", Seq: seq, Text: "lantern by the harbour", Time: int64(seq)}
		changes = append(changes, search.Change{Put: &d})
	}
	if err := ix.Apply(ctx, changes, 1); err != nil {
		t.Fatal(err)
	}
	q := search.Query{Text: "lantern", Ranges: []search.Range{{ConversationID: "g:1", From: 1}}, Limit: 10}
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			for range 10 {
				r, err := ix.Search(ctx, q)
				if err == nil && (len(r.Hits) != 10 || r.Hits[0].Seq != 50) {
					err = fmt.Errorf("hits %v", r.Hits)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

package bleveindex

import (
	"log/slog"
	"testing"

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

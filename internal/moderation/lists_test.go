package moderation

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/parleyim/parley/internal/store/pebblestore"
)

// Two nodes (two Services on one store) adding different lists at the same
// moment: both lists are kept, whichever write comes second.
func TestConcurrentListChangesKeepBoth(t *testing.T) {
	st, err := pebblestore.Open(t.TempDir(), pebblestore.Options{NoSync: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	nodes := make([]*Service, 2)
	for i := range nodes {
		if nodes[i], err = New(ctx, Config{Store: st, Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Fatal(err)
		}
		defer nodes[i].Close()
	}
	const each = 20
	var wg sync.WaitGroup
	for n, node := range nodes {
		wg.Go(func() {
			for i := range each {
				l := FilterList{Name: fmt.Sprintf("n%d-%d", n, i), Action: "reject", Words: []string{fmt.Sprintf("word%d%d", n, i)}}
				if err := node.PutFilterList(ctx, l); err != nil {
					t.Errorf("node %d list %d: %v", n, i, err)
				}
			}
		})
	}
	wg.Wait()
	lists, err := nodes[0].FilterLists(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(lists.Admin) != 2*each {
		t.Errorf("%d lists kept, want %d: a concurrent change was lost", len(lists.Admin), 2*each)
	}
	// Each node's filter, once reloaded, has them all.
	for i, node := range nodes {
		if err := node.reload(ctx, false); err != nil {
			t.Fatal(err)
		}
		if n := node.filter.Load().Len(); n != 2*each {
			t.Errorf("node %d filters %d entries, want %d", i, n, 2*each)
		}
	}
}

package storetest

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// listingIDs are ids of many lengths whose bytewise order differs from
// their order by length, with look-alike prefixes ("u", "u0", "u0x").
func listingIDs() []string {
	ids := []string{"b", "aa", "zz", "ü", "u", "u0x", "u_1", "U9", "uü"}
	for i := 0; i < 30; i++ {
		ids = append(ids, fmt.Sprintf("u%d", i*7%100))
	}
	return ids
}

// pageAll lists every id matching prefix with pages of limit and maxBytes,
// failing when a page breaks the bounds or the order.
func pageAll(t *testing.T, list func(store.ListQuery) ([]string, []int), prefix string, limit, maxBytes int) []string {
	t.Helper()
	var out []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 1000 {
			t.Fatal("listing never ends")
		}
		ids, sizes := list(store.ListQuery{Prefix: prefix, After: after, Limit: limit, MaxBytes: maxBytes})
		if len(ids) == 0 {
			return out
		}
		if len(ids) > limit {
			t.Fatalf("page of %d records, limit %d", len(ids), limit)
		}
		total := 0
		for i, n := range sizes {
			if maxBytes > 0 && total >= maxBytes {
				t.Fatalf("page goes on after %d of its records reached %d bytes (MaxBytes %d)", i, total, maxBytes)
			}
			total += n
		}
		for _, id := range ids {
			if id <= after {
				t.Fatalf("id %q listed after %q: not in order", id, after)
			}
			after = id
		}
		out = append(out, ids...)
	}
}

func matching(ids []string, prefix string) []string {
	var out []string
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// ListUsers and ListGroups: every matching id once, bytewise, in pages
// bounded by count and bytes, whatever the lengths of the ids.
func testListing(t *testing.T, s store.Store) {
	ctx := context.Background()
	ids := listingIDs()
	empty, err := s.ListUsers(ctx, store.ListQuery{Limit: 10})
	if err != nil || len(empty) != 0 {
		t.Fatalf("ListUsers of an empty store = %v, %v", empty, err)
	}
	for i, id := range ids {
		if err := s.CreateUser(ctx, store.User{ID: id, PasswordHash: strings.Repeat("h", i), Disabled: i%3 == 0, CreatedAt: at(i)}); err != nil {
			t.Fatalf("CreateUser(%q): %v", id, err)
		}
	}
	for _, id := range ids {
		createGroup(t, s, "g:"+id, 1)
	}
	// Group names are counted by the byte budget: one long name ends a page.
	long := store.Group{ConversationID: "g:u3", Name: strings.Repeat("n", 500), Owner: "alice", CreatedAt: at(1)}
	applyNew(t, s, store.Change{Event: event("g:u3", "alice", "rename", pb.MessageKind_MESSAGE_KIND_GROUP_UPDATED, nil), Group: &long}, 2)

	users := func(q store.ListQuery) ([]string, []int) {
		t.Helper()
		got, err := s.ListUsers(ctx, q)
		if err != nil {
			t.Fatalf("ListUsers(%+v): %v", q, err)
		}
		var out []string
		var sizes []int
		for _, u := range got {
			out, sizes = append(out, u.ID), append(sizes, u.Size())
			checkUser(t, s, u) // every field as GetUser reads it
		}
		return out, sizes
	}
	groups := func(q store.ListQuery) ([]string, []int) {
		t.Helper()
		got, err := s.ListGroups(ctx, q)
		if err != nil {
			t.Fatalf("ListGroups(%+v): %v", q, err)
		}
		var out []string
		var sizes []int
		for _, g := range got {
			out, sizes = append(out, g.ConversationID), append(sizes, g.Size())
			checkGroup(t, s, g)
		}
		return out, sizes
	}
	for _, prefix := range []string{"", "u", "u0", "u1", "u2", "uü", "ü", "zz", "zzz", "x", "U"} {
		want := matching(ids, prefix)
		for _, limit := range []int{1, 3, 7, 100} {
			if got := pageAll(t, users, prefix, limit, 0); !slices.Equal(got, want) {
				t.Fatalf("users with prefix %q, pages of %d: %q, want %q", prefix, limit, got, want)
			}
			if got := trimG(pageAll(t, groups, "g:"+prefix, limit, 0)); !slices.Equal(got, want) {
				t.Fatalf("groups with prefix %q, pages of %d: %q, want %q", prefix, limit, got, want)
			}
		}
		// A byte budget smaller than one record still makes progress.
		if got := pageAll(t, users, prefix, 100, 1); !slices.Equal(got, want) {
			t.Fatalf("users with prefix %q, 1-byte pages: %q, want %q", prefix, got, want)
		}
		if got := trimG(pageAll(t, groups, "g:"+prefix, 100, 300)); !slices.Equal(got, want) {
			t.Fatalf("groups with prefix %q, 300-byte pages: %q, want %q", prefix, got, want)
		}
	}

	// The byte budget ends a page at the record that reaches it.
	first, sizes := users(store.ListQuery{Limit: 3})
	two, _ := users(store.ListQuery{Limit: 3, MaxBytes: sizes[0] + 1})
	if !slices.Equal(two, first[:2]) {
		t.Fatalf("page of %d bytes after a %d-byte record: %q, want %q", sizes[0]+1, sizes[0], two, first[:2])
	}
	q := store.ListQuery{Prefix: "g:u", After: "g:u28", Limit: 100, MaxBytes: 200}
	got, err := s.ListGroups(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ConversationID != "g:u3" || got[0].Name != long.Name {
		t.Fatalf("ListGroups(%+v) = %d groups (%+v), want the long-named g:u3 alone", q, len(got), got)
	}
	// After an id that is not stored: from the next one.
	var above []string
	for _, id := range matching(ids, "") {
		if id > "u00" {
			above = append(above, id)
		}
	}
	if after, _ := users(store.ListQuery{After: "u00", Limit: 2}); !slices.Equal(after, above[:2]) {
		t.Fatalf("users after u00: %q, want %q", after, above[:2])
	}
	if none, _ := users(store.ListQuery{Limit: 0}); len(none) != 0 {
		t.Fatalf("limit 0 listed %q", none)
	}
}

func trimG(convs []string) []string {
	out := make([]string, len(convs))
	for i, c := range convs {
		out[i] = strings.TrimPrefix(c, "g:")
	}
	return out
}

// DiskSize is above zero once something is stored, and grows with what is
// written.
func testDiskSize(t *testing.T, s store.Store) {
	ctx := context.Background()
	before, err := s.DiskSize(ctx)
	if err != nil || before < 0 {
		t.Fatalf("DiskSize = %d, %v", before, err)
	}
	for i := 0; i < 20; i++ {
		m := msg("disk", "alice", "bob", fmt.Sprint(i))
		m.Payload = make([]byte, 64<<10)
		_, _ = rand.Read(m.Payload) // incompressible
		appendOK(t, s, m)
	}
	if after, err := s.DiskSize(ctx); err != nil || after <= before || after < 1<<20 {
		t.Fatalf("DiskSize after 1.25 MiB of messages = %d (before %d), %v", after, before, err)
	}
}

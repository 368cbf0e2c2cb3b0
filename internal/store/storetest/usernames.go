package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
)

// testUserNames: NameKey is unique across users, found by UserByName, kept
// by UpdateUser, and optional (users without one are not indexed).
func testUserNames(t *testing.T, s store.Store) {
	ctx := context.Background()
	created := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	if _, err := s.UserByName(ctx, "alice"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UserByName of an unknown name: %v, want ErrNotFound", err)
	}
	alice := store.User{ID: "Alice", NameKey: "alice", PasswordHash: "h1", CreatedAt: created}
	if err := s.CreateUser(ctx, alice); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"alice", "ALICE"} {
		if err := s.CreateUser(ctx, store.User{ID: id, NameKey: "alice", CreatedAt: created}); !errors.Is(err, store.ErrExists) {
			t.Fatalf("CreateUser(%s) with a taken name: %v, want ErrExists", id, err)
		}
		if _, err := s.GetUser(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("the refused %s was stored: %v", id, err)
		}
	}
	// The same id with another name is still a taken id, and writes no name.
	if err := s.CreateUser(ctx, store.User{ID: "Alice", NameKey: "alice2"}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("CreateUser of an existing id: %v, want ErrExists", err)
	}
	if _, err := s.UserByName(ctx, "alice2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused create indexed its name: %v", err)
	}
	got, err := s.UserByName(ctx, "alice")
	if err != nil || got.ID != "Alice" || got.PasswordHash != "h1" || !got.CreatedAt.Equal(created) || got.NameKey != "" {
		t.Fatalf("UserByName(alice) = %+v, %v; want Alice (NameKey not returned)", got, err)
	}
	// UpdateUser keeps the name (a NameKey passed to it is ignored).
	alice.PasswordHash, alice.Disabled, alice.NameKey = "h2", true, "other"
	if err := s.UpdateUser(ctx, alice); err != nil {
		t.Fatal(err)
	}
	if got, err := s.UserByName(ctx, "alice"); err != nil || got.ID != "Alice" || got.PasswordHash != "h2" || !got.Disabled {
		t.Fatalf("UserByName after UpdateUser = %+v, %v", got, err)
	}
	if _, err := s.UserByName(ctx, "other"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UpdateUser indexed a new name: %v", err)
	}
	// Users without a NameKey (app ids, records from before the index) are
	// not indexed and do not block a name.
	if err := s.CreateUser(ctx, store.User{ID: "bob"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UserByName(ctx, "bob"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a user without a NameKey was indexed: %v", err)
	}
	if err := s.CreateUser(ctx, store.User{ID: "Bob", NameKey: "bob"}); err != nil {
		t.Fatalf("a name only an unindexed user has: %v", err)
	}
}

// testConcurrentUserNames: of concurrent creates of look-alike ids with one
// NameKey, exactly one wins.
func testConcurrentUserNames(t *testing.T, s store.Store) {
	ctx := context.Background()
	for round := range 5 {
		ids := []string{"Bob", "bob", "BOB", "bOb", "boB", "BOb"}
		key := fmt.Sprintf("bob%d", round)
		var wg sync.WaitGroup
		errs := make([]error, len(ids))
		for i, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = s.CreateUser(ctx, store.User{ID: fmt.Sprintf("%s%d", id, round), NameKey: key})
			}()
		}
		wg.Wait()
		winner := ""
		for i, err := range errs {
			switch {
			case err == nil && winner == "":
				winner = fmt.Sprintf("%s%d", ids[i], round)
			case err == nil:
				t.Fatalf("round %d: two creates of name %s succeeded", round, key)
			case !errors.Is(err, store.ErrExists):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if winner == "" {
			t.Fatalf("round %d: no create succeeded", round)
		}
		if got, err := s.UserByName(ctx, key); err != nil || got.ID != winner {
			t.Fatalf("round %d: UserByName = %+v, %v; want %s", round, got, err, winner)
		}
	}
}

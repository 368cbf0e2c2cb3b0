package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
)

// testShadowMuted: the flag round-trips through CreateUser, UpdateUser,
// GetUser and UserByName, independently of Disabled.
func testShadowMuted(t *testing.T, s store.Store) {
	ctx := context.Background()
	created := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	u := store.User{ID: "Mallory", NameKey: "mallory", PasswordHash: "h", ShadowMuted: true, CreatedAt: created}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	checkUser(t, s, u)
	if got, err := s.UserByName(ctx, "mallory"); err != nil || !got.ShadowMuted || got.Disabled {
		t.Fatalf("UserByName = %+v, %v; want shadow-muted, not disabled", got, err)
	}
	for _, flags := range []struct{ disabled, muted bool }{{true, true}, {true, false}, {false, false}, {false, true}} {
		u.Disabled, u.ShadowMuted = flags.disabled, flags.muted
		if err := s.UpdateUser(ctx, u); err != nil {
			t.Fatal(err)
		}
		checkUser(t, s, u)
		if got, err := s.UserByName(ctx, "mallory"); err != nil || got.ShadowMuted != u.ShadowMuted || got.Disabled != u.Disabled {
			t.Fatalf("UserByName after UpdateUser(%+v) = %+v, %v", flags, got, err)
		}
	}
	// A user created without it is not muted.
	plain := store.User{ID: "bob", CreatedAt: created}
	if err := s.CreateUser(ctx, plain); err != nil {
		t.Fatal(err)
	}
	checkUser(t, s, plain)
}

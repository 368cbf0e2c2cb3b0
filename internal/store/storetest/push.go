package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
)

// testPushTargets: one target per (user, device), replaced by a new one,
// listed by device id, every field kept; a conditional delete removes only
// the target with that token.
func testPushTargets(t *testing.T, s store.Store) {
	ctx := context.Background()
	now := time.Unix(1_763_800_000, 123_000_000).UTC()
	web := store.PushTarget{UserID: "alice", DeviceID: "web-1", Kind: "webpush", Token: "https://push.example/abc",
		P256dh: "BPk", Auth: "au", TokenID: "tok-1", UpdatedAt: now}
	ios := store.PushTarget{UserID: "alice", DeviceID: "ios-1", Kind: "apns", Token: "00ff", Topic: "com.example.app",
		Sandbox: true, TokenID: "tok-2", UpdatedAt: now}
	other := store.PushTarget{UserID: "alice2", DeviceID: "ios-1", Kind: "fcm", Token: "f1", UpdatedAt: now}
	for _, pt := range []store.PushTarget{web, ios, other} {
		if err := s.PutPushTarget(ctx, pt); err != nil {
			t.Fatalf("PutPushTarget(%s/%s): %v", pt.UserID, pt.DeviceID, err)
		}
	}
	list := func(user string) []store.PushTarget {
		t.Helper()
		got, err := s.PushTargets(ctx, user)
		if err != nil {
			t.Fatalf("PushTargets(%s): %v", user, err)
		}
		for i := range got {
			got[i].UpdatedAt = got[i].UpdatedAt.UTC()
		}
		return got
	}
	if got := list("alice"); len(got) != 2 || got[0] != ios || got[1] != web {
		t.Fatalf("PushTargets(alice) = %+v, want [ios web]", got)
	}
	if got := list("nobody"); len(got) != 0 {
		t.Fatalf("PushTargets(nobody) = %+v", got)
	}

	// Re-registering replaces.
	web2 := web
	web2.Token, web2.TokenID = "https://push.example/def", "tok-3"
	if err := s.PutPushTarget(ctx, web2); err != nil {
		t.Fatal(err)
	}
	if got := list("alice"); len(got) != 2 || got[1] != web2 {
		t.Fatalf("after replace: %+v", got)
	}

	// A delete naming the old token leaves the new registration.
	if ok, err := s.DeletePushTarget(ctx, "alice", "web-1", web.Token); err != nil || ok {
		t.Fatalf("DeletePushTarget(old token) = %v, %v; want false, nil", ok, err)
	}
	if ok, err := s.DeletePushTarget(ctx, "alice", "web-1", web2.Token); err != nil || !ok {
		t.Fatalf("DeletePushTarget(current token) = %v, %v; want true, nil", ok, err)
	}
	if ok, err := s.DeletePushTarget(ctx, "alice", "ios-1", ""); err != nil || !ok {
		t.Fatalf("DeletePushTarget(any) = %v, %v; want true, nil", ok, err)
	}
	if ok, err := s.DeletePushTarget(ctx, "alice", "ios-1", ""); err != nil || ok {
		t.Fatalf("DeletePushTarget(gone) = %v, %v; want false, nil", ok, err)
	}
	if got := list("alice"); len(got) != 0 {
		t.Fatalf("after deletes: %+v", got)
	}
	if got := list("alice2"); len(got) != 1 || got[0] != other {
		t.Fatalf("another user's target changed: %+v", got)
	}
	if err := s.PutPushTarget(ctx, store.PushTarget{UserID: "alice"}); err == nil {
		t.Fatal("PutPushTarget accepted an empty device id")
	}
}

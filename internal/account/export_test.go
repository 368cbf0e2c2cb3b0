package account_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/account"
	"github.com/parleyim/parley/internal/media/blob"
	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/store/pebblestore"
)

// An archive is deleted once it expires: the sweep removes its bytes from
// the blob store and its job, which then reads as never existing.
func TestExportExpires(t *testing.T) {
	dir := t.TempDir()
	st, err := pebblestore.Open(filepath.Join(dir, "store"), pebblestore.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	blobs, err := blob.NewLocal(filepath.Join(dir, "media"))
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	ctx := context.Background()
	if err := st.CreateUser(ctx, store.User{ID: "alice", NameKey: "alice", CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	const ttl = time.Hour
	svc := account.New(account.Config{Store: st, Blobs: blobs, ExportTTL: ttl, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	defer svc.Close()
	j, err := svc.Export(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for j.State != "ready" {
		if time.Now().After(deadline) || j.State == "failed" {
			t.Fatalf("export: %+v", j)
		}
		time.Sleep(10 * time.Millisecond)
		if j, err = svc.JobOf(ctx, "alice", j.ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := svc.JobOf(ctx, "bob", j.ID); !errors.Is(err, account.ErrNotFound) {
		t.Fatalf("bob reading alice's job: %v", err)
	}
	key := "exports/" + j.ID + ".zip"
	if info, err := blobs.Stat(ctx, key); err != nil || info.Size != j.Size {
		t.Fatalf("archive before expiry: %+v, %v (job says %d bytes)", info, err, j.Size)
	}
	svc.Sweep(ctx, j.ExpiresAt.Add(-time.Second))
	if _, err := blobs.Stat(ctx, key); err != nil {
		t.Fatalf("the archive was deleted before it expired: %v", err)
	}
	svc.Sweep(ctx, j.ExpiresAt.Add(time.Second))
	if _, err := blobs.Stat(ctx, key); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("the archive outlived its expiry: %v", err)
	}
	if _, err := svc.JobOf(ctx, "alice", j.ID); !errors.Is(err, account.ErrNotFound) {
		t.Fatalf("the expired job: %v", err)
	}
}

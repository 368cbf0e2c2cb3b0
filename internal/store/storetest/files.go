package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
)

// testFiles: a file record round-trips every field; an id is stored once;
// updates keep what never changes; usage counts each owner's files and
// bytes; files never attached are listed oldest first until attached or
// deleted.
func testFiles(t *testing.T, s store.Store) {
	ctx := context.Background()
	t0 := time.Unix(1_763_800_000, 123_000_000).UTC()
	img := store.File{ID: "f-img", Owner: "alice", Name: "cat.jpg", Size: 123_456, ContentType: "image/jpeg",
		Width: 4032, Height: 3024, Blurhash: "LEHV6nWB2yk8pyo0adR*.7kCMdnj", BlobKey: "f/aa/f-img",
		ThumbKey: "t/aa/f-img", CreatedAt: t0}
	voice := store.File{ID: "f-voice", Owner: "alice", Name: "note.m4a", Size: 9_000, ContentType: "audio/mp4",
		DurationMs: 4_250, BlobKey: "uploads/f-voice", CreatedAt: t0.Add(time.Minute)}
	doc := store.File{ID: "f-doc", Owner: "bob", Name: "report.pdf", Size: 1 << 20, ContentType: "application/pdf",
		BlobKey: "f/bb/f-doc", CreatedAt: t0.Add(2 * time.Minute)}
	for _, f := range []store.File{voice, img, doc} {
		if err := s.PutFile(ctx, f); err != nil {
			t.Fatalf("PutFile(%s): %v", f.ID, err)
		}
	}
	get := func(id string) store.File {
		t.Helper()
		f, err := s.GetFile(ctx, id)
		if err != nil {
			t.Fatalf("GetFile(%s): %v", id, err)
		}
		f.CreatedAt = f.CreatedAt.UTC()
		return f
	}
	if got := get("f-img"); got != img {
		t.Fatalf("GetFile = %+v, want %+v", got, img)
	}
	if _, err := s.GetFile(ctx, "f-none"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetFile(missing) err = %v, want ErrNotFound", err)
	}
	dup := doc
	dup.Owner, dup.Size = "mallory", 1
	if err := s.PutFile(ctx, dup); !errors.Is(err, store.ErrExists) {
		t.Fatalf("PutFile(taken id) err = %v, want ErrExists", err)
	}
	if got := get("f-doc"); got != doc {
		t.Fatalf("a refused PutFile changed the record: %+v", got)
	}
	usage := func(owner string, wantFiles, wantBytes int64) {
		t.Helper()
		n, b, err := s.MediaUsage(ctx, owner)
		if err != nil || n != wantFiles || b != wantBytes {
			t.Fatalf("MediaUsage(%s) = %d, %d, %v; want %d, %d", owner, n, b, err, wantFiles, wantBytes)
		}
	}
	usage("alice", 2, img.Size+voice.Size)
	usage("bob", 1, doc.Size)
	usage("mallory", 0, 0)

	// An update (a thumbnail made later) cannot change owner, size or time.
	upd := voice
	upd.Owner, upd.Size, upd.CreatedAt = "mallory", 1, t0.Add(time.Hour)
	upd.ThumbKey, upd.Name = "t/voice", "renamed.m4a"
	if err := s.UpdateFile(ctx, upd); err != nil {
		t.Fatal(err)
	}
	want := voice
	want.ThumbKey, want.Name = "t/voice", "renamed.m4a"
	if got := get("f-voice"); got != want {
		t.Fatalf("after UpdateFile: %+v, want %+v", got, want)
	}
	usage("alice", 2, img.Size+voice.Size)
	if err := s.UpdateFile(ctx, store.File{ID: "f-none"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UpdateFile(missing) err = %v, want ErrNotFound", err)
	}

	unattached := func(before time.Time, limit int) []string {
		t.Helper()
		fs, err := s.UnattachedFiles(ctx, before, limit)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, f := range fs {
			ids = append(ids, f.ID)
		}
		return ids
	}
	eq := func(got []string, want ...string) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if got[i] != want[i] {
				return false
			}
		}
		return true
	}
	if got := unattached(t0.Add(time.Hour), 10); !eq(got, "f-img", "f-voice", "f-doc") {
		t.Fatalf("UnattachedFiles = %v, want oldest first [f-img f-voice f-doc]", got)
	}
	if got := unattached(t0.Add(90*time.Second), 10); !eq(got, "f-img", "f-voice") {
		t.Fatalf("UnattachedFiles(before the third) = %v", got)
	}
	if got := unattached(t0.Add(time.Hour), 1); !eq(got, "f-img") {
		t.Fatalf("UnattachedFiles(limit 1) = %v", got)
	}
	if err := s.AttachFiles(ctx, []string{"f-img", "f-none", "f-img"}); err != nil {
		t.Fatal(err)
	}
	if !get("f-img").Attached {
		t.Fatal("AttachFiles did not mark the file attached")
	}
	if got := unattached(t0.Add(time.Hour), 10); !eq(got, "f-voice", "f-doc") {
		t.Fatalf("UnattachedFiles after attaching f-img = %v", got)
	}
	// Attaching twice, and an update of an attached file, keep it attached.
	if err := s.AttachFiles(ctx, []string{"f-img"}); err != nil {
		t.Fatal(err)
	}
	a := get("f-img")
	a.Blurhash = "L00000fQfQfQfQfQfQfQfQfQfQfQ"
	if err := s.UpdateFile(ctx, a); err != nil {
		t.Fatal(err)
	}
	if got := unattached(t0.Add(time.Hour), 10); !eq(got, "f-voice", "f-doc") {
		t.Fatalf("UnattachedFiles after updating an attached file = %v", got)
	}

	if ok, err := s.DeleteFile(ctx, "f-voice"); err != nil || !ok {
		t.Fatalf("DeleteFile = %v, %v", ok, err)
	}
	if ok, err := s.DeleteFile(ctx, "f-voice"); err != nil || ok {
		t.Fatalf("DeleteFile again = %v, %v; want false, nil", ok, err)
	}
	if _, err := s.GetFile(ctx, "f-voice"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetFile(deleted) err = %v", err)
	}
	usage("alice", 1, img.Size)
	if got := unattached(t0.Add(time.Hour), 10); !eq(got, "f-doc") {
		t.Fatalf("UnattachedFiles after deleting f-voice = %v", got)
	}
	if ok, err := s.DeleteFile(ctx, "f-img"); err != nil || !ok {
		t.Fatalf("DeleteFile(attached) = %v, %v", ok, err)
	}
	usage("alice", 0, 0)
	// The id is free again.
	if err := s.PutFile(ctx, voice); err != nil {
		t.Fatalf("PutFile after delete: %v", err)
	}
	usage("alice", 1, voice.Size)
}

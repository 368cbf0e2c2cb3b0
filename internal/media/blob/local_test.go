package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyim/parley/internal/media/blob"
	"github.com/parleyim/parley/internal/media/blob/blobtest"
)

func newLocal(t *testing.T) *blob.Local {
	t.Helper()
	s, err := blob.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestLocal(t *testing.T) {
	blobtest.Run(t, func(t *testing.T) blob.Store { return newLocal(t) })
}

// TestLocalLeavesNoFiles: after Puts that fail, the directory holds only
// what the successful Puts made; files are 0600, directories 0700.
func TestLocalLeavesNoFiles(t *testing.T) {
	dir := t.TempDir()
	s, err := blob.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Put(ctx, "f/ab/ok", strings.NewReader("hello"), 5, ""); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		r    io.Reader
		size int64
	}{
		{strings.NewReader("hello"), 4},
		{strings.NewReader("hello"), 6},
		{&failAfter{data: []byte("hello")}, -1},
		{&failAfter{data: []byte("hello")}, 10},
	} {
		if err := s.Put(ctx, "f/ab/bad", c.r, c.size, ""); err == nil {
			t.Fatalf("Put size %d: no error", c.size)
		}
	}
	var found []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			if p != dir && fi.Mode().Perm() != 0o700 {
				t.Errorf("directory %s has mode %v, want 0700", rel, fi.Mode().Perm())
			}
			return nil
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("file %s has mode %v, want 0600", rel, fi.Mode().Perm())
		}
		found = append(found, rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0] != filepath.FromSlash("f/ab/ok") {
		t.Errorf("files under the root: %q, want only f/ab/ok", found)
	}
}

// failAfter gives its data, then fails.
type failAfter struct{ data []byte }

func (f *failAfter) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, errors.New("source failed")
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// TestLocalSymlinkCannotEscape: a symbolic link planted under the root
// that points outside it is not followed.
func TestLocalSymlinkCannotEscape(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	s, err := blob.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if o, err := s.Open(ctx, "f/secret"); err == nil {
		o.Close()
		t.Fatal("Open followed a symlink out of the root")
	}
	if err := s.Put(ctx, "f/planted", bytes.NewReader([]byte("x")), 1, ""); err == nil {
		t.Fatal("Put wrote through a symlink out of the root")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a file appeared outside the root: %v", err)
	}
	if err := s.Delete(ctx, "f/secret"); err == nil {
		if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
			t.Fatalf("Delete removed a file outside the root: %v", err)
		}
	}
}

func TestNewLocalNeedsDir(t *testing.T) {
	if _, err := blob.NewLocal(""); err == nil {
		t.Fatal("NewLocal(\"\"): no error")
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o600)
	if _, err := blob.NewLocal(file); err == nil {
		t.Fatal("NewLocal of a file: no error")
	}
}

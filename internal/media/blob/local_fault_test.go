package blob

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// faultyFile is a temporary file whose writes run out of space after
// budget bytes, or whose Sync fails. It has no ReadFrom, so every byte
// goes through Write.
type faultyFile struct {
	f       *os.File
	budget  int
	syncErr error
}

func (f *faultyFile) Close() error { return f.f.Close() }

func (f *faultyFile) Write(p []byte) (int, error) {
	if len(p) > f.budget {
		n, _ := f.f.Write(p[:f.budget])
		f.budget = 0
		return n, syscall.ENOSPC
	}
	f.budget -= len(p)
	return f.f.Write(p)
}

func (f *faultyFile) Sync() error {
	if f.syncErr != nil {
		return f.syncErr
	}
	return f.f.Sync()
}

// TestLocalDiskFaults: a full disk or a failing fsync fails Put with the
// error, leaves neither the object nor a temporary file, and the store
// works again once the fault is gone.
func TestLocalDiskFaults(t *testing.T) {
	dir := t.TempDir()
	l, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ctx := context.Background()
	healthy := l.create
	for _, c := range []struct {
		name string
		file func(*os.File) *faultyFile
		want error
	}{
		{"disk full", func(f *os.File) *faultyFile { return &faultyFile{f: f, budget: 1000} }, syscall.ENOSPC},
		{"fsync", func(f *os.File) *faultyFile { return &faultyFile{f: f, budget: 1 << 30, syncErr: syscall.EIO} }, syscall.EIO},
	} {
		l.create = func(name string) (tempFile, error) {
			f, err := healthy(name)
			if err != nil {
				return nil, err
			}
			return c.file(f.(*os.File)), nil
		}
		err := l.Put(ctx, "f/x", strings.NewReader(strings.Repeat("x", 5000)), 5000, "")
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Put: %v, want %v", c.name, err, c.want)
		}
		if _, err := l.Stat(ctx, "f/x"); !errors.Is(err, ErrNotFound) {
			t.Errorf("%s: Stat after the failed Put: %v, want ErrNotFound", c.name, err)
		}
		if entries, _ := os.ReadDir(filepath.Join(dir, localTmp)); len(entries) != 0 {
			t.Errorf("%s: %d temporary files left", c.name, len(entries))
		}
	}
	l.create = healthy
	if err := l.Put(ctx, "f/x", strings.NewReader("back"), 4, ""); err != nil {
		t.Fatalf("Put once the disk is healthy: %v", err)
	}
}

// TestLocalSweepsStaleTemps: NewLocal removes temporary files a crashed
// Put left an hour ago, and keeps ones a running Put may be writing.
func TestLocalSweepsStaleTemps(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, localTmp), 0o700); err != nil {
		t.Fatal(err)
	}
	stale, fresh := filepath.Join(dir, localTmp, "put-stale"), filepath.Join(dir, localTmp, "put-fresh")
	for _, p := range []string{stale, fresh} {
		if err := os.WriteFile(p, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	old := time.Now().Add(-localStaleTemp - time.Minute)
	if err := os.Chtimes(stale, old, old); err != nil {
		t.Fatal(err)
	}
	l, err := NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale temporary file: %v, want it gone", err)
	}
	if _, err := os.Stat(fresh); err != nil {
		t.Errorf("fresh temporary file: %v, want it kept", err)
	}
}

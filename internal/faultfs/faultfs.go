// Package faultfs is a Pebble filesystem for tests that runs out of space:
// it wraps another vfs.FS, counts the bytes allocated under a budget and
// fails writes past it with ENOSPC, and reports a matching disk usage. It
// lets a test fill "the disk" without a real small volume.
package faultfs

import (
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// FS is a vfs.FS with a byte budget. Safe for concurrent use.
//
// Space is modelled like a filesystem's blocks: each file (by name) holds
// the largest extent written or preallocated to it; writing inside it costs
// nothing, growing it costs the growth; removing the file frees it all.
type FS struct {
	vfs.FS
	mu     sync.Mutex
	budget int64            // total bytes of the pretend volume
	used   int64            // sum of alloc
	alloc  map[string]int64 // allocated extent per file
	fails  int64            // writes refused with ENOSPC
}

var _ vfs.FS = (*FS)(nil)

// New wraps inner (vfs.Default when nil) with a volume of budget bytes.
// Files that existed before are not counted.
func New(inner vfs.FS, budget int64) *FS {
	if inner == nil {
		inner = vfs.Default
	}
	return &FS{FS: inner, budget: budget, alloc: make(map[string]int64)}
}

// SetBudget resizes the pretend volume (freeing space, or taking it).
func (fs *FS) SetBudget(budget int64) {
	fs.mu.Lock()
	fs.budget = budget
	fs.mu.Unlock()
}

// Used returns the bytes counted as in use.
func (fs *FS) Used() int64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.used
}

// Failures returns how many writes were refused with ENOSPC.
func (fs *FS) Failures() int64 {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.fails
}

// grow extends name's allocation to end, or fails with ENOSPC.
func (fs *FS) grow(name string, end int64) error {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	n := end - fs.alloc[name]
	if n <= 0 {
		return nil
	}
	if fs.used+n > fs.budget {
		fs.fails++
		return syscall.ENOSPC
	}
	fs.used += n
	fs.alloc[name] = end
	return nil
}

func (fs *FS) release(name string) {
	fs.mu.Lock()
	fs.used -= fs.alloc[name]
	delete(fs.alloc, name)
	fs.mu.Unlock()
}

func (fs *FS) move(oldname, newname string) {
	fs.mu.Lock()
	if n, ok := fs.alloc[oldname]; ok {
		delete(fs.alloc, oldname)
		fs.alloc[newname] = n
	}
	fs.mu.Unlock()
}

// GetDiskUsage implements vfs.FS: the pretend volume.
func (fs *FS) GetDiskUsage(string) (vfs.DiskUsage, error) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	avail := max(0, fs.budget-fs.used)
	return vfs.DiskUsage{AvailBytes: uint64(avail), TotalBytes: uint64(fs.budget), UsedBytes: uint64(fs.used)}, nil
}

// Unwrap implements vfs.FS.
func (fs *FS) Unwrap() vfs.FS { return fs.FS }

// Create implements vfs.FS (it truncates).
func (fs *FS) Create(name string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.Create(name, cat)
	if err != nil {
		return nil, err
	}
	fs.release(name)
	return &file{File: f, fs: fs, name: name}, nil
}

// OpenReadWrite implements vfs.FS.
func (fs *FS) OpenReadWrite(name string, cat vfs.DiskWriteCategory, opts ...vfs.OpenOption) (vfs.File, error) {
	f, err := fs.FS.OpenReadWrite(name, cat, opts...)
	if err != nil {
		return nil, err
	}
	return &file{File: f, fs: fs, name: name}, nil
}

// ReuseForWrite implements vfs.FS: the old file's blocks are reused.
func (fs *FS) ReuseForWrite(oldname, newname string, cat vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname, cat)
	if err != nil {
		return nil, err
	}
	fs.move(oldname, newname)
	return &file{File: f, fs: fs, name: newname}, nil
}

// Remove implements vfs.FS.
func (fs *FS) Remove(name string) error {
	if err := fs.FS.Remove(name); err != nil {
		return err
	}
	fs.release(name)
	return nil
}

// Rename implements vfs.FS: a replaced file's blocks are freed.
func (fs *FS) Rename(oldname, newname string) error {
	if err := fs.FS.Rename(oldname, newname); err != nil {
		return err
	}
	if oldname != newname {
		fs.release(newname)
		fs.move(oldname, newname)
	}
	return nil
}

type file struct {
	vfs.File
	fs   *FS
	name string
	pos  int64 // offset of the next Write
}

func (f *file) Write(p []byte) (int, error) {
	if err := f.fs.grow(f.name, f.pos+int64(len(p))); err != nil {
		return 0, err
	}
	n, err := f.File.Write(p)
	f.pos += int64(n)
	return n, err
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if err := f.fs.grow(f.name, off+int64(len(p))); err != nil {
		return 0, err
	}
	return f.File.WriteAt(p, off)
}

// Preallocate allocates the range, like fallocate.
func (f *file) Preallocate(offset, length int64) error {
	if err := f.fs.grow(f.name, offset+length); err != nil {
		return err
	}
	return f.File.Preallocate(offset, length)
}

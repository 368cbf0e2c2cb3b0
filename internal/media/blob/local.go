package blob

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

const (
	localDirPerm  = 0o700
	localFilePerm = 0o600
	// localTmp holds Put's files until they are complete; no key can name
	// it, as no key element starts with ".".
	localTmp = ".tmp"
	// localStaleTemp is the age past which NewLocal removes a temporary file
	// left by a process that died mid-Put. A live Put writes more often.
	localStaleTemp = time.Hour
)

// Local is a Store of files under one directory: the object under key
// "a/b" is the file <root>/a/b, directories are made 0700 and files 0600.
// Directories emptied by Delete are left (keys fan out over few of them).
type Local struct {
	dir  string   // absolute path of the root; tusd's filestore takes paths
	root *os.Root // every file access of our own goes through it
	// create makes Put's temporary file; tests swap in files that fail.
	create func(name string) (tempFile, error)
	bufs   sync.Pool // of *[copyBufSize]byte slices, for Put's copies
}

// tempFile is what Put needs of its temporary file.
type tempFile interface {
	io.Writer
	Sync() error
	Close() error
}

var _ Store = (*Local)(nil)

// NewLocal returns a Local store rooted at dir (made if missing). It
// removes temporary files that a crashed process left there over an hour
// ago.
func NewLocal(dir string) (*Local, error) {
	if dir == "" {
		return nil, errors.New("blob: local store needs a directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("blob: local store: %w", err)
	}
	if err := os.MkdirAll(abs, localDirPerm); err != nil {
		return nil, fmt.Errorf("blob: local store: %w", err)
	}
	root, err := os.OpenRoot(abs)
	if err != nil {
		return nil, fmt.Errorf("blob: local store: %w", err)
	}
	for _, d := range []string{localTmp, strings.TrimSuffix(tusPrefix, "/")} {
		if err := root.MkdirAll(d, localDirPerm); err != nil {
			root.Close()
			return nil, fmt.Errorf("blob: local store: %w", err)
		}
	}
	l := &Local{dir: abs, root: root}
	l.bufs.New = func() any { b := make([]byte, copyBufSize); return &b }
	l.create = func(name string) (tempFile, error) {
		return root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, localFilePerm)
	}
	l.sweepTemps(time.Now().Add(-localStaleTemp))
	return l, nil
}

// sweepTemps removes temporary files last written before cutoff. Best
// effort: a file it cannot remove now is tried at the next start.
func (l *Local) sweepTemps(cutoff time.Time) {
	d, err := l.root.Open(localTmp)
	if err != nil {
		return
	}
	defer d.Close()
	for {
		entries, err := d.ReadDir(256)
		for _, e := range entries {
			if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
				_ = l.root.Remove(localTmp + "/" + e.Name())
			}
		}
		if err != nil {
			return
		}
	}
}

// Put writes r to a temporary file, fsyncs it, renames it to key and
// fsyncs the directory, so the object appears whole or not at all and
// survives a crash once Put returns nil.
func (l *Local) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) (err error) {
	if err := checkPutKey(key); err != nil {
		return err
	}
	if size < -1 {
		return errNegativeSize
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := path.Dir(key)
	if err := l.root.MkdirAll(dir, localDirPerm); err != nil {
		return fmt.Errorf("blob: put %q: %w", key, err)
	}
	tmp := localTmp + "/put-" + randomHex(12)
	f, err := l.create(tmp)
	if err != nil {
		return fmt.Errorf("blob: put %q: %w", key, err)
	}
	open, renamed := true, false
	defer func() {
		if err == nil {
			return
		}
		if open {
			_ = f.Close()
		}
		if renamed {
			_ = l.root.Remove(key)
		} else {
			_ = l.root.Remove(tmp)
		}
	}()
	buf := l.bufs.Get().(*[]byte)
	// writerOnly hides the file's ReadFrom, which would copy through
	// io.Copy's 32 KiB buffer: writes were most of an upload's CPU.
	_, err = io.CopyBuffer(writerOnly{f}, newExactReader(ctx, r, size), *buf)
	l.bufs.Put(buf)
	if err != nil {
		return fmt.Errorf("blob: put %q: %w", key, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("blob: put %q: %w", key, err)
	}
	open = false
	if err := f.Close(); err != nil {
		return fmt.Errorf("blob: put %q: %w", key, err)
	}
	if err := l.root.Rename(tmp, key); err != nil {
		return fmt.Errorf("blob: put %q: %w", key, err)
	}
	renamed = true
	// Without the directory's fsync a crash could lose the rename; the
	// object is taken back then, so a failed Put never leaves it.
	if err := l.syncDir(dir); err != nil {
		return fmt.Errorf("blob: put %q: %w", key, err)
	}
	return nil
}

// copyBufSize is Put's copy buffer: one system call per 256 KiB written
// instead of per 32 KiB.
const copyBufSize = 256 << 10

type writerOnly struct{ w io.Writer }

func (w writerOnly) Write(p []byte) (int, error) { return w.w.Write(p) }

func (l *Local) syncDir(dir string) error {
	d, err := l.root.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// Open opens key's file; the Object's reads fail once ctx is done.
func (l *Local) Open(ctx context.Context, key string) (Object, error) {
	if err := CheckKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := l.root.Open(key)
	if err != nil {
		return nil, l.fileErr("open", key, err)
	}
	fi, err := f.Stat()
	if err == nil {
		err = l.checkObject(key, fi)
	}
	if err != nil {
		f.Close()
		return nil, l.fileErr("open", key, err)
	}
	return &localObject{ctx: ctx, f: f, size: fi.Size(), mod: fi.ModTime()}, nil
}

// Stat reports key's file.
func (l *Local) Stat(ctx context.Context, key string) (Info, error) {
	if err := CheckKey(key); err != nil {
		return Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	fi, err := l.root.Stat(key)
	if err == nil {
		err = l.checkObject(key, fi)
	}
	if err != nil {
		return Info{}, l.fileErr("stat", key, err)
	}
	return Info{Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// checkObject says whether a file found under key is an object: a regular
// file, and for a tus upload a complete one.
func (l *Local) checkObject(key string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return ErrNotFound // a directory on the way to other keys
	}
	if id, ok := strings.CutPrefix(key, tusPrefix); ok {
		return l.tusComplete(id, fi.Size())
	}
	return nil
}

// fileErr maps a missing file (or a file where a directory should be) to
// ErrNotFound.
func (l *Local) fileErr(op, key string, err error) error {
	if errors.Is(err, ErrNotFound) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("%w: %q", ErrNotFound, key)
	}
	return fmt.Errorf("blob: %s %q: %w", op, key, err)
}

// Delete removes key's file; for a tus upload also its .info.
func (l *Local) Delete(ctx context.Context, key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	names := []string{key}
	if id, ok := strings.CutPrefix(key, tusPrefix); ok && validTusID(id) {
		names = append(names, key+".info")
	}
	for _, name := range names {
		fi, err := l.root.Lstat(name)
		if err == nil && fi.IsDir() {
			continue // not an object: only other keys' directory
		}
		if err == nil {
			err = l.root.Remove(name)
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("blob: delete %q: %w", key, err)
		}
	}
	return nil
}

// PresignGet is not offered: Parley serves local files itself.
func (l *Local) PresignGet(ctx context.Context, key string, ttl time.Duration, downloadName, contentType string) (string, error) {
	return "", ErrNotSupported
}

// Close closes the root directory.
func (l *Local) Close() error {
	return l.root.Close()
}

// localObject is an open file that checks its context before each read.
type localObject struct {
	ctx  context.Context
	f    *os.File
	size int64
	mod  time.Time
}

func (o *localObject) Read(p []byte) (int, error) {
	if err := o.ctx.Err(); err != nil {
		return 0, err
	}
	return o.f.Read(p)
}

func (o *localObject) ReadAt(p []byte, off int64) (int, error) {
	if err := o.ctx.Err(); err != nil {
		return 0, err
	}
	return o.f.ReadAt(p, off)
}

func (o *localObject) Seek(offset int64, whence int) (int64, error) { return o.f.Seek(offset, whence) }
func (o *localObject) Close() error                                 { return o.f.Close() }
func (o *localObject) Size() int64                                  { return o.size }
func (o *localObject) ModTime() time.Time                           { return o.mod }

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail (it panics where it cannot read)
	return hex.EncodeToString(b)
}

package backup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"time"
)

// TempDir is where, inside a data directory, a backup keeps its snapshot
// while it streams it. One backup at a time per data directory (the server
// serializes them; offline, the store's lock does); anything found there
// is a leftover of a backup that did not finish, removed by CleanTemp.
const TempDir = ".backup-tmp"

// Source is what a backup takes from a data directory.
type Source struct {
	DataDir string
	// Checkpoint writes a consistent copy of the embedded store into dest
	// (which does not exist yet), on the data directory's volume.
	Checkpoint func(ctx context.Context, dest string) error
	// Media: data_dir/media is the media blob store (the local one).
	Media bool
	// Secrets: archive data_dir/secrets.json.
	Secrets bool
	// ParleyVersion is recorded in the archive.
	ParleyVersion string
}

// Snapshot is a data directory frozen for a backup: a store checkpoint and
// hard links to the media files, in DataDir/TempDir. Close removes it.
type Snapshot struct {
	src     Source
	dir     string
	created time.Time
}

// CleanTemp removes what an unfinished backup left in dataDir.
func CleanTemp(dataDir string) error {
	return os.RemoveAll(filepath.Join(dataDir, TempDir))
}

// Prepare freezes src: it checkpoints the store, then links every media
// file (media files are written once and never changed, and a file is in
// place before the store refers to it, so the links taken after the
// checkpoint hold every file the checkpoint refers to, but one deleted in
// the few milliseconds between the two). A leftover of an earlier backup
// is removed first.
func Prepare(ctx context.Context, src Source) (_ *Snapshot, err error) {
	if err := CleanTemp(src.DataDir); err != nil {
		return nil, fmt.Errorf("backup: remove the leftover of an earlier backup: %w", err)
	}
	dir := filepath.Join(src.DataDir, TempDir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	s := &Snapshot{src: src, dir: dir, created: time.Now()}
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	if err := src.Checkpoint(ctx, filepath.Join(dir, StoreDir)); err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	if src.Media {
		if err := linkTree(ctx, filepath.Join(src.DataDir, MediaDir), filepath.Join(dir, MediaDir)); err != nil {
			return nil, fmt.Errorf("backup: media: %w", err)
		}
	}
	if src.Secrets {
		if err := linkOrCopy(filepath.Join(src.DataDir, SecretsFile), filepath.Join(dir, SecretsFile)); err != nil {
			return nil, fmt.Errorf("backup: %w", err)
		}
	}
	return s, nil
}

// WriteTo streams the snapshot as an archive to w and returns its
// manifest. It stops at the first write error (a client gone) or when ctx
// ends.
func (s *Snapshot) WriteTo(ctx context.Context, w io.Writer) (*Manifest, error) {
	aw, err := NewWriter(w, s.src.ParleyVersion, s.created)
	if err != nil {
		return nil, err
	}
	if s.src.Secrets {
		if err := aw.AddFile(SecretsFile, filepath.Join(s.dir, SecretsFile)); err != nil {
			return nil, err
		}
	}
	for _, top := range []string{StoreDir, MediaDir} {
		root := filepath.Join(s.dir, top)
		err := walkFiles(root, func(rel string) error {
			if err := ctx.Err(); err != nil {
				return err
			}
			return aw.AddFile(top+"/"+rel, filepath.Join(root, filepath.FromSlash(rel)))
		})
		if err != nil && !(top == MediaDir && errors.Is(err, fs.ErrNotExist) && !s.src.Media) {
			return nil, err
		}
	}
	return aw.Close()
}

// Close removes the snapshot's files (the store's and media files stay:
// they were links).
func (s *Snapshot) Close() error { return os.RemoveAll(s.dir) }

// walkFiles calls fn with the slash-separated path (relative to root) of
// every regular file under root, in lexical order.
func walkFiles(root string, fn func(rel string) error) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		return fn(filepath.ToSlash(rel))
	})
}

// linkTree hard-links every regular file under src into the same place
// under dst, but for the media store's temporary files (.tmp: uploads not
// yet complete, which a restored server would delete).
func linkTree(ctx context.Context, src, dst string) error {
	if _, err := os.Stat(src); errors.Is(err, fs.ErrNotExist) {
		return os.Mkdir(dst, 0o700) // no media yet
	}
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p != src && errors.Is(err, fs.ErrNotExist) {
				return nil // removed meanwhile
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if rel == ".tmp" || strings.HasPrefix(rel, ".tmp"+string(filepath.Separator)) {
			return fs.SkipDir
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o700)
		case d.Type().IsRegular():
			if err := linkOrCopy(p, target); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
		return nil
	})
}

// linkOrCopy hard-links src to dst, or copies it when the two cannot be
// linked (another volume, a filesystem without links).
func linkOrCopy(src, dst string) error {
	err := os.Link(src, dst)
	if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrExist) {
		return err
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// BuildVersion is the running binary's version as Go recorded it (module
// version, else the VCS revision), for a server that is not told its own.
func BuildVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	v := bi.Main.Version
	if i := slices.IndexFunc(bi.Settings, func(s debug.BuildSetting) bool { return s.Key == "vcs.revision" }); i >= 0 && (v == "" || v == "(devel)") {
		v = "(devel) " + bi.Settings[i].Value
	}
	return v
}

package backup

import (
	"archive/tar"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Limits bound what a reader accepts of an archive, so a malicious or
// damaged one cannot exhaust memory or disk by its headers alone.
type Limits struct {
	// MaxFileBytes bounds one file. 0 means 1 TiB.
	MaxFileBytes int64
	// MaxFiles bounds the number of files (the reader keeps a few dozen
	// bytes per file). 0 means 10 million.
	MaxFiles int
	// MaxManifestBytes bounds the manifest, which is read into memory.
	// 0 means 1 GiB (about 7 million files).
	MaxManifestBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = 1 << 40
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = 10_000_000
	}
	if l.MaxManifestBytes <= 0 {
		l.MaxManifestBytes = 1 << 30
	}
	return l
}

const (
	maxHeaderBytes = 64 << 10
	maxNameBytes   = 4096
	maxElemBytes   = 255
)

// CheckName accepts the names an archive may hold: secrets.json, or a
// clean relative slash-separated path under store/ or media/ whose
// elements are ordinary names (no "..", no ".", no empty element, no
// backslash or NUL): nothing can point outside the directory restored to.
func CheckName(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: file name %.100q %s", ErrInvalid, name, why)
	}
	switch {
	case name == SecretsFile:
		return nil
	case len(name) > maxNameBytes:
		return bad("is too long")
	case strings.ContainsAny(name, "\\\x00"):
		return bad("holds a backslash or NUL")
	case path.IsAbs(name) || path.Clean(name) != name:
		return bad("is not a clean relative path")
	}
	top, rest, ok := strings.Cut(name, "/")
	if !ok || (top != StoreDir && top != MediaDir) || rest == "" {
		return bad("is not under store/ or media/")
	}
	for _, e := range strings.Split(rest, "/") {
		if e == "" || e == "." || e == ".." || len(e) > maxElemBytes {
			return bad("has an invalid element")
		}
	}
	return nil
}

// read reads an archive from r, checking every entry and, at the end, every
// file against the manifest. Each file's content is given to put (which
// must read it to the end or fail); a put error ends the read. It returns
// the manifest once the whole archive checked out.
func read(r io.Reader, lim Limits, put func(name string, size int64, body io.Reader) error) (*Manifest, error) {
	lim = lim.withDefaults()
	cr := &countingReader{r: r}
	tr := tar.NewReader(cr)
	next := func() (*tar.Header, error) {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: it ends before its manifest (truncated?)", ErrInvalid)
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v (truncated or corrupt?)", ErrInvalid, err)
		}
		if h.Typeflag != tar.TypeReg {
			return nil, fmt.Errorf("%w: entry %.100q is not a regular file (type %q)", ErrInvalid, h.Name, h.Typeflag)
		}
		return h, nil
	}
	h, err := next()
	if err != nil {
		return nil, err
	}
	if h.Name != HeaderName || h.Size > maxHeaderBytes || h.Size < 0 {
		return nil, fmt.Errorf("%w: not a Parley backup (first entry %.100q)", ErrInvalid, h.Name)
	}
	var hdr Header
	if err := decodeJSON(tr, h.Size, &hdr); err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrInvalid, err)
	}
	if hdr.Format != FormatVersion {
		return nil, fmt.Errorf("%w: archive format %d; this parley reads format %d", ErrInvalid, hdr.Format, FormatVersion)
	}
	seen := make(map[string]File)
	var order []string
	buf := make([]byte, 256<<10)
	for {
		h, err := next()
		if err != nil {
			return nil, err
		}
		if h.Name == ManifestName {
			if h.Size < 0 || h.Size > lim.MaxManifestBytes {
				return nil, fmt.Errorf("%w: manifest of %d bytes (limit %d)", ErrInvalid, h.Size, lim.MaxManifestBytes)
			}
			var m Manifest
			if err := decodeJSON(tr, h.Size, &m); err != nil {
				return nil, fmt.Errorf("%w: manifest: %v", ErrInvalid, err)
			}
			// The tar end (padding, two zero blocks) must be whole too: the
			// reader takes an end cut short for an end.
			end := (cr.n+511)/512*512 + 1024
			if _, err := tr.Next(); !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: entries after the manifest", ErrInvalid)
			}
			if cr.n != end {
				return nil, fmt.Errorf("%w: it ends inside its last block (truncated?)", ErrInvalid)
			}
			if err := check(&m, &hdr, seen, order); err != nil {
				return nil, err
			}
			return &m, nil
		}
		if err := CheckName(h.Name); err != nil {
			return nil, err
		}
		if h.Size < 0 || h.Size > lim.MaxFileBytes {
			return nil, fmt.Errorf("%w: %.100q claims %d bytes (limit %d)", ErrInvalid, h.Name, h.Size, lim.MaxFileBytes)
		}
		if _, dup := seen[h.Name]; dup {
			return nil, fmt.Errorf("%w: %.100q appears twice", ErrInvalid, h.Name)
		}
		if len(seen) >= lim.MaxFiles {
			return nil, fmt.Errorf("%w: more than %d files", ErrInvalid, lim.MaxFiles)
		}
		sum := sha256.New()
		body := bodyReader{io.TeeReader(tr, sum), h.Name}
		if err := put(h.Name, h.Size, body); err != nil {
			return nil, err
		}
		// What put left unread (nothing, normally) still counts.
		if _, err := io.CopyBuffer(io.Discard, body, buf); err != nil {
			return nil, err
		}
		seen[h.Name] = File{Path: h.Name, Size: h.Size, SHA256: hex.EncodeToString(sum.Sum(nil))}
		order = append(order, h.Name)
	}
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// bodyReader marks a failure to read a file's content (the archive ends
// inside it) as an invalid archive.
type bodyReader struct {
	r    io.Reader
	name string
}

func (b bodyReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: %.100q: %v (truncated?)", ErrInvalid, b.name, err)
	}
	return n, err
}

// check compares what was read with the manifest.
func check(m *Manifest, hdr *Header, seen map[string]File, order []string) error {
	if m.Format != hdr.Format || m.ParleyVersion != hdr.ParleyVersion || !m.Created.Equal(hdr.Created) {
		return fmt.Errorf("%w: the manifest does not match the header", ErrInvalid)
	}
	if len(m.Files) != len(order) {
		return fmt.Errorf("%w: the manifest lists %d files, the archive holds %d", ErrInvalid, len(m.Files), len(order))
	}
	for i, f := range m.Files {
		got := seen[order[i]]
		if f.Path != got.Path {
			return fmt.Errorf("%w: manifest entry %d is %.100q, the archive's is %.100q", ErrInvalid, i, f.Path, got.Path)
		}
		if f.Size != got.Size {
			return fmt.Errorf("%w: %.100q: %d bytes, the manifest says %d", ErrInvalid, f.Path, got.Size, f.Size)
		}
		if f.SHA256 != got.SHA256 {
			return fmt.Errorf("%w: %.100q: SHA-256 %s, the manifest says %.64s (corrupt)", ErrInvalid, f.Path, got.SHA256, f.SHA256)
		}
	}
	return nil
}

func decodeJSON(r io.Reader, size int64, v any) error {
	b, err := io.ReadAll(io.LimitReader(r, size))
	if err != nil {
		return err
	}
	if int64(len(b)) != size {
		return io.ErrUnexpectedEOF
	}
	return json.Unmarshal(b, v)
}

// Verify reads a whole archive from r and checks it, writing nothing.
func Verify(r io.Reader, lim Limits) (*Manifest, error) {
	return read(r, lim, func(string, int64, io.Reader) error { return nil })
}

// ErrNotEmpty is returned by Restore for a target directory that holds
// something.
var ErrNotEmpty = errors.New("backup: the directory to restore into is not empty")

// Restore reads an archive from r into dir, which must not exist or be an
// empty directory. The files are written into a new directory beside dir
// (dir's name + ".restoring-" + random), checked against the manifest,
// synced, and only then is that directory renamed to dir. On any error
// (a truncated, corrupt or malicious archive, a full disk) the new
// directory is removed and dir is left as it was: nothing half restored
// is left under dir's name.
func Restore(r io.Reader, dir string, lim Limits) (_ *Manifest, err error) {
	dir = filepath.Clean(dir)
	existed, err := emptyOrMissing(dir)
	if err != nil {
		return nil, err
	}
	if existed {
		// It is replaced at the end: find out now if it cannot be (a
		// mount point), not after the whole archive was read.
		if err := os.Remove(dir); err != nil {
			return nil, fmt.Errorf("backup: %s cannot be replaced by the restored directory (a mount point?): restore into a new directory inside it: %w", dir, err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, err
		}
	}
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return nil, err
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	staging := dir + ".restoring-" + hex.EncodeToString(rnd[:])
	if err := os.Mkdir(staging, 0o700); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(staging)
		}
	}()
	root, err := os.OpenRoot(staging)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	dirs := map[string]bool{".": true}
	m, err := read(r, lim, func(name string, size int64, body io.Reader) error {
		// CheckName passed; the root refuses any escape all the same.
		d := path.Dir(name)
		if !dirs[d] {
			if err := root.MkdirAll(d, 0o700); err != nil {
				return err
			}
			for p := d; p != "."; p = path.Dir(p) {
				dirs[p] = true
			}
		}
		f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		n, err := io.Copy(f, body)
		if err == nil && n != size {
			err = fmt.Errorf("%w: %.100q: %d of %d bytes (truncated?)", ErrInvalid, name, n, size)
		}
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	for d := range dirs {
		if err := syncDir(filepath.Join(staging, filepath.FromSlash(d))); err != nil {
			return nil, err
		}
	}
	// dir is checked again: something may have appeared meanwhile.
	if existed {
		if err := os.Remove(dir); err != nil {
			if _, e := emptyOrMissing(dir); e != nil {
				return nil, e
			}
			return nil, err
		}
	}
	if err := os.Rename(staging, dir); err != nil {
		if existed {
			_ = os.Mkdir(dir, 0o700) // as it was
		}
		return nil, fmt.Errorf("backup: put the restored directory in place: %w", err)
	}
	if err := syncDir(parent); err != nil {
		return m, fmt.Errorf("backup: restored into %s, but syncing %s failed: %w", dir, parent, err)
	}
	return m, nil
}

// emptyOrMissing reports whether dir exists (as an empty directory); an
// error when it is anything else.
func emptyOrMissing(dir string) (bool, error) {
	f, err := os.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if !fi.IsDir() {
		return false, fmt.Errorf("%w: %s is not a directory", ErrNotEmpty, dir)
	}
	names, err := f.Readdirnames(1)
	if len(names) > 0 {
		return true, fmt.Errorf("%w: %s holds %s (restore into a new or empty directory)", ErrNotEmpty, dir, names[0])
	}
	if err != nil && !errors.Is(err, io.EOF) {
		return false, err
	}
	return true, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

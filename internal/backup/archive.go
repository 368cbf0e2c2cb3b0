// Package backup is the archive of a Parley data directory: what `parley
// backup` writes and `parley restore` reads (docs/backup.md).
//
// An archive is a tar stream (uncompressed: the store's tables are already
// compressed by Pebble and media are mostly compressed images, see
// docs/backup.md). Its first entry, PARLEY-BACKUP.json, names the format
// version, so a reader refuses a format it does not know before it writes
// anything. Then come the files, each a regular file under store/ or
// media/, or secrets.json. The last entry, MANIFEST.json, lists every file
// with its size and SHA-256: it is written once the files are, so the
// archive is made in one pass, and a reader checks each file against it
// before anything it restored is put in place.
package backup

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// FormatVersion is the archive format this package writes and reads.
const FormatVersion = 1

// Names inside an archive (and inside a data directory).
const (
	HeaderName   = "PARLEY-BACKUP.json"
	ManifestName = "MANIFEST.json"
	StoreDir     = "store"
	MediaDir     = "media"
	SecretsFile  = "secrets.json"
)

// Header is the archive's first entry.
type Header struct {
	Format        int       `json:"format"`
	ParleyVersion string    `json:"parley_version"`
	Created       time.Time `json:"created"`
}

// Manifest is the archive's last entry: the header's fields again, and
// every file of the archive in archive order.
type Manifest struct {
	Format        int       `json:"format"`
	ParleyVersion string    `json:"parley_version"`
	Created       time.Time `json:"created"`
	Files         []File    `json:"files"`
}

// File is one file of an archive.
type File struct {
	Path   string `json:"path"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // hex
}

// Bytes is the total size of the files.
func (m *Manifest) Bytes() int64 {
	var n int64
	for _, f := range m.Files {
		n += f.Size
	}
	return n
}

// Writer writes an archive: NewWriter, AddFile for each file, Close.
type Writer struct {
	tw  *tar.Writer
	m   Manifest
	buf []byte
}

// NewWriter writes the header entry to w.
func NewWriter(w io.Writer, parleyVersion string, created time.Time) (*Writer, error) {
	created = created.UTC().Truncate(time.Second)
	aw := &Writer{tw: tar.NewWriter(w), buf: make([]byte, 256<<10),
		m: Manifest{Format: FormatVersion, ParleyVersion: parleyVersion, Created: created}}
	b, err := json.Marshal(Header{Format: FormatVersion, ParleyVersion: parleyVersion, Created: created})
	if err != nil {
		return nil, err
	}
	if err := aw.entry(HeaderName, int64(len(b))); err != nil {
		return nil, err
	}
	if _, err := aw.tw.Write(b); err != nil {
		return nil, err
	}
	return aw, nil
}

func (w *Writer) entry(name string, size int64) error {
	return w.tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Size: size, Mode: 0o600,
		ModTime: w.m.Created, Format: tar.FormatPAX})
}

// AddFile adds the regular file at path as name (a slash-separated path
// that CheckName accepts). Its size is taken when it is opened and exactly
// that many bytes are archived: a file that shrinks meanwhile is an error.
func (w *Writer) AddFile(name, path string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("backup: %s is not a regular file", path)
	}
	size := fi.Size()
	if err := w.entry(name, size); err != nil {
		return err
	}
	h := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(w.tw, h), io.LimitReader(f, size), w.buf)
	if err != nil {
		return err
	}
	if n != size {
		return fmt.Errorf("backup: %s shrank from %d to %d bytes while it was archived", path, size, n)
	}
	w.m.Files = append(w.m.Files, File{Path: name, Size: size, SHA256: hex.EncodeToString(h.Sum(nil))})
	return nil
}

// Close writes the manifest and ends the archive; it returns the manifest.
func (w *Writer) Close() (*Manifest, error) {
	if w.m.Files == nil {
		w.m.Files = []File{}
	}
	b, err := json.Marshal(&w.m)
	if err != nil {
		return nil, err
	}
	if err := w.entry(ManifestName, int64(len(b))); err != nil {
		return nil, err
	}
	if _, err := w.tw.Write(b); err != nil {
		return nil, err
	}
	if err := w.tw.Close(); err != nil {
		return nil, err
	}
	return &w.m, nil
}

// ErrInvalid marks an archive that is not a whole, intact Parley backup
// (truncated, corrupt, tampered with, or of an unknown format).
var ErrInvalid = errors.New("backup: invalid archive")

package pebblestore

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Pebble replays whatever write-ahead logs it finds: a WAL cut short at a
// record boundary, or an older WAL that went missing, opens without a word
// and the acknowledged writes in it are gone (and their seqs issued again).
// The WAL guard keeps its own record of the WALs Pebble writes and of how
// many bytes of each were synced, so Open can tell such a loss from a clean
// state and refuse it.
//
// The record (walRecordFile in the store directory) is rewritten atomically
// (temporary file, fsync, rename, directory fsync):
//   - after Pebble creates a WAL, before it writes anything to it;
//   - before Pebble removes or recycles a WAL (its data is then in tables);
//   - at most once a second while synced sizes grow, and at Close.
//
// So a WAL the record lists as synced to N bytes that is missing or shorter
// than N at Open is a loss. Writes synced less than a second before a crash
// may not be in the record yet: a cut inside that last second is not seen.
// After a clean Close the record is exact.
const (
	walRecordFile     = "PARLEY-WALS"
	walRecordInterval = time.Second
)

// ErrDataLoss is returned by Open when write-ahead logs holding synced
// writes are missing or shorter than they were synced to. Options.AcceptDataLoss
// opens the store anyway.
var ErrDataLoss = errors.New("pebblestore: write-ahead log data is missing")

type walRecord struct {
	Version int         `json:"version"`
	WALs    []walSynced `json:"wals"`
}

type walSynced struct {
	Name   string `json:"name"`
	Synced int64  `json:"synced"`
}

// walGuard is a vfs.FS that watches the WAL files of one directory.
type walGuard struct {
	vfs.FS
	dir string
	log *slog.Logger

	// mu serializes rewrites of the record and guards wals. Pebble creates
	// and removes WALs rarely; Write and Sync do not take it.
	mu    sync.Mutex
	wals  map[string]*walFile // base name → file state
	dirty bool                // a rewrite failed: the loop writes again

	stop chan struct{}
	done chan struct{}
}

// walFile tracks how far one WAL was written and synced.
type walFile struct {
	written atomic.Int64
	synced  atomic.Int64
}

func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

// own reports whether name is a WAL of the guarded directory: a checkpoint
// copies WALs through this FS into another directory, and those copies
// must not replace the live WALs' entries in the record.
func (g *walGuard) own(name string) bool {
	return isWAL(name) && filepath.Clean(filepath.Dir(name)) == filepath.Clean(g.dir)
}

// checkWALs compares dir's WALs with the record and returns the losses found.
// A store without a record (new, or written before the guard existed) has none.
func checkWALs(dir string) (losses []string, err error) {
	b, err := os.ReadFile(filepath.Join(dir, walRecordFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec walRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.Version != 1 {
		return []string{fmt.Sprintf("%s is unreadable (%v)", walRecordFile, err)}, nil
	}
	for _, w := range rec.WALs {
		if w.Synced == 0 {
			continue // created, nothing synced: missing or empty loses nothing
		}
		fi, err := os.Stat(filepath.Join(dir, w.Name))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			losses = append(losses, fmt.Sprintf("%s is missing (%d bytes were synced to it)", w.Name, w.Synced))
		case err != nil:
			return nil, err
		case fi.Size() < w.Synced:
			losses = append(losses, fmt.Sprintf("%s holds %d bytes, %d were synced to it", w.Name, fi.Size(), w.Synced))
		}
	}
	return losses, nil
}

// newWALGuard records the WALs now in dir (their whole size as synced: Open
// checked them, and Pebble replays them) and starts the periodic rewrite.
func newWALGuard(inner vfs.FS, dir string, log *slog.Logger) (*walGuard, error) {
	g := &walGuard{FS: inner, dir: dir, log: log, wals: make(map[string]*walFile),
		stop: make(chan struct{}), done: make(chan struct{})}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	for _, e := range entries {
		if !isWAL(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			return nil, err
		}
		f := &walFile{}
		f.written.Store(fi.Size())
		f.synced.Store(fi.Size())
		g.wals[e.Name()] = f
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := g.write(); err != nil {
		// A full disk: the record is written once there is room (until
		// then the previous one stands, which lists no WAL that vanished).
		log.Warn("pebblestore: cannot record the WALs", "err", err)
	}
	go g.loop()
	return g, nil
}

// record returns the record to write; g.mu must be held.
func (g *walGuard) record() walRecord {
	rec := walRecord{Version: 1, WALs: make([]walSynced, 0, len(g.wals))}
	for name, f := range g.wals {
		rec.WALs = append(rec.WALs, walSynced{Name: name, Synced: f.synced.Load()})
	}
	slices.SortFunc(rec.WALs, func(a, b walSynced) int { return strings.Compare(a.Name, b.Name) })
	return rec
}

// write rewrites the record atomically; g.mu must be held (or g unshared).
func (g *walGuard) write() (err error) {
	defer func() { g.dirty = err != nil }()
	b, err := json.Marshal(g.record())
	if err != nil {
		return err
	}
	path := filepath.Join(g.dir, walRecordFile)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(g.dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	d.Close()
	return err
}

// loop rewrites the record once a second when a synced size grew.
func (g *walGuard) loop() {
	defer close(g.done)
	t := time.NewTicker(walRecordInterval)
	defer t.Stop()
	last := map[string]int64{}
	for {
		select {
		case <-g.stop:
			return
		case <-t.C:
		}
		g.mu.Lock()
		changed := false
		for name, f := range g.wals {
			if s := f.synced.Load(); last[name] != s {
				last[name], changed = s, true
			}
		}
		if changed || g.dirty {
			if err := g.write(); err != nil {
				// The next tick tries again; Open may then miss a cut in the
				// newest writes, never report a false loss.
				g.log.Warn("pebblestore: cannot record WAL sizes", "err", err)
			}
		}
		g.mu.Unlock()
	}
}

// close stops the loop and writes the final record. Call after the DB closed.
func (g *walGuard) close() error {
	close(g.stop)
	<-g.done
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.write()
}

// track wraps a WAL file Pebble opened for writing and records it. A
// failed rewrite of the record does not fail the WAL (Pebble treats that as
// fatal): a WAL missing from the record is only not checked, and the loop
// writes the record again.
func (g *walGuard) track(name string, file vfs.File) vfs.File {
	base := filepath.Base(name)
	f := &walFile{}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.wals[base] = f
	if err := g.write(); err != nil {
		g.log.Warn("pebblestore: cannot record a new WAL", "wal", base, "err", err)
	}
	return &guardedFile{File: file, f: f}
}

// Create implements vfs.FS.
func (g *walGuard) Create(name string, category vfs.DiskWriteCategory) (vfs.File, error) {
	file, err := g.FS.Create(name, category)
	if err != nil || !g.own(name) {
		return file, err
	}
	return g.track(name, file), nil
}

// ReuseForWrite implements vfs.FS: Pebble recycles an obsolete WAL as a new
// one. The old WAL leaves the record before it is renamed away; when the
// record cannot be written, a new file is created instead and the old one
// is left in place, so the record never lists a WAL that vanished.
func (g *walGuard) ReuseForWrite(oldname, newname string, category vfs.DiskWriteCategory) (vfs.File, error) {
	if !g.own(newname) {
		return g.FS.ReuseForWrite(oldname, newname, category)
	}
	if err := g.forget(oldname); err != nil {
		g.log.Warn("pebblestore: not recycling a WAL", "err", err)
		return g.Create(newname, category)
	}
	file, err := g.FS.ReuseForWrite(oldname, newname, category)
	if err != nil {
		return nil, err
	}
	return g.track(newname, file), nil
}

// Remove implements vfs.FS: an obsolete WAL leaves the record first; when
// the record cannot be written the WAL stays (Pebble logs the failed
// deletion and carries on).
func (g *walGuard) Remove(name string) error {
	if g.own(name) {
		if err := g.forget(name); err != nil {
			return err
		}
	}
	return g.FS.Remove(name)
}

func (g *walGuard) forget(name string) error {
	base := filepath.Base(name)
	g.mu.Lock()
	defer g.mu.Unlock()
	f, ok := g.wals[base]
	if !ok {
		return nil
	}
	delete(g.wals, base)
	if err := g.write(); err != nil {
		g.wals[base] = f
		return fmt.Errorf("pebblestore: recording WAL %s removed: %w", base, err)
	}
	return nil
}

// Unwrap implements vfs.FS.
func (g *walGuard) Unwrap() vfs.FS { return g.FS }

// guardedFile counts the bytes written to a WAL and moves its synced size
// when a sync succeeds. Pebble calls Write and the syncs sequentially.
type guardedFile struct {
	vfs.File
	f *walFile
}

func (w *guardedFile) Write(p []byte) (int, error) {
	n, err := w.File.Write(p)
	w.f.written.Add(int64(n))
	return n, err
}

func (w *guardedFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := w.File.WriteAt(p, off)
	if end := off + int64(n); end > w.f.written.Load() {
		w.f.written.Store(end)
	}
	return n, err
}

func (w *guardedFile) Sync() error {
	written := w.f.written.Load()
	err := w.File.Sync()
	if err == nil {
		w.f.synced.Store(written)
	}
	return err
}

func (w *guardedFile) SyncData() error {
	written := w.f.written.Load()
	err := w.File.SyncData()
	if err == nil {
		w.f.synced.Store(written)
	}
	return err
}

func (w *guardedFile) SyncTo(length int64) (bool, error) {
	full, err := w.File.SyncTo(length)
	if err == nil && full {
		w.f.synced.Store(max(w.f.synced.Load(), length))
	}
	return full, err
}

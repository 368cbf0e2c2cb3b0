package pebblestore

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/parleyim/parley/internal/store"
)

// Pebble treats a failed WAL or MANIFEST write as fatal: the commit
// pipeline is left unusable and its logger's Fatalf is called. So the store
// keeps Pebble from meeting a full disk, in three layers:
//
//  1. A free-space floor: a write is refused with store.ErrNoSpace, before
//     it reaches Pebble, when the volume's free space (statfs, cached) minus
//     the write would fall below the floor. Small writes that keep the
//     service usable (cursors, last seen, token revocation, user updates,
//     audit entries, closing reports) may use half of the floor. Writes resume by themselves when space is freed.
//  2. A ballast file, removed by Pebble's vfs.OnDiskFull when a write meets
//     ENOSPC anyway (a compaction, a race past the floor), so that write's
//     retry succeeds. While it is missing its size still counts as used, so
//     removing it does not re-open writes; it is recreated once space is back.
//  3. A write that fails anyway (Pebble's Fatalf panics on the caller's
//     goroutine) is recovered: the caller gets store.ErrNoSpace, the store
//     refuses writes, reopens the directory read-only (dropping what was
//     not written) and back read-write once there is space again.
//
// A store opened on a disk below its floor is opened read-only: reads are
// served, writes refused, and it switches to read-write when space is back.

// Store modes (Store.mode).
const (
	modeRW       int32 = iota // normal
	modeReadOnly              // opened read-only: no space at open or after a failure
	modeFailed                // a write failed: the DB must be reopened before any other write
	modeStuck                 // reopening failed or writers never returned: a restart is needed
)

type writeClass int

const (
	// bulk writes (messages, group changes, new users, contacts, settings,
	// reports) stop at the floor.
	bulk writeClass = iota
	// small writes (cursors, last seen, revocations, user updates, audit
	// entries, closing reports) may go on down to half the floor: clients
	// keep read state, logins work and moderators can act.
	small
)

const (
	// spaceRefresh bounds how stale the cached free space may be: a statfs
	// at most this often, or once refreshBytes were admitted (at most
	// spaceRefreshBytes, 1/16 of the floor and reserve on a small volume).
	spaceRefresh      = 100 * time.Millisecond
	spaceRefreshBytes = 4 << 20
	// defaultFloorPercent of the volume, at most maxDefaultFloor, is the
	// default floor: a small volume keeps most of its space usable.
	defaultFloorPercent = 5
	maxDefaultFloor     = 1 << 30
	// The ballast is a quarter of the floor, at most maxBallast.
	maxBallast = 64 << 20
	// recoverBytesNoFloor: with the floor off, a failed store reopens
	// read-write once this much is free.
	recoverBytesNoFloor = 16 << 20
	// watchInterval: how often the watcher looks at the disk.
	watchInterval = 500 * time.Millisecond
	// drainTimeout: how long a reopen waits for writes still inside Pebble.
	drainTimeout = 10 * time.Second
	ballastName  = "PARLEY-BALLAST"
)

// DiskStatus is the store's view of its volume, for metrics and readiness.
type DiskStatus struct {
	FreeBytes  uint64 // free space as last measured (ballast excluded)
	TotalBytes uint64
	FloorBytes uint64 // 0: no floor
	// ReserveBytes is kept free on top of the floor (room to flush).
	ReserveBytes uint64
	// Refused counts writes refused because of disk space (floor or read-only).
	Refused uint64
	// Failed counts writes that failed inside Pebble and were recovered.
	Failed uint64
	// Writable is false while writes are refused (below the floor, read-only
	// or failed).
	Writable bool
	// Reason says why writes are refused; "" when writable.
	Reason string
}

// disk is the free-space guard; its fields are set at Open.
type disk struct {
	fs    vfs.FS // the volume, unwrapped: statfs and the ballast
	dir   string
	floor uint64
	// reserve is kept free on top of the floor for bulk writes: room to
	// flush the memtables (a new WAL, preallocated to 1.1 memtables, and the
	// flushed table) so a flush never meets a full disk.
	reserve uint64
	ballast int64 // bytes; 0: none

	// compacting: input bytes of the compactions running (by job id), which
	// each may write about as much before deleting its inputs; counted as
	// used so a foreground write does not race a compaction for the last
	// bytes of the disk.
	compactMu    sync.Mutex
	compacting   map[int]uint64
	compactBytes atomic.Uint64

	lastBgLog atomic.Int64 // unix nanos of the last background error logged
	bgErrors  atomic.Int64 // background errors since then

	mu         sync.Mutex
	at         time.Time // when avail was measured
	avail      uint64    // free bytes then
	total      uint64
	admitted   uint64 // bytes admitted since then
	low        bool   // below the floor at the last look (for transition logs)
	ballastOut bool   // the ballast file is missing (counted as used)
}

// floorFor is the floor for a volume of total bytes and the configured value.
func floorFor(cfg int64, total uint64) uint64 {
	switch {
	case cfg < 0:
		return 0
	case cfg > 0:
		return uint64(cfg)
	}
	return min(total*defaultFloorPercent/100, maxDefaultFloor)
}

// measure returns the free space, refreshing the cached statfs when stale
// or when force is set. Called with d.mu held.
func (s *Store) measureLocked(force bool) uint64 {
	d := &s.disk
	if force || d.at.IsZero() || time.Since(d.at) >= spaceRefresh || d.admitted >= d.refreshBytes() {
		du, err := d.fs.GetDiskUsage(d.dir)
		if err != nil {
			s.log.Error("pebblestore: cannot read free disk space", "dir", d.dir, "err", err)
		} else {
			d.avail, d.total = du.AvailBytes, du.TotalBytes
		}
		d.at, d.admitted = time.Now(), 0
		free := d.effective(0)
		switch {
		case !d.low && d.floor > 0 && free < d.floor+d.reserve:
			s.setLowLocked(true, free)
		case d.low && free >= d.floor+d.reserve+d.hysteresis():
			s.setLowLocked(false, free)
		}
	}
	return d.effective(d.admitted)
}

// refreshBytes: admitted bytes after which the free space is measured again.
func (d *disk) refreshBytes() uint64 {
	return min(spaceRefreshBytes, max(64<<10, (d.floor+d.reserve)/16))
}

// hysteresis: once low, writes resume when this much more than the floor
// is free, so the state does not flap on every write or flush (a flush
// frees about a memtable's worth of WAL at once).
func (d *disk) hysteresis() uint64 { return max(1<<20, d.floor/16, d.reserve/3) }

// setLowLocked records and logs a transition below or back above the
// floor. Called with d.mu held.
func (s *Store) setLowLocked(low bool, free uint64) {
	d := &s.disk
	d.low = low
	if low {
		s.log.Error("pebblestore: free disk space below the floor; refusing writes until space is freed",
			"dir", d.dir, "free_bytes", free, "floor_bytes", d.floor, "flush_reserve_bytes", d.reserve)
		return
	}
	s.log.Info("pebblestore: free disk space back above the floor; accepting writes",
		"dir", d.dir, "free_bytes", free, "floor_bytes", d.floor, "flush_reserve_bytes", d.reserve)
}

// effective is the free space less the bytes admitted since it was measured
// and a missing ballast (its space stays reserved). Called with d.mu held.
func (d *disk) effective(admitted uint64) uint64 {
	reserve := admitted + d.compactBytes.Load()
	if d.ballastOut {
		reserve += uint64(d.ballast)
	}
	if d.avail < reserve {
		return 0
	}
	return d.avail - reserve
}

// admit reports whether a write of about n bytes of class may go to Pebble.
func (s *Store) admit(class writeClass, n int) error {
	if m := s.mode.Load(); m != modeRW {
		s.refused.Add(1)
		return modeErr(m)
	}
	d := &s.disk
	if d.floor == 0 {
		return nil
	}
	need := d.floor + d.reserve
	if class == small {
		need = d.floor / 2
	}
	d.mu.Lock()
	free := s.measureLocked(false)
	ok := free >= need+uint64(n) && (!d.low || class == small)
	if ok {
		d.admitted += uint64(n)
	} else if class == bulk && !d.low {
		s.setLowLocked(true, free)
	}
	d.mu.Unlock()
	if !ok {
		s.refused.Add(1)
		return fmt.Errorf("%w: %s", store.ErrNoSpace, floorReason(free, d.floor, d.reserve))
	}
	return nil
}

func modeErr(m int32) error {
	return fmt.Errorf("%w: %s", store.ErrNoSpace, modeReason(m))
}

func modeReason(m int32) string {
	switch m {
	case modeReadOnly:
		return "disk full: store read-only until disk space is freed"
	case modeFailed:
		return "disk full: a write failed; store reopening"
	}
	return "a storage write failed and the store could not recover; restart needed"
}

func floorReason(free, floor, reserve uint64) string {
	return fmt.Sprintf("disk free space %d bytes, below the floor of %d bytes (min_free_disk) plus %d bytes kept for flushing",
		free, floor, reserve)
}

// write runs fn, one Pebble write of about n bytes, if admitted. A panic
// inside Pebble (its Fatalf on a failed commit) becomes an error and puts
// the store in modeFailed.
func (s *Store) write(class writeClass, n int, fn func() error) (err error) {
	if err := s.admit(class, n); err != nil {
		return err
	}
	s.inflight.Add(1)
	defer s.inflight.Add(-1)
	// Again after announcing ourselves: a reopen waits for inflight to drain
	// after setting the mode, so no write slips into a DB being replaced.
	if m := s.mode.Load(); m != modeRW {
		s.refused.Add(1)
		return modeErr(m)
	}
	defer func() {
		if r := recover(); r != nil {
			err = s.writeFailed(r)
		}
	}()
	return fn()
}

// writeFailed handles a write that panicked inside Pebble. Only a failed
// commit reported through Fatalf ("fatal commit error") leaves Pebble's
// commit pipeline unlocked, so that the DB can be closed and reopened; any
// other panic (Pebble panics with its commit lock held when a WAL write or
// rotation fails under it) could make Close hang, so the store then only
// serves reads until a restart.
func (s *Store) writeFailed(r any) error {
	s.failed.Add(1)
	msg := fmt.Sprint(r)
	if fp, ok := r.(fatalPanic); ok && strings.Contains(string(fp), "fatal commit error") {
		if s.mode.CompareAndSwap(modeRW, modeFailed) {
			s.log.Error("pebblestore: a storage write failed; refusing writes, serving reads, reopening the store when there is disk space",
				"dir", s.disk.dir, "err", msg)
			s.poke()
		}
	} else if s.mode.Swap(modeStuck) != modeStuck {
		s.log.Error("pebblestore: a storage write failed inside the storage engine; serving reads only until the server is restarted",
			"dir", s.disk.dir, "err", msg)
	}
	return fmt.Errorf("%w: storage write failed: %v", store.ErrNoSpace, r)
}

func (s *Store) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// commitBatch commits b through write.
func (s *Store) commitBatch(b *pebble.Batch, wo *pebble.WriteOptions, class writeClass) error {
	return s.write(class, b.Len(), func() error { return b.Commit(wo) })
}

// DiskStatus returns the store's view of its volume.
func (s *Store) DiskStatus() DiskStatus {
	d := &s.disk
	d.mu.Lock()
	free := s.measureLocked(false)
	st := DiskStatus{FreeBytes: free, TotalBytes: d.total, FloorBytes: d.floor, ReserveBytes: d.reserve}
	low := d.low
	d.mu.Unlock()
	st.Refused, st.Failed = s.refused.Load(), s.failed.Load()
	if m := s.mode.Load(); m != modeRW {
		st.Reason = modeReason(m)
	} else if low {
		st.Reason = floorReason(free, d.floor, d.reserve)
	}
	st.Writable = st.Reason == ""
	return st
}

// diskErr is Ping's answer about space: nil when writes are accepted.
func (s *Store) diskErr() error {
	if st := s.DiskStatus(); !st.Writable {
		return fmt.Errorf("%w: %s", store.ErrNoSpace, st.Reason)
	}
	return nil
}

// watch recovers the store when space comes back and keeps the ballast.
func (s *Store) watch() {
	defer close(s.watchDone)
	t := time.NewTicker(watchInterval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		case <-s.wake:
		}
		s.tick()
	}
}

func (s *Store) tick() {
	d := &s.disk
	d.mu.Lock()
	free := s.measureLocked(true)
	d.mu.Unlock()
	roomy := free >= d.floor+d.reserve+d.hysteresis()
	if d.floor == 0 {
		roomy = free >= recoverBytesNoFloor
	}
	switch s.mode.Load() {
	case modeFailed:
		s.reopen(!roomy)
	case modeReadOnly:
		if roomy {
			s.reopen(false)
		}
	case modeRW:
		s.keepBallast(free)
	}
}

// reopen closes the DB and opens it again, read-only or read-write. Writes
// are refused meanwhile (the mode is not modeRW); reads wait for the swap.
func (s *Store) reopen(readOnly bool) {
	deadline := time.Now().Add(drainTimeout)
	for s.inflight.Load() > 0 {
		if time.Now().After(deadline) {
			s.mode.Store(modeStuck)
			s.log.Error("pebblestore: writes never returned from a failed store; restart the server", "dir", s.disk.dir)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Every write that was inside Pebble has returned; if one of them left
	// Pebble unsafe to close, it said so.
	if s.mode.Load() == modeStuck {
		return
	}
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return
	}
	if err := closeDB(s.db); err != nil {
		s.log.Warn("pebblestore: closing the store to reopen it", "err", err)
	}
	db, err := s.openDB(readOnly)
	if err != nil && !readOnly {
		s.log.Error("pebblestore: reopening read-write failed; trying read-only", "err", err)
		readOnly = true
		db, err = s.openDB(true)
	}
	if err != nil {
		// No DB to read from: every call now returns store.ErrClosed.
		s.closed = true
		s.mode.Store(modeStuck)
		s.log.Error("pebblestore: reopening the store failed; restart the server", "dir", s.disk.dir, "err", err)
		return
	}
	s.db = db
	// What the caches hold may include writes that did not reach the disk.
	s.resetCaches()
	go s.scanDedupKeys(s.dedupFilter) // starts once the reopen releases closeMu
	if readOnly {
		s.mode.Store(modeReadOnly)
		s.log.Error("pebblestore: store reopened read-only until disk space is freed", "dir", s.disk.dir)
		return
	}
	s.mode.Store(modeRW)
	s.log.Info("pebblestore: store reopened read-write; accepting writes", "dir", s.disk.dir)
}

// closeDB closes db, turning a panic (a DB left inconsistent by a failed
// write) into an error.
func closeDB(db *pebble.DB) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("pebble close: %v", r)
		}
	}()
	return db.Close()
}

// onDiskFull runs inside Pebble's filesystem when a write met ENOSPC, with
// all writes paused: it removes the ballast so the write's retry succeeds.
func (s *Store) onDiskFull() {
	d := &s.disk
	if d.ballast == 0 {
		return
	}
	d.mu.Lock()
	out := d.ballastOut
	d.mu.Unlock()
	if out {
		return // already used; Pebble's error reports the failed write
	}
	path := d.fs.PathJoin(d.dir, ballastName)
	if err := d.fs.Remove(path); err != nil {
		s.log.Error("pebblestore: disk full; cannot remove the ballast", "err", err)
		return
	}
	d.mu.Lock()
	d.ballastOut = true
	d.at = time.Time{} // measure again
	d.mu.Unlock()
	s.log.Error("pebblestore: disk full inside the store; ballast removed to let the write finish", "dir", d.dir, "ballast_bytes", d.ballast)
}

// keepBallast creates the ballast when it is missing and there is room for
// it above the floor.
func (s *Store) keepBallast(free uint64) {
	d := &s.disk
	d.mu.Lock()
	out := d.ballastOut
	d.mu.Unlock()
	// free already excludes a missing ballast's bytes; it is recreated only
	// with room to spare, or a compaction would soon remove it again.
	if d.ballast == 0 || !out || free < d.floor+d.reserve+d.hysteresis()+uint64(d.ballast) {
		return
	}
	if err := s.createBallast(); err != nil {
		s.log.Warn("pebblestore: cannot create the ballast file", "err", err)
		return
	}
	d.mu.Lock()
	d.ballastOut = false
	d.at = time.Time{}
	d.mu.Unlock()
}

// createBallast creates the ballast file with its blocks allocated but not
// written (fallocate on Linux: instant, and it counts as used space). Where
// the filesystem cannot preallocate, the file reserves nothing.
func (s *Store) createBallast() (err error) {
	d := &s.disk
	path := d.fs.PathJoin(d.dir, ballastName)
	f, err := d.fs.Create(path, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			_ = d.fs.Remove(path)
		}
	}()
	if err := f.Preallocate(0, d.ballast); err != nil {
		return err
	}
	return f.Sync()
}

// setupBallast decides at Open whether the ballast is in place.
func (s *Store) setupBallast() {
	d := &s.disk
	if d.ballast == 0 {
		return
	}
	// Its size reads 0: the blocks are allocated beyond the file's end.
	_, err := d.fs.Stat(d.fs.PathJoin(d.dir, ballastName))
	present := err == nil
	d.mu.Lock()
	d.ballastOut = !present
	d.at = time.Time{}
	d.mu.Unlock()
}

// isNoSpace reports whether err is the volume being full.
func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC)
}

// memTableFor sizes Pebble's memtable for a volume of total bytes.
func memTableFor(total uint64) int64 {
	return max(1<<20, min(memTableBytes, int64(total/64)))
}

// errorLogInterval spaces out logs of Pebble's background errors.
const errorLogInterval = 10 * time.Second

// backgroundError logs a failed flush or compaction, at most once per
// errorLogInterval with the number of errors since the last line.
func (s *Store) backgroundError(err error) {
	d := &s.disk
	n := d.bgErrors.Add(1)
	now := time.Now().UnixNano()
	last := d.lastBgLog.Load()
	if now-last < int64(errorLogInterval) || !d.lastBgLog.CompareAndSwap(last, now) {
		return
	}
	d.bgErrors.Add(-n)
	s.log.Error("pebble: background error (Pebble retries it)", "err", err, "errors", n)
}

// compactionBegin and compactionEnd keep disk.compactBytes.
func (s *Store) compactionBegin(info pebble.CompactionInfo) {
	var n uint64
	for _, l := range info.Input {
		for _, t := range l.Tables {
			n += t.Size
		}
	}
	d := &s.disk
	d.compactMu.Lock()
	if d.compacting == nil {
		d.compacting = make(map[int]uint64)
	}
	d.compacting[info.JobID] = n
	d.compactBytes.Add(n)
	d.compactMu.Unlock()
}

func (s *Store) compactionEnd(info pebble.CompactionInfo) {
	d := &s.disk
	d.compactMu.Lock()
	if n, ok := d.compacting[info.JobID]; ok {
		delete(d.compacting, info.JobID)
		d.compactBytes.Add(-n)
	}
	d.compactMu.Unlock()
}

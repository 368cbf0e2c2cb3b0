// Package pebblestore is the embedded store.Store: Parley's single-node
// default, on Pebble (an LSM key-value store) in one data directory.
//
// Appends are serialized by one mutex that covers seq assignment, one Pebble
// batch per Append and its commit; the caches (newest seq per conversation,
// recent client message ids, known conversation-list entries) only advance
// after the commit succeeded, so seqs stay gap-free when a commit fails.
// Callers get throughput by batching (group commit), not by calling Append
// from many goroutines at once. React works the same way under a mutex of
// its own (reactions have their own keys and versions, react.go): one batch
// of ops is one Pebble batch and one commit.
package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/parleyim/parley/internal/store"
)

// Options configures a Store. The zero value is a durable store with the defaults below.
type Options struct {
	// NoSync, when true, skips the fsync after each write: an Append (and a
	// cursor, user or token write) returns once the write is in the OS page
	// cache. A process crash loses nothing; a machine crash or power loss can
	// lose the newest acknowledged writes. Zero value (false): every write is
	// fsynced before the call returns.
	NoSync bool

	// CacheBytes is the size of the block cache for reads, in bytes. 0 means
	// 64 MiB. Negative is invalid. Memtables (32 MiB each, usually one or
	// two) come on top: Pebble charges them to the same cache, so the store
	// sizes it as CacheBytes plus two memtables.
	CacheBytes int64

	// DedupCacheEntries bounds the in-memory map of recently appended
	// (sender, client message id) → (conversation, seq), which answers most
	// resends without touching disk. Each entry costs roughly 100 bytes plus
	// the two ids. A miss falls back to a Bloom-filtered point lookup, so the
	// bound affects speed, never correctness. 0 means 1<<20. Negative is invalid.
	DedupCacheEntries int

	// DedupFilterBytes bounds the Bloom filter over the stored de-dup keys
	// (dedupfilter.go) that spares a new client message id its disk
	// lookup: 1.4 bytes per stored message with a client id, allocated a
	// filter at a time (each twice the previous), so up to twice that. Past it
	// the filter is off until the store is opened again (lookups as
	// without it). 0 means 64 MiB (~32 M messages). Negative turns the
	// filter off.
	DedupFilterBytes int64

	// ConversationCacheEntries bounds the in-memory maps of each
	// conversation's newest seq and of the (user, conversation) pairs known to
	// be in a conversation list. A miss costs one seek (seq) or one small
	// extra write (list entry, rewritten idempotently). 0 means 1<<20.
	// Negative is invalid.
	ConversationCacheEntries int

	// AcceptDataLoss opens the store even when write-ahead logs that held
	// synced (acknowledged) writes are missing or cut short (see ErrDataLoss):
	// what survives is served and the loss is logged. Zero value (false):
	// Open refuses such a directory, so an operator decides.
	AcceptDataLoss bool

	// MinFreeDisk is the free-space floor, in bytes: a write that would
	// leave less free space on the store's volume is refused with
	// store.ErrNoSpace (small writes such as cursors may use half of it), so
	// Pebble never meets a full disk. 0 means 5 % of the volume, at most
	// 1 GiB. Negative turns the floor and its ballast file off.
	MinFreeDisk int64

	// FS is the filesystem the store lives on. nil means the operating
	// system's. (Pebble's vfs: an instrumented or in-memory one.)
	FS vfs.FS

	// Logger receives Pebble's own log lines: informational ones at Debug
	// level, errors and data corruption at Error. nil means slog.Default(), so
	// by default only errors are printed.
	Logger *slog.Logger
}

const (
	defaultCacheBytes = 64 << 20
	defaultCacheSize  = 1 << 20
	// A 32 MiB memtable (Pebble's default is 4 MiB) lets a burst of appends and
	// their de-dup entries be found in memory and flushed as fewer, larger
	// tables; with up to 4 queued that is at most 128 MiB. On a volume under
	// 2 GiB it is 1/64 of the volume (at least 1 MiB), since the free-space
	// guard keeps three memtables' worth free for flushing (disk.go).
	memTableBytes = 32 << 20
	// bloomBitsPerKey of 10 gives a ~1% false-positive rate: a de-dup lookup
	// for a new client message id almost never reads a data block.
	bloomBitsPerKey = 10
	// tokenPurgeInterval: expired revoked-token records are deleted at Open
	// and at most this often during RevokeToken.
	tokenPurgeInterval = time.Hour
)

// validate rejects negative sizes and fills in the zero fields. A Parley
// server passes NoSync, MinFreeDisk, AcceptDataLoss and Logger explicitly
// (from server.Config); the cache sizes have no configuration key and take
// their defaults here.
func (o *Options) validate() error {
	if o.CacheBytes < 0 || o.DedupCacheEntries < 0 || o.ConversationCacheEntries < 0 {
		return errors.New("pebblestore: negative size in Options")
	}
	if o.CacheBytes == 0 {
		o.CacheBytes = defaultCacheBytes
	}
	if o.DedupCacheEntries == 0 {
		o.DedupCacheEntries = defaultCacheSize
	}
	if o.DedupFilterBytes == 0 {
		o.DedupFilterBytes = defaultDedupFilterBytes
	}
	if o.ConversationCacheEntries == 0 {
		o.ConversationCacheEntries = defaultCacheSize
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// dedupEntry is where a (sender, client message id) was stored.
type dedupEntry struct {
	conv string
	seq  uint64
}

// Store is a store.Store in one Pebble directory. Safe for concurrent use.
type Store struct {
	db       *pebble.DB // replaced only with closeMu held for writing (reopen)
	opts     Options
	memTable int64  // Pebble's MemTableSize, bytes
	pebbleFS vfs.FS // the volume, wrapped to remove the ballast on ENOSPC
	wo       *pebble.WriteOptions
	log      *slog.Logger
	guard    *walGuard // records the WALs' synced sizes for Open's loss check

	// Disk space guard (disk.go).
	disk      disk
	mode      atomic.Int32  // modeRW, modeReadOnly, modeFailed, modeStuck
	inflight  atomic.Int64  // writes inside Pebble
	refused   atomic.Uint64 // writes refused for disk space
	failed    atomic.Uint64 // writes that failed inside Pebble
	wake      chan struct{} // pokes the watcher
	stop      chan struct{} // closed by Close
	watchDone chan struct{} // closed when the watcher returned

	// closeMu is held for reading by every method while it uses db and for
	// writing by Close, so db is never used after it is closed.
	closeMu   sync.RWMutex
	closed    bool // guarded by closeMu
	closeOnce sync.Once

	// deleteMu serializes the writes that delete messages (ExpireBefore's
	// batches, DeleteMessages) and the clean-up of file marks they write.
	// Lock order: deleteMu, appendMu, reactMu.
	deleteMu sync.Mutex

	// appendMu serializes Append. It guards dedup, convs and the scratch
	// fields below, and is held around every write to seqs.
	appendMu sync.Mutex
	dedup    *genMap[dedupEntry] // committed (sender, client id) → location
	// dedupFilter: every de-dup key that may be stored (dedupfilter.go).
	dedupFilter *dedupFilter
	convs       *genMap[struct{}] // conversation-list keys known to be stored
	// Scratch state of one Append, reused to avoid allocations.
	pendingDup  map[string]int      // de-dup key → index of its first message in the batch
	pendingConv map[string]struct{} // conversation-list keys written by the batch
	batchSeqs   map[string]uint64   // conversation → newest seq assigned in the batch
	batchUsage  map[string]uint64   // sender → payload bytes added by the batch
	usage       *genMap[uint64]     // sender → payload bytes stored, as committed
	keyBuf      []byte              // de-dup key of the message being appended
	convBuf     []byte              // conversation-list key being checked
	// batchThreads: thread summary key → the summary as the batch leaves
	// it (read from disk at the batch's first reply in that thread).
	batchThreads map[string]*store.ThreadSummary
	// logPos is the newest message log position given out (log.go): it
	// never goes down while the process runs, failed writes included.
	// batchLog is the newest one in the batch being written (0: none).
	logPos, batchLog uint64
	// logCommitted is the newest log position of a committed write.
	logCommitted atomic.Uint64
	// sweepSynced: when ExpireBefore last synced (unix ns; retention.go).
	sweepSynced atomic.Int64

	// seqMu guards seqs for LastSeq, which reads without appendMu. Append
	// (the only writer) takes it for writing only to update.
	seqMu sync.RWMutex
	seqs  *genMap[uint64] // conversation → newest committed seq

	cursorMu    sync.Mutex           // serializes read-raise-write of cursors
	cursorCache *genMap[cursorValue] // guarded by cursorMu: cursors as last written
	userMu      sync.Mutex           // makes CreateUser's and UpdateUser's existence check atomic with the write

	pushMu    sync.Mutex // makes DeletePushTarget's token check atomic with the delete
	e2eeMu    sync.Mutex // serializes key package writes and claims (e2ee.go): a claim is read-then-delete
	fileMu    sync.Mutex // serializes file writes: existence checks and usage counts are read-modify-write
	reportMu  sync.Mutex // serializes report writes: the one-report-per-message check and status moves are read-modify-write
	settingMu sync.Mutex // serializes setting writes: SwapSetting's compare is read-modify-write
	tokenMu   sync.Mutex // serializes RevokeToken; guards lastPurge
	lastPurge time.Time

	// reactMu serializes React (react.go): each conversation's reaction
	// version is read, raised and written under it, so versions are
	// gap-free and grow in commit order. It guards reactVers' writes.
	// Reactions have keys of their own: React never waits for appendMu.
	reactMu sync.Mutex
	// reactVerMu guards reactVers for ReactionVersion, which reads without
	// reactMu; React (the only writer) takes it for writing to update.
	reactVerMu sync.RWMutex
	reactVers  *genMap[uint64] // conversation → newest committed reaction version
	react      reactBatch      // React's scratch state, guarded by reactMu
	// reactMsgs: message → its reactions as committed, for messages React
	// touched recently (a hot message's counts are not read back every
	// batch). Guarded by reactMu.
	reactMsgs *genMap[reactCached]

	// floorMu guards floors and floorGen. Every Delivered or Read ACK and
	// every history page reads its conversation's floor, almost always a
	// miss on disk (no retention) that still searches the memtables and
	// the filters of every level; floors answers from memory. ExpireBefore
	// (the only writer of floors) updates it under appendMu and reactMu,
	// right after its commit; floorGen, raised with each update, keeps a
	// read that raced an update from caching what it read before it.
	floorMu  sync.RWMutex
	floors   *genMap[uint64] // conversation → floor (0: none)
	floorGen uint64

	auditMu sync.Mutex // serializes AppendAudit; guards auditLast
	// auditLast is the highest audit ID given out (0: not read from disk
	// yet). Never lowered, reopen included: an ID is never given twice.
	auditLast uint64
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the store in dir. On a disk below the
// free-space floor (or when opening needs to write and the disk is full) it
// opens read-only: reads work, writes return store.ErrNoSpace, and the store
// switches to read-write by itself once space is freed.
func Open(dir string, opts Options) (*Store, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	fs := opts.FS
	if fs == nil {
		fs = vfs.Default
	}
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	losses, err := checkWALs(dir)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	if len(losses) > 0 {
		if !opts.AcceptDataLoss {
			return nil, fmt.Errorf("%w in %s: %s; acknowledged writes would be lost: restore the directory from a backup, or accept the loss explicitly",
				ErrDataLoss, dir, strings.Join(losses, "; "))
		}
		opts.Logger.Error("pebblestore: opening with write-ahead log data missing, as accepted: acknowledged writes are lost",
			"dir", dir, "losses", strings.Join(losses, "; "))
	}
	du, err := fs.GetDiskUsage(dir)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: free space of %s: %w", dir, err)
	}
	s := &Store{
		opts:      opts,
		log:       opts.Logger,
		wo:        pebble.Sync,
		wake:      make(chan struct{}, 1),
		stop:      make(chan struct{}),
		watchDone: make(chan struct{}),
	}
	if opts.NoSync {
		s.wo = pebble.NoSync
	}
	s.disk.fs, s.disk.dir = fs, dir
	s.disk.floor = floorFor(opts.MinFreeDisk, du.TotalBytes)
	s.disk.ballast = min(int64(s.disk.floor/4), maxBallast)
	s.memTable = memTableFor(du.TotalBytes)
	if s.disk.floor > 0 {
		s.disk.reserve = 3 * uint64(s.memTable)
	}
	if s.guard, err = newWALGuard(fs, dir, opts.Logger); err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, err)
	}
	s.pebbleFS = s.guard
	if s.disk.ballast > 0 {
		s.pebbleFS = vfs.OnDiskFull(s.guard, s.onDiskFull)
	}
	s.setupBallast()
	s.resetCaches()

	s.disk.mu.Lock()
	free := s.measureLocked(true)
	s.disk.mu.Unlock()
	readOnly := s.disk.floor > 0 && free < s.disk.floor
	db, err := s.openDB(readOnly)
	if err != nil && !readOnly && isNoSpace(err) {
		readOnly = true
		db, err = s.openDB(true)
	}
	if err != nil {
		s.guard.close()
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, mapErr(err))
	}
	s.db = db
	if s.logPos, err = readLastLogPos(db); err != nil {
		_ = closeDB(db)
		s.guard.close()
		return nil, fmt.Errorf("pebblestore: open %s: message log: %w", dir, err)
	}
	s.logCommitted.Store(s.logPos)
	if readOnly {
		s.mode.Store(modeReadOnly)
		s.log.Error("pebblestore: disk full at start; store opened read-only until space is freed",
			"dir", dir, "free_bytes", free, "floor_bytes", s.disk.floor)
	} else {
		s.purgeTokens(time.Now())
		s.keepBallast(free)
		if err := wrapIndexErr(s.indexUserNames()); err != nil {
			_ = closeDB(db)
			s.guard.close()
			return nil, err
		}
	}
	go s.watch()
	go s.scanDedupKeys(s.dedupFilter)
	return s, nil
}

// openDB opens the Pebble DB in s.disk.dir.
func (s *Store) openDB(readOnly bool) (*pebble.DB, error) {
	opts := s.opts
	// Pebble reserves memtable memory out of the block cache; without the
	// headroom a 64 MiB cache holds no blocks at all once two memtables exist.
	cache := pebble.NewCache(opts.CacheBytes + 2*s.memTable)
	defer cache.Unref() // the DB holds its own reference
	po := &pebble.Options{
		Cache:                       cache,
		FormatMajorVersion:          pebble.FormatNewest,
		MemTableSize:                uint64(s.memTable),
		MemTableStopWritesThreshold: 4,
		Logger:                      pebbleLogger{opts.Logger},
		FS:                          s.pebbleFS,
		ReadOnly:                    readOnly,
		Cleaner:                     noRecycleCleaner{}, // accounts.go
		EventListener: &pebble.EventListener{
			// A failed flush or compaction is retried by Pebble, often;
			// one line per errorLogInterval is enough.
			BackgroundError: s.backgroundError,
			CompactionBegin: s.compactionBegin,
			CompactionEnd:   s.compactionEnd,
			// Pebble's default treats corruption as fatal and exits the
			// process. Parley must keep running: the read that hit it
			// returns an error (mapped to store.ErrCorrupt) instead.
			DataCorruption: func(info pebble.DataCorruptionInfo) {
				opts.Logger.Error("pebblestore: data corruption", "path", info.Path, "err", info.Details)
			},
		},
		// Two cores here: a second compaction only when L0 falls behind.
		CompactionConcurrencyRange: func() (int, int) { return 1, 2 },
	}
	// Pebble has no filter on any level by default; de-dup lookups of new
	// ids then read index and data blocks of every level.
	for i := range po.Levels {
		po.Levels[i].FilterPolicy = bloom.FilterPolicy(bloomBitsPerKey)
	}
	return pebble.Open(s.disk.dir, po)
}

// resetCaches empties every cache. Called at Open and, with closeMu held
// for writing, when the DB is reopened.
func (s *Store) resetCaches() {
	o := s.opts
	s.dedup = newGenMap[dedupEntry](o.DedupCacheEntries)
	s.dedupFilter = newDedupFilter(o.DedupFilterBytes)
	s.convs = newGenMap[struct{}](o.ConversationCacheEntries)
	s.seqs = newGenMap[uint64](o.ConversationCacheEntries)
	s.floors = newGenMap[uint64](o.ConversationCacheEntries)
	s.cursorCache = newGenMap[cursorValue](o.ConversationCacheEntries)
	s.pendingDup = make(map[string]int)
	s.pendingConv = make(map[string]struct{})
	s.batchSeqs = make(map[string]uint64)
	s.batchUsage = make(map[string]uint64)
	s.batchThreads = make(map[string]*store.ThreadSummary)
	s.usage = newGenMap[uint64](o.ConversationCacheEntries)
	s.reactVers = newGenMap[uint64](o.ConversationCacheEntries)
	s.reactMsgs = newGenMap[reactCached](min(o.ConversationCacheEntries, reactCacheEntries))
}

// enter checks the store is open and holds closeMu for reading; the caller
// must call s.closeMu.RUnlock when done. Between a failed write and the
// reopen that follows it (milliseconds) reads are refused too: Pebble may
// show the failed, unacknowledged batch until the DB is reopened.
func (s *Store) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m := s.mode.Load(); m == modeFailed {
		return modeErr(m)
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return store.ErrClosed
	}
	return nil
}

// Close releases the directory. Every acknowledged write is already in the
// WAL. Later calls, including Close, return store.ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.stop)
		<-s.watchDone
	})
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.closed = true
	// The synced sizes are recorded whatever becomes of the DB.
	defer func() {
		if gerr := s.guard.close(); gerr != nil {
			s.log.Warn("pebblestore: recording WAL sizes at close", "err", gerr)
		}
	}()
	if s.mode.Load() == modeStuck {
		// Pebble may hold its commit lock forever: closing could hang.
		return errors.New("pebblestore: store not closed after a failed write; its WAL is intact up to the last acknowledged write")
	}
	return mapErr(closeDB(s.db))
}

// Ping reads through Pebble; an error means reads or writes fail. Writes
// refused for disk space (below the floor, read-only) give store.ErrNoSpace
// with the reason.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
	if err := s.diskErr(); err != nil {
		return err
	}
	_, closer, err := s.db.Get([]byte{0})
	if err == nil {
		return closer.Close()
	}
	if errors.Is(err, pebble.ErrNotFound) {
		return nil
	}
	return mapErr(err)
}

// mapErr turns Pebble's corruption and closed errors into the store's.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case pebble.IsCorruptionError(err):
		return fmt.Errorf("%w: %v", store.ErrCorrupt, err)
	case errors.Is(err, pebble.ErrClosed):
		return store.ErrClosed
	}
	return err
}

// pebbleLogger sends Pebble's log lines to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	if p.l.Enabled(context.Background(), slog.LevelDebug) {
		p.l.Debug("pebble: " + fmt.Sprintf(format, args...))
	}
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error("pebble: " + fmt.Sprintf(format, args...))
}

// Fatalf must not return (Pebble relies on it); a panic keeps the stack.
// On a write's goroutine the store recovers it (disk.go).
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic(fatalPanic(msg))
}

// fatalPanic is the value Fatalf panics with, so the store can tell it
// from Pebble's other panics.
type fatalPanic string

// Package pebblestore is the embedded store.Store: Parley's single-node
// default, on Pebble (an LSM key-value store) in one data directory.
//
// Appends are serialized by one mutex that covers seq assignment, one Pebble
// batch per Append and its commit; the caches (newest seq per conversation,
// recent client message ids, known conversation-list entries) only advance
// after the commit succeeded, so seqs stay gap-free when a commit fails.
// Callers get throughput by batching (group commit), not by calling Append
// from many goroutines at once.
package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"

	"github.com/parleyim/parley/store"
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

	// ConversationCacheEntries bounds the in-memory maps of each
	// conversation's newest seq and of the (user, conversation) pairs known to
	// be in a conversation list. A miss costs one seek (seq) or one small
	// extra write (list entry, rewritten idempotently). 0 means 1<<20.
	// Negative is invalid.
	ConversationCacheEntries int

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
	// tables; with up to 4 queued that is at most 128 MiB.
	memTableBytes = 32 << 20
	// bloomBitsPerKey of 10 gives a ~1% false-positive rate: a de-dup lookup
	// for a new client message id almost never reads a data block.
	bloomBitsPerKey = 10
	// tokenPurgeInterval: expired revoked-token records are deleted at Open
	// and at most this often during RevokeToken.
	tokenPurgeInterval = time.Hour
)

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
	db  *pebble.DB
	wo  *pebble.WriteOptions
	log *slog.Logger

	// closeMu is held for reading by every method while it uses db and for
	// writing by Close, so db is never used after it is closed.
	closeMu sync.RWMutex
	closed  bool // guarded by closeMu

	// appendMu serializes Append. It guards dedup, convs and the scratch
	// fields below, and is held around every write to seqs.
	appendMu sync.Mutex
	dedup    *genMap[dedupEntry] // committed (sender, client id) → location
	convs    *genMap[struct{}]   // conversation-list keys known to be stored
	// Scratch state of one Append, reused to avoid allocations.
	pendingDup  map[string]int      // de-dup key → index of its first message in the batch
	pendingConv map[string]struct{} // conversation-list keys written by the batch
	batchSeqs   map[string]uint64   // conversation → newest seq assigned in the batch
	keyBuf      []byte              // de-dup key of the message being appended
	convBuf     []byte              // conversation-list key being checked

	// seqMu guards seqs for LastSeq, which reads without appendMu. Append
	// (the only writer) takes it for writing only to update.
	seqMu sync.RWMutex
	seqs  *genMap[uint64] // conversation → newest committed seq

	cursorMu    sync.Mutex           // serializes read-raise-write of cursors
	cursorCache *genMap[cursorValue] // guarded by cursorMu: cursors as last written
	userMu      sync.Mutex           // makes CreateUser's and UpdateUser's existence check atomic with the write

	tokenMu   sync.Mutex // serializes RevokeToken; guards lastPurge
	lastPurge time.Time
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the store in dir.
func Open(dir string, opts Options) (*Store, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	pl := pebbleLogger{opts.Logger}
	// Pebble reserves memtable memory out of the block cache; without the
	// headroom a 64 MiB cache holds no blocks at all once two memtables exist.
	cache := pebble.NewCache(opts.CacheBytes + 2*memTableBytes)
	defer cache.Unref() // the DB holds its own reference
	po := &pebble.Options{
		Cache:                       cache,
		FormatMajorVersion:          pebble.FormatNewest,
		MemTableSize:                memTableBytes,
		MemTableStopWritesThreshold: 4,
		Logger:                      pl,
		EventListener: &pebble.EventListener{
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
	db, err := pebble.Open(dir, po)
	if err != nil {
		return nil, fmt.Errorf("pebblestore: open %s: %w", dir, mapErr(err))
	}
	s := &Store{
		db:          db,
		wo:          pebble.Sync,
		log:         opts.Logger,
		dedup:       newGenMap[dedupEntry](opts.DedupCacheEntries),
		convs:       newGenMap[struct{}](opts.ConversationCacheEntries),
		seqs:        newGenMap[uint64](opts.ConversationCacheEntries),
		cursorCache: newGenMap[cursorValue](opts.ConversationCacheEntries),
		pendingDup:  make(map[string]int),
		pendingConv: make(map[string]struct{}),
		batchSeqs:   make(map[string]uint64),
	}
	if opts.NoSync {
		s.wo = pebble.NoSync
	}
	s.purgeTokens(time.Now())
	return s, nil
}

// enter checks the store is open and holds closeMu for reading; the caller
// must call s.closeMu.RUnlock when done.
func (s *Store) enter(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
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
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.closed = true
	return mapErr(s.db.Close())
}

// Ping reads through Pebble; an error means reads (and so writes) fail.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.closeMu.RUnlock()
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
func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := "pebble: " + fmt.Sprintf(format, args...)
	p.l.Error(msg)
	panic(msg)
}

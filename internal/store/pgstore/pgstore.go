// Package pgstore is the PostgreSQL store.Store, for clusters: every Parley
// node opens the same database and schema, and the database keeps the
// per-conversation seqs gap-free and the (sender, client message id) de-dup
// exact across nodes.
//
// # Operating it
//
// URL: a libpq-style URL or keyword string, as accepted by pgx, for example
// postgres://parley:secret@db.example.com:5432/parley?sslmode=verify-full.
// pgx's pool parameters in the URL (pool_max_conns, ...) are honoured unless
// Options sets them. Tested with PostgreSQL 15.
//
// Migrations: Open creates the schema (Options.Schema, default "parley") if
// it is missing and applies the numbered migrations in migrations/ that
// schema_migrations does not list yet, in one transaction under a
// transaction-scoped advisory lock keyed by the schema name, so nodes
// starting together apply each migration once. A schema migrated by a newer
// build (an unknown version) makes Open fail rather than write rows it does
// not understand. The role needs CREATE on the database the first time (or a
// schema created beforehand and owned by it).
//
// Pool sizing: each node holds at most Options.MaxConns connections; keep
// nodes × MaxConns under the server's max_connections, with room for
// operators. Appends hold a connection for two round trips and the commit.
// Each connection sets statement_timeout, idle_in_transaction_session_timeout
// and application_name at startup: behind PgBouncer use session pooling, or
// list them in ignore_startup_parameters.
//
// Tables (all in the schema): conversations (newest seq per conversation),
// messages (the log: protobuf bodies with a CRC-32C, unique (sender,
// client_msg_id) for de-dup), user_conversations, cursors, users,
// revoked_tokens, groups, members, conversation_settings, hidden_messages,
// contacts, blocks, last_seen, user_storage, push_targets, files, reports,
// audit_log, settings, reaction_versions, reactions, reaction_counts,
// reaction_messages, pins, thread_replies, threads, thread_participants,
// mentions, mentions_all, search_backfill, schema_migrations. Text keys are COLLATE "C", so ids
// order bytewise as in the embedded store. Back the database up like any
// other; initdb --data-checksums adds page checksums underneath ours.
//
// # Faults
//
// Calls are bounded by Options.QueryTimeout and ConnectTimeout. When the
// database cannot be reached (refused, timed out, shutting down, read-only
// during a failover) the error wraps ErrUnavailable and has a Temporary
// method returning true; the pool reconnects by itself when it returns. A
// message body that fails its checksum or does not decode is reported as
// store.ErrCorrupt and never served.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/parleyim/parley/internal/store"
)

// Options configures a Store. Zero values mean the defaults stated.
type Options struct {
	// Schema is the PostgreSQL schema holding Parley's tables, created at
	// Open if missing. Several Parley deployments (or test runs) can share a
	// database with different schemas. "" means "parley".
	Schema string

	// MaxConns is the most connections this Store opens. 0 means the URL's
	// pool_max_conns, else pgx's default, max(4, number of CPUs). Negative is invalid.
	MaxConns int32

	// MinConns is how many connections are kept open while idle. 0 means the
	// URL's pool_min_conns, else none. Negative is invalid.
	MinConns int32

	// ConnectTimeout bounds establishing one connection (TCP, TLS and
	// authentication). 0 means the URL's connect_timeout, else 3 s.
	// Negative is invalid.
	ConnectTimeout time.Duration

	// QueryTimeout bounds every call (waiting for a connection, the queries
	// and the commit), on top of the caller's context; it is also sent to
	// the server as statement_timeout so abandoned statements stop there.
	// 0 means 5 s. Negative is invalid.
	QueryTimeout time.Duration

	// MaxConnLifetime closes connections older than this (with jitter), so
	// connections spread over replicas behind a proxy. 0 means the URL's
	// pool_max_conn_lifetime, else 1 h. Negative is invalid.
	MaxConnLifetime time.Duration

	// Logger receives migrations applied (Info), retried transactions
	// (Debug) and corrupt records (Error). nil means slog.Default().
	Logger *slog.Logger
}

const (
	defaultSchema         = "parley"
	defaultConnectTimeout = 3 * time.Second
	defaultQueryTimeout   = 5 * time.Second
	// tokenPurgeInterval: expired revoked-token rows are deleted at Open and
	// at most this often during RevokeToken (by each node).
	tokenPurgeInterval = time.Hour
	// maxAttempts bounds the retries of a transaction that lost a race to
	// another node (de-dup conflict) or was chosen as a deadlock victim.
	maxAttempts = 8
	// migrateTimeout bounds Open's migrations when its context has no deadline.
	migrateTimeout = 10 * time.Minute
	// knownListsMax bounds the cache of known conversation-list entries
	// (about 100 bytes each plus the ids).
	knownListsMax = 1 << 17
)

// validate rejects negative values and fills in the zero fields. A Parley
// server passes Schema (its default, "parley", is server.Config's) and
// Logger explicitly; the pool settings come from the URL and QueryTimeout
// has no configuration key, so it takes its default here.
func (o *Options) validate() error {
	if o.MaxConns < 0 || o.MinConns < 0 || o.ConnectTimeout < 0 || o.QueryTimeout < 0 || o.MaxConnLifetime < 0 {
		return errors.New("pgstore: negative value in Options")
	}
	if o.Schema == "" {
		o.Schema = defaultSchema
	}
	if o.QueryTimeout == 0 {
		o.QueryTimeout = defaultQueryTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return nil
}

// Store is a store.Store on PostgreSQL. Safe for concurrent use, and
// several Stores (in one process or on many nodes) may share one schema.
type Store struct {
	pool    *pgxpool.Pool
	q       queries
	log     *slog.Logger
	timeout time.Duration
	crc     *crc32.Table

	// closeMu is held for reading by every call while it uses pool and for
	// writing by Close, so pool is not used once closed.
	closeMu sync.RWMutex
	closed  bool // guarded by closeMu
	// stop is closed by Close: background work (the search backfill)
	// stops waiting and returns.
	stop chan struct{}
	// backfilled is closed when the search backfill started at Open has
	// returned (done, or the store closed).
	backfilled chan struct{}

	// listMu guards knownLists: conversation-list entries this Store has
	// seen committed. Entries are never deleted, so one known here is
	// stored for every node; Append skips rewriting it.
	listMu     sync.Mutex
	knownLists map[[2]string]struct{}

	purgeMu   sync.Mutex // guards lastPurge
	lastPurge time.Time
}

var _ store.Store = (*Store)(nil)

// Open connects to the database at url, applies pending migrations to
// opts.Schema and returns the Store. It fails (wrapping ErrUnavailable)
// when the database cannot be reached within ConnectTimeout. Migrations run
// without statement_timeout (one may rebuild a large table) and within
// ctx's deadline, or migrateTimeout when ctx has none; a node starting
// while another migrates waits for it.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The parse error may quote the URL, password included.
		return nil, errors.New("pgstore: invalid database URL")
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	if opts.MinConns > 0 {
		cfg.MinConns = opts.MinConns
	}
	if cfg.MinConns > cfg.MaxConns {
		return nil, fmt.Errorf("pgstore: MinConns %d above MaxConns %d", cfg.MinConns, cfg.MaxConns)
	}
	if opts.MaxConnLifetime > 0 {
		cfg.MaxConnLifetime = opts.MaxConnLifetime
	}
	switch {
	case opts.ConnectTimeout > 0:
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
	case cfg.ConnConfig.ConnectTimeout == 0:
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	// Unnamed statements, planned at each execution with the actual
	// arrays, in one round trip once their description is cached. A named
	// prepared statement falls back to a generic plan after five runs, and
	// with unnest of an array parameter that plan joined the messages of a
	// 64-message batch 5x slower here, growing with the tables.
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	rp := cfg.ConnConfig.RuntimeParams
	rp["statement_timeout"] = fmt.Sprint(opts.QueryTimeout.Milliseconds())
	// A node that dies mid-transaction holds its row locks only this long
	// (when the TCP connection lingers): hot conversations must not stall.
	rp["idle_in_transaction_session_timeout"] = fmt.Sprint((2 * opts.QueryTimeout).Milliseconds())
	if _, ok := rp["application_name"]; !ok {
		rp["application_name"] = "parley"
	}

	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, mapErr("open", err)
	}
	s := &Store{
		pool:    pool,
		q:       newQueries(pgx.Identifier{opts.Schema}.Sanitize()),
		log:     opts.Logger,
		timeout: opts.QueryTimeout,
		crc:     crc32.MakeTable(crc32.Castagnoli),

		knownLists: make(map[[2]string]struct{}),
		stop:       make(chan struct{}),
		backfilled: make(chan struct{}),
	}
	mctx := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		mctx, cancel = context.WithTimeout(ctx, migrateTimeout)
		defer cancel()
	}
	if err := s.migrate(mctx, opts.Schema); err != nil {
		pool.Close()
		return nil, err
	}
	s.purgeTokens(ctx, time.Now())
	go s.backfillSearch()
	return s, nil
}

// enter checks the store is open, holds closeMu for reading and bounds ctx
// by the query timeout; the caller must call the returned done when finished.
func (s *Store) enter(ctx context.Context) (context.Context, func(), error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return nil, nil, store.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	return ctx, func() { cancel(); s.closeMu.RUnlock() }, nil
}

// Close closes the pool once calls in progress have finished. Every
// acknowledged write is already committed. Later calls return store.ErrClosed.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed {
		return store.ErrClosed
	}
	s.closed = true
	close(s.stop)
	s.pool.Close()
	return nil
}

// Ping reports whether the database answers and accepts writes: a standby
// (or a primary set read-only) answers, but every Append would fail.
func (s *Store) Ping(ctx context.Context) error {
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return err
	}
	defer done()
	var ro string
	if err := s.pool.QueryRow(ctx, "SELECT current_setting('transaction_read_only')").Scan(&ro); err != nil {
		return mapErr("ping", err)
	}
	if ro == "on" {
		return &unavailableError{op: "ping", err: errors.New("the database is read-only (a standby?)")}
	}
	return nil
}

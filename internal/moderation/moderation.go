// Package moderation is the app's say over what its users send: the word
// filter (package wordfilter) and the before-send hooks (package hook) on
// the send path, users' reports of messages, and the audit log of admin
// actions. The chat service calls it through chat.Moderator; the admin API
// through the rest of Service. docs/moderation.md describes it for users.
package moderation

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/parleyim/parley/internal/moderation/hook"
	"github.com/parleyim/parley/internal/moderation/wordfilter"
	"github.com/parleyim/parley/internal/reqerr"
	"github.com/parleyim/parley/internal/store"
)

// Config configures moderation. Zero values take the stated defaults.
type Config struct {
	// Store keeps reports, the audit log and the admin API's filter lists.
	// Required.
	Store store.Store
	// Hooks are the before-send hooks, in the order they run.
	Hooks []hook.HookConfig
	// HookClient and HookRootCAs: see hook.Config (tests, private CAs).
	HookClient  *http.Client
	HookRootCAs *x509.CertPool
	// Cache bounds the decisions kept for retried sends.
	Cache hook.CacheConfig
	// FilterLists are the word filter's lists from the configuration; the
	// admin API's lists (kept in the store, the same on every node) are
	// added to them.
	FilterLists []ConfigList
	// FilterContentTypes are the content types whose payloads the filter
	// reads as text; other payloads pass unread. Default "text",
	// "text/plain".
	FilterContentTypes []string
	// ReloadInterval is how often the node looks for changed filter lists
	// (the admin API's, from the store; word files, by their modification
	// time). Default 500 ms, so a change reaches every node within a second.
	ReloadInterval time.Duration
	Logger         *slog.Logger
}

// ConfigList is a filter list of the configuration: words given inline, or
// read from WordsFile (one word or phrase a line; blank lines and lines
// starting with "#" skipped), re-read when the file changes.
type ConfigList struct {
	wordfilter.List
	WordsFile string
}

// Service is the moderation of one node. Create with New, then Start;
// Close when done. Safe for concurrent use.
type Service struct {
	cfg    Config
	store  store.Store
	log    *slog.Logger
	hooks  atomic.Pointer[hook.Hooks] // swapped by SetHooks
	cache  *hook.DecisionCache
	filter wordfilter.Holder
	text   map[string]bool // FilterContentTypes

	// reload state, owned by the reload loop (and New)
	mu        sync.Mutex // serializes reloads and the admin API's list writes
	stored    []byte     // the admin API's lists as last read
	version   []byte     // their version as last read
	fileTimes []time.Time

	stop    chan struct{}
	done    chan struct{}
	started atomic.Bool

	filtered, masked, rejected atomic.Uint64
	reloadFailures             atomic.Uint64
}

// New validates cfg, builds the filter and the hooks' clients and reads the
// admin API's lists once.
func New(ctx context.Context, cfg Config) (*Service, error) {
	if cfg.Store == nil {
		return nil, errors.New("moderation: Store is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.ReloadInterval <= 0 {
		cfg.ReloadInterval = 500 * time.Millisecond
	}
	if len(cfg.FilterContentTypes) == 0 {
		cfg.FilterContentTypes = []string{"text", "text/plain"}
	}
	s := &Service{cfg: cfg, store: cfg.Store, log: cfg.Logger, text: make(map[string]bool),
		stop: make(chan struct{}), done: make(chan struct{})}
	for _, t := range cfg.FilterContentTypes {
		s.text[t] = true
	}
	hooks, err := hook.New(hook.Config{Hooks: cfg.Hooks, Client: cfg.HookClient, RootCAs: cfg.HookRootCAs, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	s.hooks.Store(hooks)
	s.cache = hook.NewDecisionCache(cfg.Cache)
	s.fileTimes = make([]time.Time, len(cfg.FilterLists))
	if err := s.reload(ctx, true); err != nil {
		hooks.Close()
		return nil, err
	}
	return s, nil
}

// Start runs the reload loop.
func (s *Service) Start() {
	if s.started.CompareAndSwap(false, true) {
		go s.reloadLoop()
	}
}

// Close stops the reload loop and waits for the hooks' calls in flight.
func (s *Service) Close() {
	select {
	case <-s.stop:
	default:
		close(s.stop)
		if s.started.Load() {
			<-s.done
		}
	}
	s.hooks.Load().Close()
}

// NewHooks builds hooks as New does, for SwapHooks (a configuration
// reload prepares everything before it applies anything).
func (s *Service) NewHooks(hooks []hook.HookConfig) (*hook.Hooks, error) {
	return hook.New(hook.Config{Hooks: hooks, Client: s.cfg.HookClient, RootCAs: s.cfg.HookRootCAs, Logger: s.cfg.Logger})
}

// SwapHooks puts h in place of the hooks in use: sends decided from now on
// use h; calls in flight finish on the old hooks, which are then closed. A
// send that picked the old hooks just before the swap may be answered
// UNAVAILABLE, which clients retry.
func (s *Service) SwapHooks(h *hook.Hooks) { go s.hooks.Swap(h).Close() }

// Filter implements chat.Moderator: the word filter on a text payload.
func (s *Service) Filter(contentType string, payload []byte) ([]byte, error) {
	f := s.filter.Load()
	if f == nil || f.Len() == 0 || !s.text[contentType] || len(payload) == 0 {
		return payload, nil
	}
	s.filtered.Add(1)
	// Check keeps nothing of its text (Masked is a copy), and the payload
	// is not changed meanwhile: no copy of it is needed.
	r := f.Check(unsafe.String(unsafe.SliceData(payload), len(payload)))
	switch r.Action {
	case wordfilter.Reject:
		s.rejected.Add(1)
		return nil, reqerr.Rejected(RejectWordFilter, "")
	case wordfilter.Mask:
		s.masked.Add(1)
		return []byte(r.Masked), nil
	}
	return payload, nil
}

// RejectWordFilter is the reject code of the word filter's refusals.
const RejectWordFilter = "word_filter"

// Hooked implements chat.Moderator.
func (s *Service) Hooked(t hook.EventType) bool { return s.hooks.Load().Wants(t) }

// Decide implements chat.Moderator: the hooks' decision, or the first one
// for a retried send (the decision cache). done gets nil to allow (with
// ev's content replaced when a hook replaced it) or the error for the
// sender, exactly once, on this goroutine or on one sending the hook's
// requests.
func (s *Service) Decide(ev *hook.Event, done func(error)) {
	s.cache.DecideAsync(*ev, s.hooks.Load().DecideAsync, func(d hook.Decision, err error) {
		switch {
		case err != nil:
			done(reqerr.Unavail) // the server is stopping
		case d.Action == hook.Reject && d.Temporary():
			done(reqerr.Unavail) // a fail-closed hook could not decide: retry
		case d.Action == hook.Reject:
			done(reqerr.Rejected(d.Code, d.Reason))
		case d.Action == hook.Replace:
			ev.ContentType, ev.Payload = d.ContentType, d.Payload
			done(nil)
		default:
			done(nil)
		}
	})
}

// Stats are moderation's figures for /metrics.
type Stats struct {
	Hooks hook.Stats
	Cache hook.CacheStats
	// FilterWords is the entries of the filter in use; Filtered, Masked and
	// Rejected count the payloads it read, masked and refused.
	FilterWords                int
	Filtered, Masked, Rejected uint64
	ReloadFailures             uint64
}

// Stats returns the running totals.
func (s *Service) Stats() Stats {
	// Masked and rejected first: each is counted after filtered, so
	// filtered read last is never below their sum.
	st := Stats{Hooks: s.hooks.Load().Stats(), Cache: s.cache.Stats(),
		Masked: s.masked.Load(), Rejected: s.rejected.Load(), ReloadFailures: s.reloadFailures.Load()}
	st.Filtered = s.filtered.Load()
	if f := s.filter.Load(); f != nil {
		st.FilterWords = f.Len()
	}
	return st
}

// textTypes lists the content types the filter reads, for the admin API.
func (s *Service) textTypes() []string {
	out := make([]string, 0, len(s.text))
	for t := range s.text {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// trimLines splits a words file into its entries.
func trimLines(b []byte) []string {
	var out []string
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out
}

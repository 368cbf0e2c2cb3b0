// Package retention removes expired messages: by a conversation's retention
// policy (keep N days and/or the last N messages; a server default and
// per-conversation policies set by an admin) and by disappearing messages
// (a per-conversation timer; each message sent while it is on carries its
// expiry). See docs/retention.md.
//
// The chat service asks it for a conversation's floor and timer (it never
// serves a message below the floor or past its expiry); a Sweeper deletes
// expired messages from the store with everything derived from them, tells
// the search index to forget them, and gives the disk space back.
package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/parleyim/parley/internal/store"
)

// Policy is how long a conversation keeps its messages. Zero fields: no
// limit of that kind; both set: a message goes once either says so.
type Policy struct {
	// Days: messages older than this many days expire.
	Days int `json:"days,omitempty"`
	// Messages: only the newest this many messages are kept.
	Messages int `json:"messages,omitempty"`
}

// Off reports whether the policy keeps everything.
func (p Policy) Off() bool { return p.Days <= 0 && p.Messages <= 0 }

// Valid reports whether the policy's numbers are in range.
func (p Policy) Valid() bool {
	return p.Days >= 0 && p.Days <= 100*365 && p.Messages >= 0 && p.Messages <= 1<<40
}

// DisappearingAllowed reports whether seconds is a timer clients may set:
// 0 (off), 30 s, 5 min, 1 h, 1 day, 1 week or 4 weeks.
func DisappearingAllowed(seconds uint32) bool {
	switch seconds {
	case 0, 30, 300, 3600, 86400, 7 * 86400, 28 * 86400:
		return true
	}
	return false
}

// Settings keys (store.GetSetting): a conversation's own policy and its
// disappearing-messages timer, and the list of conversations with a policy
// of their own (so the sweeper visits them without listing every
// conversation when there is no server default).
const (
	policyPrefix = "retention/policy/"
	timerPrefix  = "retention/disappearing/"
	policyList   = "retention/policies"
)

// Config configures a Service.
type Config struct {
	// Default applies to every conversation without a policy of its own.
	Default Policy
	// Interval is the time between sweeps (default 1 minute).
	Interval time.Duration
	// Batch is how many messages one store write deletes (default 1000):
	// a sweep never holds the store's write path for longer than that.
	Batch int
	// Forget, when set, is told every batch of deleted messages (the
	// search index drops them).
	Forget func(ctx context.Context, refs []store.MessageRef) error
	// Files, when set, deletes the files no stored message carries any
	// more (the media service's CollectOrphans) and reports how many; it
	// runs after each sweep's deletions.
	Files func(ctx context.Context) (int, error)
	// Logger for sweep failures (default slog.Default()).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// timerTTL is how long a node trusts its cached copy of a conversation's
// timer: a change made on another node of a cluster reaches this node's
// new messages within it. The node that stores the change updates its own
// copy at once.
const timerTTL = 5 * time.Second

// maxTimers bounds the timer cache (entries are dropped wholesale past it).
const maxTimers = 100_000

type timerEntry struct {
	ms      int64 // the timer in milliseconds, 0: off
	present bool  // a timer was ever set in the conversation
	read    time.Time
}

// Service is retention's state: policies, timers, floors. Safe for
// concurrent use.
type Service struct {
	cfg Config
	st  store.Store
	log *slog.Logger

	mu     sync.Mutex
	timers map[string]timerEntry

	policyMu sync.Mutex // serializes SetPolicy's read-modify-write of policyList
}

// New makes a Service over st.
func New(cfg Config, st store.Store) *Service {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1000
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Service{cfg: cfg, st: st, log: cfg.Logger, timers: make(map[string]timerEntry)}
}

// Floor returns conv's floor: the lowest seq it may still serve (0 or 1:
// nothing expired).
func (s *Service) Floor(ctx context.Context, conv string) (uint64, error) {
	return s.st.MessageFloor(ctx, conv)
}

// Policy returns conv's own policy (ok false: none, the default applies).
func (s *Service) Policy(ctx context.Context, conv string) (p Policy, ok bool, err error) {
	v, err := s.st.GetSetting(ctx, policyPrefix+conv)
	if errors.Is(err, store.ErrNotFound) || (err == nil && len(v) == 0) {
		return Policy{}, false, nil
	}
	if err != nil {
		return Policy{}, false, err
	}
	if err := json.Unmarshal(v, &p); err != nil {
		return Policy{}, false, fmt.Errorf("retention: policy of %q: %w", conv, err)
	}
	return p, true, nil
}

// Default returns the server default policy.
func (s *Service) Default() Policy { return s.cfg.Default }

// SetPolicy sets conv's own policy; nil removes it (the default applies
// again). A policy of its own replaces the default for conv, longer or
// shorter.
func (s *Service) SetPolicy(ctx context.Context, conv string, p *Policy) error {
	if p != nil && !p.Valid() {
		return errors.New("retention: policy out of range")
	}
	s.policyMu.Lock()
	defer s.policyMu.Unlock()
	var v []byte
	if p != nil {
		v, _ = json.Marshal(p)
	}
	if err := s.st.PutSetting(ctx, policyPrefix+conv, v); err != nil {
		return err
	}
	// The list only grows here (a removed policy leaves its conversation
	// listed: the sweeper finds no policy and skips it); another node may
	// add at the same time, hence the swap.
	for range 10 {
		old, err := s.st.GetSetting(ctx, policyList)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		var list []string
		if len(old) > 0 {
			if err := json.Unmarshal(old, &list); err != nil {
				return fmt.Errorf("retention: policy list: %w", err)
			}
		}
		for _, c := range list {
			if c == conv {
				return nil
			}
		}
		next, _ := json.Marshal(append(list, conv))
		swapped, err := s.st.SwapSetting(ctx, policyList, old, next)
		if err != nil {
			return err
		}
		if swapped {
			return nil
		}
	}
	return errors.New("retention: policy list busy")
}

// policyConversations lists the conversations with a policy of their own.
func (s *Service) policyConversations(ctx context.Context) ([]string, error) {
	v, err := s.st.GetSetting(ctx, policyList)
	if errors.Is(err, store.ErrNotFound) || (err == nil && len(v) == 0) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var list []string
	return list, json.Unmarshal(v, &list)
}

// effective is conv's own policy, else the default.
func (s *Service) effective(ctx context.Context, conv string) (Policy, error) {
	p, ok, err := s.Policy(ctx, conv)
	if err != nil || ok {
		return p, err
	}
	return s.cfg.Default, nil
}

// Disappearing returns conv's disappearing-messages timer in seconds (0:
// off): as this node last read or set it, at most timerTTL ago (it is read
// for every conversation of a conversation list).
func (s *Service) Disappearing(ctx context.Context, conv string) (uint32, error) {
	e, err := s.timer(ctx, conv, false)
	return uint32(e.ms / 1000), err
}

// timer returns conv's timer, from the cache unless it is older than
// timerTTL (or fresh is set).
func (s *Service) timer(ctx context.Context, conv string, fresh bool) (timerEntry, error) {
	now := time.Now()
	s.mu.Lock()
	e, ok := s.timers[conv]
	s.mu.Unlock()
	if ok && !fresh && now.Sub(e.read) < timerTTL {
		return e, nil
	}
	v, err := s.st.GetSetting(ctx, timerPrefix+conv)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return e, err
	}
	e = timerEntry{read: now, present: err == nil}
	if err == nil {
		sec, perr := strconv.ParseUint(string(v), 10, 32)
		if perr != nil {
			return e, fmt.Errorf("retention: timer of %q: %w", conv, perr)
		}
		e.ms = int64(sec) * 1000
	}
	s.remember(conv, e)
	return e, nil
}

func (s *Service) remember(conv string, e timerEntry) {
	s.mu.Lock()
	if len(s.timers) >= maxTimers {
		clear(s.timers)
	}
	s.timers[conv] = e
	s.mu.Unlock()
}

// SetDisappearing stores conv's timer (the chat service calls it once the
// DISAPPEARING_SET event is stored) and takes it into this node's cache at
// once, so the next message committed here carries it.
func (s *Service) SetDisappearing(ctx context.Context, conv string, seconds uint32) error {
	if err := s.st.PutSetting(ctx, timerPrefix+conv, []byte(strconv.FormatUint(uint64(seconds), 10))); err != nil {
		return err
	}
	s.remember(conv, timerEntry{ms: int64(seconds) * 1000, present: true, read: time.Now()})
	return nil
}

// ExpiresAt returns the expiry (unix ms) of a message of conv stored at
// serverTime (unix ms): serverTime + the timer, 0 when the timer is off.
// A failed read of the timer is an error: the send fails (the client
// retries) rather than storing for good a message its sender meant to
// disappear.
func (s *Service) ExpiresAt(ctx context.Context, conv string, serverTime int64) (int64, error) {
	e, err := s.timer(ctx, conv, false)
	if err != nil {
		return 0, err
	}
	if e.ms == 0 {
		return 0, nil
	}
	return serverTime + e.ms, nil
}

// MayHaveExpiring reports whether conv ever had a timer: only then can a
// message of it carry an expiry.
func (s *Service) MayHaveExpiring(ctx context.Context, conv string) (bool, error) {
	e, err := s.timer(ctx, conv, false)
	return e.present, err
}

// Package logx wraps a log/slog handler with what a server's logs need on
// top of slog: a level that can change while the server runs, attributes
// carried by a context (an HTTP request's id), and sampling, so a flood of
// one message (a failing disk logging per send) costs neither the disk nor
// the log reader more than the first few records and a count.
package logx

import (
	"context"
	"hash/maphash"
	"log/slog"
	"sync/atomic"
	"time"
)

// Options configure a Handler. Zero values take the stated defaults.
type Options struct {
	// Level is the minimum level logged; a *slog.LevelVar changes it at
	// run time. Default slog.LevelInfo.
	Level slog.Leveler
	// First is how many records of one message (and level) are logged per
	// Interval; past it they are dropped and counted, and when the interval
	// ends one record says how many were dropped. 0 or less: no sampling.
	First int
	// Interval is the sampling window. Default 1s.
	Interval time.Duration
}

// slots is the number of sampling counters. Messages are hashed onto
// them; two messages sharing a slot share its budget, which with few
// distinct messages flooding at once is rare and only drops records
// earlier (the summary still counts them).
const slots = 1024

// sampler is the state shared by a Handler and the handlers derived from
// it (WithAttrs, WithGroup): one budget per message whatever attributes
// were added.
type sampler struct {
	first    uint64
	interval int64 // nanoseconds
	seed     maphash.Seed
	slots    [slots]slot
}

type slot struct {
	resetAt atomic.Int64 // unix nanoseconds when the current window ends
	n       atomic.Uint64
	dropped atomic.Uint64
}

// Handler is a slog.Handler with a variable level, context attributes and
// sampling. Safe for concurrent use.
type Handler struct {
	inner slog.Handler
	level slog.Leveler
	s     *sampler // nil: no sampling
}

// New wraps inner. inner should accept every level (Handler filters);
// its own level, if higher, still applies.
func New(inner slog.Handler, opts Options) *Handler {
	h := &Handler{inner: inner, level: opts.Level}
	if h.level == nil {
		h.level = slog.LevelInfo
	}
	if opts.First > 0 {
		if opts.Interval <= 0 {
			opts.Interval = time.Second
		}
		h.s = &sampler{first: uint64(opts.First), interval: int64(opts.Interval), seed: maphash.MakeSeed()}
	}
	return h
}

// Enabled reports whether records of level l are logged.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= h.level.Level() && h.inner.Enabled(ctx, l)
}

// Handle adds the context's attributes and logs r, unless sampling drops it.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	if h.s != nil && !h.s.keep(h, r) {
		return nil
	}
	if a, ok := ctx.Value(ctxKey{}).(*ctxAttrs); ok && a != nil {
		r.AddAttrs(a.attrs...)
	}
	return h.inner.Handle(ctx, r)
}

// keep counts r against its message's budget for the current window. No
// allocation: a hash, a few atomic operations, and the record's own time
// (slog.Logger sets it) instead of reading the clock.
func (s *sampler) keep(h *Handler, r slog.Record) bool {
	now := r.Time.UnixNano()
	if r.Time.IsZero() {
		now = time.Now().UnixNano()
	}
	sl := &s.slots[(maphash.String(s.seed, r.Message)+uint64(r.Level))%slots]
	if end := sl.resetAt.Load(); now >= end && sl.resetAt.CompareAndSwap(end, now+s.interval) {
		sl.n.Store(0)
	}
	if sl.n.Add(1) <= s.first {
		return true
	}
	if sl.dropped.Add(1) == 1 {
		// The first drop of a window schedules its summary: one timer per
		// flooding message per window, never per record.
		wait := time.Duration(sl.resetAt.Load() - now)
		msg, level := r.Message, r.Level
		time.AfterFunc(max(wait, 0), func() { s.summarize(h, sl, msg, level) })
	}
	return false
}

// summarize logs how many records of msg the window dropped.
func (s *sampler) summarize(h *Handler, sl *slot, msg string, level slog.Level) {
	n := sl.dropped.Swap(0)
	if n == 0 {
		return
	}
	r := slog.NewRecord(time.Now(), max(level, slog.LevelWarn), "log records dropped by sampling", 0)
	r.AddAttrs(slog.String("sampled_msg", msg), slog.String("sampled_level", level.String()), slog.Uint64("dropped", n),
		slog.Duration("interval", time.Duration(s.interval)), slog.Uint64("kept", s.first))
	_ = h.inner.Handle(context.Background(), r)
}

// WithAttrs returns a handler whose records carry attrs, sharing h's level
// and sampling budget.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	c := *h
	c.inner = h.inner.WithAttrs(attrs)
	return &c
}

// WithGroup returns a handler that qualifies later attributes with name.
func (h *Handler) WithGroup(name string) slog.Handler {
	c := *h
	c.inner = h.inner.WithGroup(name)
	return &c
}

type ctxKey struct{}

type ctxAttrs struct{ attrs []slog.Attr }

// With returns ctx carrying attrs (with those ctx carried already): every
// record logged with that context gets them (an HTTP request's id).
func With(ctx context.Context, attrs ...slog.Attr) context.Context {
	if prev, ok := ctx.Value(ctxKey{}).(*ctxAttrs); ok && prev != nil {
		attrs = append(append([]slog.Attr(nil), prev.attrs...), attrs...)
	}
	return context.WithValue(ctx, ctxKey{}, &ctxAttrs{attrs: attrs})
}

// Package migrate copies every record of one store into another: the
// embedded store of a single node (a Source, implemented by pebblestore)
// into PostgreSQL for a cluster (a Sink, implemented by pgstore), with
// conversations' seqs unchanged.
//
// The copy goes kind by kind in the Source's order, in batches bounded by
// bytes. Each batch is written in one target transaction together with the
// position after it, so an interrupted run (kill, Ctrl-C, lost connection)
// is continued by the next one from the last committed batch, and ends
// with the same result. The Source must not change meanwhile: its owner
// (the server) is stopped, and the Sink records the Source's fingerprint
// to refuse continuing from another one.
package migrate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"
)

// Kind names a record kind; the names are recorded in the target's
// progress, so a kind is never renamed.
type Kind string

// ErrUnknownNamespace is returned by a Source holding records of a kind it
// has no exporter for (see records.go for how to add one).
var ErrUnknownNamespace = errors.New("migrate: the source holds records of a kind this build cannot migrate")

// ErrTargetInUse is returned by a Sink whose target holds data that this
// migration did not write, or a migration from another source.
var ErrTargetInUse = errors.New("migrate: the target is not empty")

// ConvStats are what Verify compares per conversation.
type ConvStats struct {
	Conv     string
	LastSeq  uint64
	Messages int64
}

// Source is a store being migrated from. It does not change while it is
// read.
type Source interface {
	// Kinds are the record kinds in the order they are to be copied.
	Kinds() []Kind
	// Check fails (ErrUnknownNamespace) if the source holds records of a
	// kind not in Kinds and not derived from them.
	Check(ctx context.Context) error
	// Fingerprint identifies the source's content.
	Fingerprint(ctx context.Context) (string, error)
	// Read returns the records of kind after position after (nil: from
	// the start), about maxBytes of them (at least one when any is left),
	// and the position after them; next is nil when the kind is exhausted.
	Read(ctx context.Context, kind Kind, after []byte, maxBytes int) (recs []any, next []byte, err error)
	// Conversations pages through every conversation's stats.
	Conversations(ctx context.Context, after []byte, limit int) (stats []ConvStats, next []byte, err error)
}

// Progress is how far a kind has been copied into a Sink.
type Progress struct {
	Resume  []byte // the Source position after the last batch written
	Done    bool
	Records int64 // records written so far
}

// Sink is a store being migrated into.
type Sink interface {
	// Start prepares the target for a migration from the source with the
	// given fingerprint and returns the progress of earlier runs; finished
	// tells a migration that already completed. It fails with
	// ErrTargetInUse if the target holds other data.
	Start(ctx context.Context, fingerprint string) (progress map[Kind]Progress, finished bool, err error)
	// Write stores recs of kind and, in the same transaction, the progress
	// (next; done when the kind is complete). recs may be empty.
	Write(ctx context.Context, kind Kind, recs []any, next []byte, done bool) error
	// Finish completes the migration (counters that follow the data, the
	// completion mark).
	Finish(ctx context.Context) error
	// Count counts the target's records of kind, as the Source counts them.
	Count(ctx context.Context, kind Kind) (int64, error)
	// Conversations returns the stats of those of convs the target has,
	// and ConversationCount how many it has in all.
	Conversations(ctx context.Context, convs []string) (map[string]ConvStats, error)
	ConversationCount(ctx context.Context) (int64, error)
}

// Options tune Run.
type Options struct {
	// BatchBytes bounds a batch's records (source bytes). Default 4 MiB.
	BatchBytes int
	// Out, if set, receives a line per kind copied and the report.
	Out io.Writer
}

const defaultBatchBytes = 4 << 20

// Run copies src into dst, continuing an earlier interrupted run, and
// then verifies the result (Verify).
func Run(ctx context.Context, src Source, dst Sink, opts Options) (Report, error) {
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = defaultBatchBytes
	}
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	if err := src.Check(ctx); err != nil {
		return Report{}, err
	}
	fp, err := src.Fingerprint(ctx)
	if err != nil {
		return Report{}, err
	}
	progress, finished, err := dst.Start(ctx, fp)
	if err != nil {
		return Report{}, err
	}
	if finished {
		fmt.Fprintln(out, "the migration from this source already completed; verifying")
		return Verify(ctx, src, dst, opts)
	}
	start := time.Now()
	for _, kind := range src.Kinds() {
		p := progress[kind]
		if p.Done {
			continue
		}
		n, t0 := p.Records, time.Now()
		after := p.Resume
		for {
			recs, next, err := src.Read(ctx, kind, after, opts.BatchBytes)
			if err != nil {
				return Report{}, fmt.Errorf("migrate: reading %s: %w", kind, err)
			}
			done := next == nil
			if done {
				next = after // kept as it is: the kind is complete
			}
			if err := dst.Write(ctx, kind, recs, next, done); err != nil {
				return Report{}, fmt.Errorf("migrate: writing %s: %w", kind, err)
			}
			n += int64(len(recs))
			after = next
			if done {
				break
			}
		}
		fmt.Fprintf(out, "%-24s %10d copied in %s\n", kind, n, time.Since(t0).Round(time.Millisecond))
	}
	if err := dst.Finish(ctx); err != nil {
		return Report{}, err
	}
	fmt.Fprintf(out, "copied in %s; verifying\n", time.Since(start).Round(time.Millisecond))
	return Verify(ctx, src, dst, opts)
}

// Report is Verify's result.
type Report struct {
	Kinds         []KindCount
	Conversations int64    // in the source
	Differences   []string // empty: both sides agree
}

// KindCount is one kind's record count on each side.
type KindCount struct {
	Kind           Kind
	Source, Target int64
}

// OK reports whether the two sides agree.
func (r Report) OK() bool { return len(r.Differences) == 0 }

// maxDifferences bounds the differences listed (one per conversation could
// be millions).
const maxDifferences = 20

// Verify compares src and dst: every kind's record count, and every
// conversation's last seq and message count. It prints a short report to
// opts.Out. A difference is in the Report, not an error.
func Verify(ctx context.Context, src Source, dst Sink, opts Options) (Report, error) {
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = defaultBatchBytes
	}
	var r Report
	more := 0
	differ := func(format string, args ...any) {
		if len(r.Differences) < maxDifferences {
			r.Differences = append(r.Differences, fmt.Sprintf(format, args...))
		} else {
			more++
		}
	}
	for _, kind := range src.Kinds() {
		var n int64
		var after []byte
		for {
			recs, next, err := src.Read(ctx, kind, after, opts.BatchBytes)
			if err != nil {
				return Report{}, fmt.Errorf("migrate: verify: reading %s: %w", kind, err)
			}
			n += int64(len(recs))
			if next == nil {
				break
			}
			after = next
		}
		m, err := dst.Count(ctx, kind)
		if err != nil {
			return Report{}, fmt.Errorf("migrate: verify: counting %s: %w", kind, err)
		}
		r.Kinds = append(r.Kinds, KindCount{Kind: kind, Source: n, Target: m})
		if n != m {
			differ("%s: %d in the source, %d in the target", kind, n, m)
		}
	}
	var after []byte
	for {
		page, next, err := src.Conversations(ctx, after, 1000)
		if err != nil {
			return Report{}, fmt.Errorf("migrate: verify: source conversations: %w", err)
		}
		ids := make([]string, len(page))
		for i, c := range page {
			ids[i] = c.Conv
		}
		got, err := dst.Conversations(ctx, ids)
		if err != nil {
			return Report{}, fmt.Errorf("migrate: verify: target conversations: %w", err)
		}
		for _, c := range page {
			r.Conversations++
			g, ok := got[c.Conv]
			switch {
			case !ok:
				differ("conversation %q: missing in the target", c.Conv)
			case g.LastSeq != c.LastSeq || g.Messages != c.Messages:
				differ("conversation %q: last seq %d and %d messages in the source, %d and %d in the target",
					c.Conv, c.LastSeq, c.Messages, g.LastSeq, g.Messages)
			}
		}
		if next == nil {
			break
		}
		after = next
	}
	total, err := dst.ConversationCount(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("migrate: verify: %w", err)
	}
	if total != r.Conversations {
		differ("conversations: %d in the source, %d in the target", r.Conversations, total)
	}
	if more > 0 {
		r.Differences = append(r.Differences, fmt.Sprintf("... and %d more differences", more))
	}
	if opts.Out != nil {
		r.Print(opts.Out)
	}
	return r, nil
}

// Print writes the report: one line per kind, then the verdict.
func (r Report) Print(w io.Writer) {
	fmt.Fprintf(w, "%-24s %10s %10s\n", "kind", "source", "target")
	kinds := slices.Clone(r.Kinds)
	for _, k := range kinds {
		mark := ""
		if k.Source != k.Target {
			mark = "  DIFFERENT"
		}
		fmt.Fprintf(w, "%-24s %10d %10d%s\n", k.Kind, k.Source, k.Target, mark)
	}
	fmt.Fprintf(w, "%-24s %10d (last seq and message count compared one by one)\n", "conversations", r.Conversations)
	if r.OK() {
		fmt.Fprintln(w, "verified: the target holds every record of the source")
		return
	}
	fmt.Fprintln(w, "DIFFERENCES:")
	for _, d := range r.Differences {
		fmt.Fprintln(w, "  "+d)
	}
}

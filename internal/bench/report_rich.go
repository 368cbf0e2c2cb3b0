package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// ReactionsReport is what the reactions scenario checks: the final counts
// of the one message everybody reacted to, as every member's own
// reactions add up, as a fresh read finds them, and as each member's view
// (the live updates and its own answers, highest version winning) holds
// them.
//
//	members                members reacting (and whose views were checked)
//	expected               emoji → count: every member's own reactions at the end, added up
//	read                   emoji → count: a fresh SyncReactions after the run
//	read_version           the message's reaction version in that read
//	history_agrees         a History read of the message gave the same counts
//	lost, extra            reactions missing from (or in excess of) the read counts
//	views_mismatched       members whose view differs from the read (counts or version)
//	own_mismatched         members whose own reactions (`me`) differ from what their acked requests imply
//	unsettled              members whose own reactions stayed unknown (a request timed out and could not be settled)
//	updates                live reaction updates received by the members (their answers not counted)
//	updates_per_member_sec updates / members / total_seconds
type ReactionsReport struct {
	Members             uint64            `json:"members"`
	Emojis              []string          `json:"emojis"`
	Expected            map[string]uint64 `json:"expected"`
	Read                map[string]uint64 `json:"read"`
	ReadVersion         uint64            `json:"read_version"`
	ReadVersionsDiffer  bool              `json:"read_versions_differ,omitempty"`
	HistoryAgrees       bool              `json:"history_agrees"`
	Lost                uint64            `json:"lost"`
	Extra               uint64            `json:"extra"`
	ViewsMismatched     uint64            `json:"views_mismatched"`
	OwnMismatched       uint64            `json:"own_mismatched"`
	Unsettled           uint64            `json:"unsettled"`
	Updates             uint64            `json:"updates"`
	UpdatesPerMemberSec float64           `json:"updates_per_member_sec"`
}

func (r *ReactionsReport) merge(o *ReactionsReport) {
	r.Members += o.Members
	r.ViewsMismatched += o.ViewsMismatched
	r.OwnMismatched += o.OwnMismatched
	r.Unsettled += o.Unsettled
	r.Updates += o.Updates
	if r.Expected == nil {
		r.Expected = map[string]uint64{}
	}
	for k, v := range o.Expected {
		r.Expected[k] += v
	}
	if o.ReadVersion != r.ReadVersion {
		// Each process checked its members' views against its own read:
		// they are only comparable when every process read the same state.
		r.ReadVersionsDiffer = true
		if o.ReadVersion > r.ReadVersion {
			r.Read, r.ReadVersion = o.Read, o.ReadVersion
		}
	}
	r.HistoryAgrees = r.HistoryAgrees && o.HistoryAgrees
}

func (r *ReactionsReport) finalize(rep *Report) {
	r.Lost, r.Extra = 0, 0
	keys := slices.Sorted(maps.Keys(r.Expected))
	for k := range r.Read {
		if _, ok := r.Expected[k]; !ok {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		exp, got := r.Expected[k], r.Read[k]
		if exp > got {
			r.Lost += exp - got
		} else {
			r.Extra += got - exp
		}
	}
	if r.Members > 0 && rep.TotalSeconds > 0 {
		r.UpdatesPerMemberSec = float64(r.Updates) / float64(r.Members) / rep.TotalSeconds
	}
	fail := func(n uint64, format string) {
		if n > 0 {
			rep.Failures = append(rep.Failures, fmt.Sprintf(format, n))
		}
	}
	fail(r.Lost, "%d reactions lost in the final counts")
	fail(r.Extra, "%d reactions too many in the final counts")
	fail(r.ViewsMismatched, "%d members' views differ from the final counts")
	fail(r.OwnMismatched, "%d members' own reactions differ from their acked requests")
	fail(r.Unsettled, "%d members' own reactions could not be settled")
	if r.ReadVersionsDiffer {
		rep.Failures = append(rep.Failures, "the processes read different final versions (one was still reacting when another checked)")
	}
	if !r.HistoryAgrees {
		rep.Failures = append(rep.Failures, "History and SyncReactions gave different counts")
	}
}

func (r *ReactionsReport) writeText(b *strings.Builder) {
	counts := func(m map[string]uint64) string {
		var parts []string
		var sum uint64
		for _, e := range r.Emojis {
			parts = append(parts, fmt.Sprintf("%s %d", e, m[e]))
			sum += m[e]
		}
		for _, e := range slices.Sorted(maps.Keys(m)) {
			if !slices.Contains(r.Emojis, e) {
				parts = append(parts, fmt.Sprintf("%s %d", e, m[e]))
				sum += m[e]
			}
		}
		return fmt.Sprintf("%s (total %d)", strings.Join(parts, ", "), sum)
	}
	b.WriteString("\nReactions (one message, every member reacting):\n")
	fmt.Fprintf(b, "  Members:\t%d\n", r.Members)
	fmt.Fprintf(b, "  Final counts expected:\t%s\n", counts(r.Expected))
	fmt.Fprintf(b, "  Final counts read:\t%s at version %d (SyncReactions; History agrees: %v)\n", counts(r.Read), r.ReadVersion, r.HistoryAgrees)
	fmt.Fprintf(b, "  Lost in the final counts:\t%d (and %d too many)\n", r.Lost, r.Extra)
	fmt.Fprintf(b, "  Member views differing from them:\t%d of %d\n", r.ViewsMismatched, r.Members)
	fmt.Fprintf(b, "  Own reactions differing from the acked requests:\t%d\n", r.OwnMismatched)
	if r.Unsettled > 0 {
		fmt.Fprintf(b, "  Own reactions unknown:\t%d\n", r.Unsettled)
	}
	fmt.Fprintf(b, "  Live updates received:\t%d (%.1f per member per second)\n", r.Updates, r.UpdatesPerMemberSec)
}

// StreamReport is what the stream scenario checks besides the chunks'
// delivery (see Delivery: chunks appended, delivered, lost, latency):
// every finished streamed message reaches every online member once with
// the whole text, and is stored once with it.
//
//	bots, receivers            streaming bots (one group each) and their online members
//	messages                   streamed messages finished (StreamFinish acked)
//	finish_failed              StreamFinish not acked
//	chunks_late                chunks sent more than one interval after their time (the bot fell behind)
//	finals_expected            finished messages × their group's online members
//	finals_received            finished messages received live (Message with stream_id)
//	finals_missing, finals_duplicated, finals_wrong_text
//	live_text_mismatched       receivers whose chunks, all received, do not add up to the finished text
//	stored                     finished messages found in the groups' history
//	stored_missing, stored_duplicated, stored_wrong_text
//	finish_latency             StreamFinish → its send_ack
type StreamReport struct {
	Bots                 uint64     `json:"bots"`
	Receivers            uint64     `json:"receivers"`
	Messages             uint64     `json:"messages"`
	FinishFailed         uint64     `json:"finish_failed"`
	ChunksLate           uint64     `json:"chunks_late"`
	FinalsExpected       uint64     `json:"finals_expected"`
	FinalsReceived       uint64     `json:"finals_received"`
	FinalsMissing        uint64     `json:"finals_missing"`
	FinalsDuplicated     uint64     `json:"finals_duplicated"`
	FinalsWrongText      uint64     `json:"finals_wrong_text"`
	LiveTextMismatched   uint64     `json:"live_text_mismatched"`
	Stored               uint64     `json:"stored"`
	StoredMissing        uint64     `json:"stored_missing"`
	StoredDuplicated     uint64     `json:"stored_duplicated"`
	StoredWrongText      uint64     `json:"stored_wrong_text"`
	FinishLatency        *Histogram `json:"finish_latency"`
	FinishLatencySummary Summary    `json:"finish_latency_summary"`
}

func (r *StreamReport) merge(o *StreamReport) {
	r.Bots += o.Bots
	r.Receivers += o.Receivers
	r.Messages += o.Messages
	r.FinishFailed += o.FinishFailed
	r.ChunksLate += o.ChunksLate
	r.FinalsExpected += o.FinalsExpected
	r.FinalsReceived += o.FinalsReceived
	r.FinalsMissing += o.FinalsMissing
	r.FinalsDuplicated += o.FinalsDuplicated
	r.FinalsWrongText += o.FinalsWrongText
	r.LiveTextMismatched += o.LiveTextMismatched
	r.Stored += o.Stored
	r.StoredMissing += o.StoredMissing
	r.StoredDuplicated += o.StoredDuplicated
	r.StoredWrongText += o.StoredWrongText
	if r.FinishLatency == nil {
		r.FinishLatency = NewHistogram()
	}
	if o.FinishLatency != nil {
		r.FinishLatency.Merge(o.FinishLatency)
	}
}

func (r *StreamReport) finalize(rep *Report) {
	if r.FinishLatency == nil {
		r.FinishLatency = NewHistogram()
	}
	r.FinishLatencySummary = summarize(r.FinishLatency)
	fail := func(n uint64, format string) {
		if n > 0 {
			rep.Failures = append(rep.Failures, fmt.Sprintf(format, n))
		}
	}
	fail(r.FinalsMissing, "%d finished messages never reached an online member")
	fail(r.FinalsDuplicated, "%d finished messages reached a member more than once")
	fail(r.FinalsWrongText, "%d finished messages reached a member with the wrong text")
	fail(r.LiveTextMismatched, "%d streams' chunks did not add up to their finished text at a member")
	fail(r.StoredMissing, "%d finished messages not found stored")
	fail(r.StoredDuplicated, "%d finished messages stored more than once")
	fail(r.StoredWrongText, "%d finished messages stored with the wrong text")
	fail(r.FinishFailed, "%d streams not finished (StreamFinish failed)")
}

func (r *StreamReport) writeText(b *strings.Builder) {
	b.WriteString("\nStreamed messages:\n")
	fmt.Fprintf(b, "  Bots:\t%d, each streaming to its own group\n  Receivers:\t%d online\n", r.Bots, r.Receivers)
	fmt.Fprintf(b, "  Messages finished:\t%d (%d not finished)\n", r.Messages, r.FinishFailed)
	fmt.Fprintf(b, "  Chunks sent late:\t%d (the bot more than one interval behind its schedule)\n", r.ChunksLate)
	fmt.Fprintf(b, "  Finished messages at the receivers:\t%d of %d (missing %d, duplicated %d, wrong text %d)\n",
		r.FinalsReceived, r.FinalsExpected, r.FinalsMissing, r.FinalsDuplicated, r.FinalsWrongText)
	fmt.Fprintf(b, "  Live chunks not adding up to the finished text:\t%d\n", r.LiveTextMismatched)
	fmt.Fprintf(b, "  Stored (history):\t%d of %d (missing %d, duplicated %d, wrong text %d)\n",
		r.Stored, r.Messages, r.StoredMissing, r.StoredDuplicated, r.StoredWrongText)
	s := r.FinishLatencySummary
	fmt.Fprintf(b, "  StreamFinish → send_ack:\tp50 %.4f s, p99 %.4f s, max %.4f s\n", pct(s, 50), pct(s, 99), s.SlowestS)
}

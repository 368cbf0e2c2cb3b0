package bench

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// Report is a run's result, from one process or merged from several. Its
// JSON form (--json) has stable snake_case names:
//
//	scenario, config            what ran (config.api_key is blanked)
//	started_at                  RFC 3339 time the timed phase began
//	processes                   load processes whose results were merged
//	total_seconds               timed phase: first request to last answer
//	requests, ok                finished requests, and those that succeeded
//	requests_per_sec            requests / total_seconds
//	latency                     histogram of successful requests (see histJSON)
//	latency_summary             fastest_s, slowest_s, average_s, percentiles [{p, s}]
//	status                      outcome → count ("ok", ERROR_CODE_…, DISCONNECT_CODE_…, timeout, …)
//	delivery                    message scenarios: see Delivery
//	parts                       mixed: each part (1:1, groups, big group) on its own: see PartReport
//	conns                       conns: see Conns
//	push                        push-offline: see PushReport
//	media                       upload and download: see MediaReport
//	reactions                   reactions: see ReactionsReport
//	stream                      stream: see StreamReport (the chunks' delivery is in delivery)
//	search                      search: see SearchReport (the load's ACK latency is latency)
//	server                      server CPU and memory when its pid is known: see ServerUsage
//	series                      one Sample per second of the timed phase (and the drain)
//	passed, failures            the reliability verdict and why it failed
//	notes                       caveats about the figures
type Report struct {
	Scenario       string            `json:"scenario"`
	Config         Config            `json:"config"`
	StartedAt      time.Time         `json:"started_at"`
	Processes      int               `json:"processes"`
	TotalSeconds   float64           `json:"total_seconds"`
	Requests       uint64            `json:"requests"`
	OK             uint64            `json:"ok"`
	RequestsPerSec float64           `json:"requests_per_sec"`
	Latency        *Histogram        `json:"latency"`
	LatencySummary Summary           `json:"latency_summary"`
	Status         map[string]uint64 `json:"status"`
	Delivery       *Delivery         `json:"delivery,omitempty"`
	Parts          []*PartReport     `json:"parts,omitempty"`
	Conns          *Conns            `json:"conns,omitempty"`
	Push           *PushReport       `json:"push,omitempty"`
	Media          *MediaReport      `json:"media,omitempty"`
	Reactions      *ReactionsReport  `json:"reactions,omitempty"`
	Stream         *StreamReport     `json:"stream,omitempty"`
	Search         *SearchReport     `json:"search,omitempty"`
	Server         *ServerUsage      `json:"server,omitempty"`
	Series         []Sample          `json:"series"`
	Passed         bool              `json:"passed"`
	Failures       []string          `json:"failures,omitempty"`
	Notes          []string          `json:"notes,omitempty"`
}

// Summary condenses a histogram, in seconds.
type Summary struct {
	FastestS    float64      `json:"fastest_s"`
	SlowestS    float64      `json:"slowest_s"`
	AverageS    float64      `json:"average_s"`
	Percentiles []Percentile `json:"percentiles"`
}

// Percentile is the value (seconds) at or below which P percent fall.
type Percentile struct {
	P float64 `json:"p"`
	S float64 `json:"s"`
}

// Delivery is what message scenarios check: every message acked to its
// sender reaches its online receiver once, in order.
type Delivery struct {
	Sent             uint64     `json:"sent"`               // send frames issued
	Acked            uint64     `json:"acked"`              // sends acked by the server
	SendsPerSec      float64    `json:"sends_per_sec"`      // acked / total_seconds
	Expected         uint64     `json:"expected"`           // acked messages to online receivers
	Received         uint64     `json:"received"`           // distinct messages received
	ReceivedUnacked  uint64     `json:"received_unacked"`   // received although the send got no ack (timeouts): not an error
	Lost             uint64     `json:"lost"`               // expected but never received
	Duplicated       uint64     `json:"duplicated"`         // received more than once
	OutOfOrder       uint64     `json:"out_of_order"`       // received after a later message of its stream
	AckOutOfOrder    uint64     `json:"ack_out_of_order"`   // acked with a seq not above that of an earlier send
	DeliverySeconds  float64    `json:"delivery_seconds"`   // timed phase start to last receipt
	DeliveriesPerSec float64    `json:"deliveries_per_sec"` // received / delivery_seconds
	E2E              *Histogram `json:"e2e_latency"`        // send → receipt at the receiver
	E2ESummary       Summary    `json:"e2e_summary"`
	// Conversation scenarios (group, send-rate, fanout, mixed): receiving
	// sessions checked, those with anything lost, duplicated, out of order
	// or unsettled, and (receiver, stream) pairs whose end marker never came.
	Receivers       uint64 `json:"receivers,omitempty"`
	ReceiversFailed uint64 `json:"receivers_failed,omitempty"`
	EndsMissing     uint64 `json:"ends_missing,omitempty"`
}

// PartReport is one part of a mixed run: its sends (ack latency) and its
// deliveries, counted as the totals are.
type PartReport struct {
	Name           string     `json:"name"`
	Requests       uint64     `json:"requests"`
	OK             uint64     `json:"ok"`
	Latency        *Histogram `json:"latency"`
	LatencySummary Summary    `json:"latency_summary"`
	Delivery       Delivery   `json:"delivery"`
}

// add folds another process's counts of the same run into d.
func (d *Delivery) add(e *Delivery) {
	d.Sent += e.Sent
	d.Acked += e.Acked
	d.Expected += e.Expected
	d.Received += e.Received
	d.ReceivedUnacked += e.ReceivedUnacked
	d.Lost += e.Lost
	d.Duplicated += e.Duplicated
	d.OutOfOrder += e.OutOfOrder
	d.AckOutOfOrder += e.AckOutOfOrder
	d.Receivers += e.Receivers
	d.ReceiversFailed += e.ReceiversFailed
	d.EndsMissing += e.EndsMissing
	d.DeliverySeconds = max(d.DeliverySeconds, e.DeliverySeconds)
	if d.E2E == nil {
		d.E2E = NewHistogram()
	}
	if e.E2E != nil {
		d.E2E.Merge(e.E2E)
	}
}

// finalize derives d's rates and summary over a timed phase of total seconds.
func (d *Delivery) finalize(total float64) {
	if total > 0 {
		d.SendsPerSec = float64(d.Acked) / total
	}
	if d.DeliverySeconds > 0 {
		d.DeliveriesPerSec = float64(d.Received) / d.DeliverySeconds
	}
	if d.E2E == nil {
		d.E2E = NewHistogram()
	}
	d.E2ESummary = summarize(d.E2E)
}

// Conns is the idle-connection result.
type Conns struct {
	Target            uint64  `json:"target"`              // connections asked for
	Held              uint64  `json:"held"`                // connections open when the hold ended
	ServerRSSBaseline uint64  `json:"server_rss_baseline"` // bytes, before connecting
	ServerRSSHeld     uint64  `json:"server_rss_held"`     // bytes, highest sample while all were held
	BytesPerConn      float64 `json:"bytes_per_conn"`      // (held - baseline) / target; 0 when unknown
}

// ServerUsage is the server process's CPU and memory, sampled each second
// from /proc.
type ServerUsage struct {
	PID            int     `json:"pid"`
	SharesProcess  bool    `json:"shares_process"`  // the load generator ran in the same process
	CPUAvgPercent  float64 `json:"cpu_avg_percent"` // 100 = one core busy
	CPUMaxPercent  float64 `json:"cpu_max_percent"`
	RSSBaseline    uint64  `json:"rss_baseline"` // bytes, when the timed phase began
	RSSPeak        uint64  `json:"rss_peak"`
	RSSEnd         uint64  `json:"rss_end"`
	SampledSeconds int     `json:"sampled_seconds"`
}

// Sample is one second of a run: counts of events within it (T-1, T] and
// the state at its end.
type Sample struct {
	T                float64 `json:"t"` // seconds since the timed phase began
	Connected        int64   `json:"connected"`
	Requests         uint64  `json:"requests"`
	Errors           uint64  `json:"errors"`
	Sent             uint64  `json:"sent"`
	Acked            uint64  `json:"acked"`
	Delivered        uint64  `json:"delivered"`
	ServerCPUPercent float64 `json:"server_cpu_percent,omitempty"`
	ServerRSSBytes   uint64  `json:"server_rss_bytes,omitempty"`
}

var percentiles = []float64{10, 25, 50, 75, 90, 95, 99, 99.9}

func summarize(h *Histogram) Summary {
	s := Summary{FastestS: h.Min().Seconds(), SlowestS: h.Max().Seconds(), AverageS: h.Mean().Seconds()}
	for _, p := range percentiles {
		s.Percentiles = append(s.Percentiles, Percentile{p, h.Percentile(p).Seconds()})
	}
	return s
}

// merge folds o (another process's share of the same run) into r.
func (r *Report) merge(o *Report) {
	r.Processes += o.Processes
	r.TotalSeconds = max(r.TotalSeconds, o.TotalSeconds)
	if r.StartedAt.IsZero() || (!o.StartedAt.IsZero() && o.StartedAt.Before(r.StartedAt)) {
		r.StartedAt = o.StartedAt
	}
	r.Requests += o.Requests
	r.OK += o.OK
	r.Latency.Merge(o.Latency)
	for k, v := range o.Status {
		r.Status[k] += v
	}
	if o.Delivery != nil {
		if r.Delivery == nil {
			r.Delivery = &Delivery{E2E: NewHistogram()}
		}
		r.Delivery.add(o.Delivery)
	}
	for _, op := range o.Parts {
		i := slices.IndexFunc(r.Parts, func(p *PartReport) bool { return p.Name == op.Name })
		if i < 0 {
			r.Parts = append(r.Parts, op)
			continue
		}
		p := r.Parts[i]
		p.Requests += op.Requests
		p.OK += op.OK
		p.Latency.Merge(op.Latency)
		p.Delivery.add(&op.Delivery)
	}
	if o.Conns != nil {
		if r.Conns == nil {
			r.Conns = &Conns{}
		}
		r.Conns.Target += o.Conns.Target
		r.Conns.Held += o.Conns.Held
	}
	for i, s := range o.Series {
		if i >= len(r.Series) {
			r.Series = append(r.Series, Sample{T: s.T})
		}
		t := &r.Series[i]
		t.T = max(t.T, s.T)
		t.Connected += s.Connected
		t.Requests += s.Requests
		t.Errors += s.Errors
		t.Sent += s.Sent
		t.Acked += s.Acked
		t.Delivered += s.Delivered
	}
	if o.Reactions != nil {
		if r.Reactions == nil {
			r.Reactions = o.Reactions
		} else {
			r.Reactions.merge(o.Reactions)
		}
	}
	if o.Stream != nil {
		if r.Stream == nil {
			r.Stream = o.Stream
		} else {
			r.Stream.merge(o.Stream)
		}
	}
	if o.Search != nil && r.Search == nil {
		r.Search = o.Search // search runs in one process
	}
	r.Notes = append(r.Notes, o.Notes...)
	r.Failures = append(r.Failures, o.Failures...)
}

// finalize derives rates, summaries and the verdict from the counts.
func (r *Report) finalize() {
	if r.TotalSeconds > 0 {
		r.RequestsPerSec = float64(r.Requests) / r.TotalSeconds
	}
	r.LatencySummary = summarize(r.Latency)
	for _, p := range r.Parts {
		p.LatencySummary = summarize(p.Latency)
		p.Delivery.finalize(r.TotalSeconds)
	}
	if d := r.Delivery; d != nil {
		d.finalize(r.TotalSeconds)
		if d.EndsMissing > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%d end-of-stream markers never arrived (those receivers could not settle)", d.EndsMissing))
		}
		if d.Lost > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%d messages lost", d.Lost))
		}
		if d.Duplicated > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%d messages duplicated", d.Duplicated))
		}
		if d.OutOfOrder > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%d messages out of order", d.OutOfOrder))
		}
		if d.AckOutOfOrder > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%d acks out of send order", d.AckOutOfOrder))
		}
	}
	if p := r.Push; p != nil {
		p.finalize(r)
	}
	if m := r.Media; m != nil {
		m.finalize(r)
	}
	if x := r.Reactions; x != nil {
		x.finalize(r)
	}
	if x := r.Stream; x != nil {
		x.finalize(r)
	}
	if x := r.Search; x != nil {
		x.finalize(r)
	}
	if c := r.Conns; c != nil && c.Held < c.Target {
		r.Failures = append(r.Failures, fmt.Sprintf("%d of %d connections not held", c.Target-c.Held, c.Target))
	}
	slices.Sort(r.Failures)
	r.Failures = slices.Compact(r.Failures)
	slices.Sort(r.Notes)
	r.Notes = slices.Compact(r.Notes)
	r.Passed = len(r.Failures) == 0
}

// secsFormat picks kimbench's 4 decimals, or more for sub-10 ms latencies
// that 4 decimals would flatten to 0.000x.
func secsFormat(slowest float64) string {
	switch {
	case slowest >= 0.01:
		return "%4.4f"
	case slowest >= 0.001:
		return "%4.5f"
	}
	return "%4.6f"
}

// WriteText writes the report in kimbench's layout (Summary, Response time
// histogram, Latency distribution; kimbench's "Status code distribution" is
// "Answers by code", its latency "Total" is "Run time"), followed by the
// delivery, connection and server sections that apply.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "parley bench %s -c %d -t %d%s (%s/%s, %d process", r.Scenario, c.Count, c.Concurrency, c.groupFlags(), c.Transport, c.Codec, r.Processes)
	if r.Processes != 1 {
		b.WriteString("es")
	}
	b.WriteString(")\n\n")
	writeLatency(&b, "Summary: "+requestLatencyLabel(r.Scenario), r.Latency, r.LatencySummary, r.TotalSeconds, r.RequestsPerSec)
	b.WriteString("\nAnswers by code:\n")
	keys := slices.Sorted(maps.Keys(r.Status))
	for _, k := range keys {
		fmt.Fprintf(&b, "  [%s]\t%d responses\n", k, r.Status[k])
	}
	if d := r.Delivery; d != nil {
		b.WriteString("\nDelivery:\n")
		fmt.Fprintf(&b, "  Sends/sec:\t%.4f\n", d.SendsPerSec)
		fmt.Fprintf(&b, "  Deliveries/sec:\t%.4f\n", d.DeliveriesPerSec)
		fmt.Fprintf(&b, "  Sent:\t%d\n  Acked:\t%d\n", d.Sent, d.Acked)
		fmt.Fprintf(&b, "  Expected:\t%d\n  Received:\t%d\n", d.Expected, d.Received)
		if d.ReceivedUnacked > 0 {
			fmt.Fprintf(&b, "  Received unacked:\t%d (sends that timed out but were stored)\n", d.ReceivedUnacked)
		}
		fmt.Fprintf(&b, "  Lost:\t%d\n  Duplicated:\t%d\n  Out of order:\t%d\n", d.Lost, d.Duplicated, d.OutOfOrder)
		if d.AckOutOfOrder > 0 {
			fmt.Fprintf(&b, "  Acks out of send order:\t%d\n", d.AckOutOfOrder)
		}
		if d.Receivers > 0 {
			fmt.Fprintf(&b, "  Receivers:\t%d checked, %d with anything lost, duplicated or out of order\n", d.Receivers, d.ReceiversFailed)
		}
		if d.EndsMissing > 0 {
			fmt.Fprintf(&b, "  End markers missing:\t%d (receiver, stream) pairs could not settle\n", d.EndsMissing)
		}
		b.WriteString("\n")
		writeLatency(&b, "End-to-end latency (send → receipt at the receiver):", d.E2E, d.E2ESummary, d.DeliverySeconds, -1)
	}
	if len(r.Parts) > 0 {
		b.WriteString("\nParts:\n")
		b.WriteString("  part\tsends/s\tacked\tp99 ack\tdeliveries/s\texpected\treceived\tlost\tdup\tooo\tp99 e2e\n")
		for _, p := range r.Parts {
			d := p.Delivery
			fmt.Fprintf(&b, "  %s\t%.1f\t%d\t%.4f s\t%.1f\t%d\t%d\t%d\t%d\t%d\t%.4f s\n", p.Name, d.SendsPerSec, d.Acked,
				pct(p.LatencySummary, 99), d.DeliveriesPerSec, d.Expected, d.Received, d.Lost, d.Duplicated, d.OutOfOrder, pct(d.E2ESummary, 99))
		}
	}
	if cn := r.Conns; cn != nil {
		b.WriteString("\nConnections:\n")
		fmt.Fprintf(&b, "  Target:\t%d\n  Held:\t%d\n", cn.Target, cn.Held)
		if cn.BytesPerConn > 0 {
			fmt.Fprintf(&b, "  Server RSS:\t%s before, %s held\n", mib(cn.ServerRSSBaseline), mib(cn.ServerRSSHeld))
			fmt.Fprintf(&b, "  Server memory per connection:\t%.2f KiB\n", cn.BytesPerConn/1024)
		}
	}
	if p := r.Push; p != nil {
		b.WriteString("\nPush notifications (FCM stand-in):\n")
		fmt.Fprintf(&b, "  Notifications/sec:\t%.4f (first to last notification)\n", p.NotificationsPerSec)
		fmt.Fprintf(&b, "  Devices:\t%d offline, with a push target\n  Messages:\t%d acked\n", p.Devices, p.Messages)
		fmt.Fprintf(&b, "  Notifications:\t%d in %.4f secs\n", p.Notifications, p.Seconds)
		fmt.Fprintf(&b, "  Devices not notified of every message:\t%d\n  Duplicated:\t%d\n", p.DevicesNotCovered, p.Duplicated)
		fmt.Fprintf(&b, "  Requests not as FCM documents them:\t%d\n\n", len(p.Violations))
		writeLatency(&b, "Notification latency (message stored → platform request, push_delay included):", p.Latency, p.LatencySummary, p.Seconds, -1)
	}
	if m := r.Media; m != nil {
		b.WriteString("\nFiles:\n")
		fmt.Fprintf(&b, "  Throughput:\t%.1f MB/s (%d files of %d bytes)\n", m.MBPerSec, m.Files, m.FileBytes)
		if r.Scenario == "upload" {
			fmt.Fprintf(&b, "  Users whose media usage differs from their uploads:\t%d\n", m.Mismatched)
		}
	}
	if x := r.Reactions; x != nil {
		x.writeText(&b)
	}
	if x := r.Stream; x != nil {
		x.writeText(&b)
	}
	if x := r.Search; x != nil {
		x.writeText(&b)
	}
	if s := r.Server; s != nil {
		fmt.Fprintf(&b, "\nServer (pid %d, /proc sampled each second, %d samples", s.PID, s.SampledSeconds)
		if s.SharesProcess {
			b.WriteString("; the load generator runs in this process too")
		}
		b.WriteString("):\n")
		fmt.Fprintf(&b, "  CPU:\tavg %.1f%%, max %.1f%% (100%% = one core)\n", s.CPUAvgPercent, s.CPUMaxPercent)
		fmt.Fprintf(&b, "  RSS:\t%s at start, %s peak, %s at end\n", mib(s.RSSBaseline), mib(s.RSSPeak), mib(s.RSSEnd))
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\nNote: %s\n", n)
	}
	if r.Delivery != nil || r.Conns != nil || r.Push != nil || r.Media != nil || r.Reactions != nil || r.Stream != nil || r.Search != nil {
		if r.Passed {
			b.WriteString("\nReliability: PASS\n")
		} else {
			fmt.Fprintf(&b, "\nReliability: FAIL (%s)\n", strings.Join(r.Failures, "; "))
		}
	} else if !r.Passed {
		fmt.Fprintf(&b, "\nFAIL (%s)\n", strings.Join(r.Failures, "; "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// requestLatencyLabel says what a scenario's request latency times: each
// request from its start until what answers it.
func requestLatencyLabel(scenario string) string {
	switch scenario {
	case "login", "conns":
		return "login latency (connect → auth_ok):"
	case "push":
		return "push request latency (POST → the admin API's answer):"
	case "upload":
		return "upload latency (first byte sent → the file's record):"
	case "download":
		return "download latency (GET → the file's last byte):"
	case "reactions":
		return "reaction latency (react → the server's answer, after the durable store):"
	default:
		return "ACK latency (send → the server's ACK, after the durable store):"
	}
}

// writeLatency writes a kimbench Summary, Response time histogram and
// Latency distribution for h. perSec < 0 leaves out Requests/sec.
func writeLatency(b *strings.Builder, title string, h *Histogram, s Summary, total, perSec float64) {
	f := secsFormat(s.SlowestS)
	fmt.Fprintf(b, "%s\n", title)
	fmt.Fprintf(b, "  Run time:\t%4.4f secs\n", total)
	fmt.Fprintf(b, "  Slowest:\t"+f+" secs\n", s.SlowestS)
	fmt.Fprintf(b, "  Fastest:\t"+f+" secs\n", s.FastestS)
	fmt.Fprintf(b, "  Average:\t"+f+" secs\n", s.AverageS)
	if perSec >= 0 {
		fmt.Fprintf(b, "  Requests/sec:\t%4.4f\n", perSec)
	}
	if h.Count() == 0 {
		return
	}
	b.WriteString("\nResponse time histogram:\n")
	marks, counts := h.spread(4)
	var top uint64
	for _, c := range counts {
		top = max(top, c)
	}
	for i, m := range marks {
		bar := 0
		if top > 0 {
			bar = int(counts[i] * 40 / top)
		}
		fmt.Fprintf(b, "  "+f+" [%d]\t|%s\n", m.Seconds(), counts[i], strings.Repeat("■", bar))
	}
	b.WriteString("\nLatency distribution:\n")
	for _, p := range s.Percentiles {
		fmt.Fprintf(b, "  %v%% in "+f+" secs\n", p.P, p.S)
	}
}

// pct is percentile p of a summary, in seconds (0 when absent).
func pct(s Summary, p float64) float64 {
	for _, q := range s.Percentiles {
		if q.P == p {
			return q.S
		}
	}
	return 0
}

// groupFlags describes the group scenarios' sizes for the report's title.
func (c Config) groupFlags() string {
	switch c.Scenario {
	case "group":
		return fmt.Sprintf(" -m %d -p %g --pipeline %d", c.Members, c.Online, c.Pipeline)
	case "send-rate":
		return fmt.Sprintf(" --groups %d -m %d --group-online %d --rate %g --pipeline %d", c.Groups, c.Members, c.GroupOnline, c.Rate, c.Pipeline)
	case "fanout":
		return fmt.Sprintf(" -m %d --online %d --rate %g --pipeline %d", c.Members, c.OnlineMembers, c.Rate, c.Pipeline)
	case "push-offline":
		return fmt.Sprintf(" -m %d --rate %g", c.Members, c.Rate)
	case "reactions":
		return fmt.Sprintf(" -m %d --emojis %d --pipeline %d --rate %g", c.Members, c.Emojis, c.Pipeline, c.Rate)
	case "stream":
		return fmt.Sprintf(" -m %d --rate %g --chunks %d --size %d", c.Members, c.Rate, c.Chunks, c.Size)
	case "search":
		return fmt.Sprintf(" --convs %d --pipeline %d --searchers %s --duration %v --seed %d", c.Convs, c.Pipeline, intList(c.Searchers), c.QueryDuration, c.Seed)
	case "mixed":
		return fmt.Sprintf(" --pairs %d --groups %d --group-size %d -m %d --online %d --rate %g --group-rate %g --big-rate %g",
			c.Pairs, c.Groups, c.GroupSize, c.Members, c.OnlineMembers, c.Rate, c.GroupRate, c.BigRate)
	}
	return ""
}

// intList writes ns as a flag takes them: "1,8,50".
func intList(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

package server

import (
	"context"
	"io"
	"runtime"
	"time"

	"github.com/parleyim/parley/internal/buildinfo"
	"github.com/parleyim/parley/internal/gateway"
	"github.com/parleyim/parley/internal/metrics"
	"github.com/parleyim/parley/internal/moderation"
	"github.com/parleyim/parley/internal/store/pebblestore"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// writeMetrics writes every figure of this node in the Prometheus text format.
func (s *Server) writeMetrics(out io.Writer) error {
	gs, cs := s.gw.Stats(), s.chat.Stats()
	ack, commit := s.chat.Latencies()
	wh := s.hooks.Stats()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)

	w := metrics.NewWriter(out)
	bi := buildinfo.Read(s.cfg.Version)
	w.Family("parley_build_info", "Always 1; the labels say what this server is: its version, commit, Go release and client protocol version.", "gauge", []metrics.Sample{
		{Labels: []metrics.Label{{Name: "version", Value: bi.Version}, {Name: "commit", Value: bi.Commit},
			{Name: "go_version", Value: bi.GoVersion}, {Name: "protocol", Value: bi.Protocol}}, Value: 1},
	})
	w.Family("parley_connections", "Open client connections, by transport.", "gauge", []metrics.Sample{
		{Labels: []metrics.Label{{Name: "transport", Value: "ws"}}, Value: float64(gs.OpenWS)},
		{Labels: []metrics.Label{{Name: "transport", Value: "tcp"}}, Value: float64(gs.OpenTCP)},
	})
	w.Family("parley_connections_accepted_total", "Connections accepted, by transport.", "counter", []metrics.Sample{
		{Labels: []metrics.Label{{Name: "transport", Value: "ws"}}, Value: float64(gs.AcceptedWS)},
		{Labels: []metrics.Label{{Name: "transport", Value: "tcp"}}, Value: float64(gs.AcceptedTCP)},
	})
	closed := make([]metrics.Sample, 0, len(gs.Closed))
	for code := pb.DisconnectCode(0); code < 16; code++ {
		if n, ok := gs.Closed[code]; ok {
			closed = append(closed, metrics.Sample{Labels: []metrics.Label{{Name: "code", Value: code.String()}}, Value: float64(n)})
		}
	}
	w.Family("parley_connections_closed_total", "Connections closed, by disconnect code (UNSPECIFIED: the client went away).", "counter", closed)
	w.Gauge("parley_connections_unauthenticated", "Open connections that have not authenticated yet.", float64(gs.Unauthenticated))
	refused := make([]metrics.Sample, 0, len(gs.Refused))
	for r := gateway.Refusal(1); int(r) < len(gs.Refused); r++ {
		refused = append(refused, metrics.Sample{Labels: []metrics.Label{{Name: "reason", Value: r.String()}}, Value: float64(gs.Refused[r])})
	}
	w.Family("parley_connections_refused_total", "New connections refused at once, by reason: unauth_total (max_unauth_conns), unauth_ip (max_unauth_conns_per_ip), fd_reserve (fd_reserve).", "counter", refused)
	w.Gauge("parley_sessions", "Authenticated sessions on this node.", float64(s.chat.Sessions().Len()))
	w.Counter("parley_frames_in_total", "Client frames received.", float64(gs.FramesIn))
	w.Counter("parley_frames_out_total", "Server frames handed to sockets.", float64(gs.FramesOut))
	w.Counter("parley_socket_writes_total", "Write calls on sockets (fewer than frames: coalesced).", float64(gs.Writes))
	w.Counter("parley_messages_stored_total", "Messages and events newly stored.", float64(cs.SendsAccepted))
	w.Counter("parley_messages_duplicate_total", "Sends answered from de-dup (client retries).", float64(cs.SendsDuplicate))
	w.Counter("parley_messages_failed_total", "Sends answered UNAVAILABLE (storage failed).", float64(cs.SendsFailed))
	w.Counter("parley_deliveries_total", "Frames queued on receiving sessions (messages, events, pushes).", float64(cs.Deliveries))
	w.Counter("parley_commit_batches_total", "Storage commits (group commit batches).", float64(cs.CommitBatches))
	w.Histogram("parley_ack_latency_seconds", "From a send queued to its SendAck (storage included).", ack)
	w.Histogram("parley_commit_latency_seconds", "One storage commit (a batch, fsync included).", commit)
	w.Family("parley_pushes_total", "Pushes (push API, room broadcasts, from this or another node) offered to sessions on this node, by outcome: taken into the session's queue, or refused because its queue was backed up (the session stays connected).", "counter", []metrics.Sample{
		{Labels: []metrics.Label{{Name: "outcome", Value: "taken"}}, Value: float64(gs.PushTaken)},
		{Labels: []metrics.Label{{Name: "outcome", Value: "refused"}}, Value: float64(gs.PushRefused)},
	})
	w.Counter("parley_slow_consumer_disconnects_total", "Connections closed as slow (queue cap or write timeout).", float64(gs.SlowClosed))
	w.Family("parley_rate_limited_total", "Requests refused by a rate limit, by limit.", "counter", []metrics.Sample{
		{Labels: []metrics.Label{{Name: "limit", Value: "user"}}, Value: float64(cs.RateLimited)},
		{Labels: []metrics.Label{{Name: "limit", Value: "ip_connections"}}, Value: float64(gs.RateLimited)},
		{Labels: []metrics.Label{{Name: "limit", Value: "api_key"}}, Value: float64(s.api.RateLimited())},
		{Labels: []metrics.Label{{Name: "limit", Value: "user_sessions"}}, Value: float64(cs.SessionsRefused)},
	})
	w.Counter("parley_cursor_beyond_last_total", "Syncs from a cursor past the conversation's newest stored seq: stored messages were lost (see the error log); the next seq was raised past the cursor.", float64(cs.CursorsAhead))
	w.Counter("parley_reads_refused_total", "Page reads refused with TOO_MANY_REQUESTS: read_memory_bytes was taken.", float64(cs.ReadsRefused))
	w.Counter("parley_quota_refused_total", "Sends refused because the sender's storage quota (user_storage_quota_bytes) is used up.", float64(cs.QuotaRefused))
	w.Counter("parley_reactions_total", "Reactions stored (or found already in the state asked for).", float64(cs.Reactions))
	w.Gauge("parley_streams_open", "Streamed messages being written on this node (max_streams bounds them).", float64(cs.StreamsOpen))
	w.Counter("parley_searches_total", "Message searches answered.", float64(cs.Searches))
	w.Counter("parley_searches_refused_total", "Message searches refused with TOO_MANY_REQUESTS: every search slot of the node was busy.", float64(cs.SearchesRefused))
	w.Counter("parley_searches_queued_total", "Message searches that found every search slot of the node busy and waited in its queue for one.", float64(cs.SearchesQueued))
	if s.search != nil && s.search.follower != nil { // the embedded index (PostgreSQL has none)
		fs := s.search.follower.Stats()
		w.Gauge("parley_search_index_lag", "Messages stored but not yet in the search index (store log positions).", float64(s.search.lag(context.Background())))
		w.Counter("parley_search_indexed_total", "Store log entries applied to the search index.", float64(fs.Applied))
		w.Counter("parley_search_index_errors_total", "Failed steps of the search index's follower (each retried with back-off; see the log).", float64(fs.Errors))
	}
	w.Counter("parley_auth_failures_total", "Failed authentications on sockets.", float64(cs.AuthFailures))
	w.Counter("parley_sessions_kicked_total", "Sessions replaced by a newer login (kick policy).", float64(cs.SessionsKicked))
	w.Counter("parley_protocol_errors_total", "Connections refused for malformed, oversized or unknown frames.", float64(gs.ProtocolErrors))
	w.Counter("parley_handler_panics_total", "Handler panics recovered (each closed one connection).", float64(gs.Panics))
	w.Gauge("parley_webhook_queue", "Webhook events waiting to be sent.", float64(wh.Queued))
	w.Counter("parley_webhook_delivered_total", "Webhook events acknowledged by receivers.", float64(wh.Delivered))
	w.Counter("parley_webhook_dropped_total", "Webhook events dropped (queue full or retries exhausted).", float64(wh.Dropped))
	w.Counter("parley_webhook_failures_total", "Failed webhook requests (each retry counts).", float64(wh.Failures))
	writePushMetrics(w, s.notify.Stats())
	writeModerationMetrics(w, s.mod.Stats())
	if s.nats != nil {
		rs := s.nats.Stats()
		w.Gauge("parley_cluster_routes", "Other nodes the embedded NATS is routed to.", float64(s.nats.Routes()))
		w.Gauge("parley_cluster_interests", "NATS subjects this node subscribes to for its users, groups, rooms and presence subscribers.", float64(rs.Interests))
		w.Counter("parley_cluster_published_total", "Envelopes published to other nodes.", float64(rs.Published))
		w.Counter("parley_cluster_received_total", "Envelopes received from other nodes.", float64(rs.Received))
		w.Counter("parley_cluster_dropped_total", "Envelopes NATS dropped because this node fell behind (receivers catch up by sync).", float64(rs.Dropped))
		w.Counter("parley_cluster_malformed_total", "Envelopes from other nodes dropped as malformed (undecodable, or missing what their kind needs): a node running other code, or a corrupt link.", float64(rs.Malformed+cs.ClusterMalformed))
		w.Counter("parley_cluster_unsent_total", "Envelopes not published while NATS was unreachable (receivers catch up by sync).", float64(rs.Unsent))
	}
	if ps, ok := s.store.(*pebblestore.Store); ok {
		ds := ps.DiskStatus()
		w.Gauge("parley_store_disk_free_bytes", "Free space on the embedded store's volume as its free-space floor sees it: less a removed ballast file and room for running compactions.", float64(ds.FreeBytes))
		w.Gauge("parley_store_disk_floor_bytes", "Free space below which writes are refused: min_free_disk plus the room kept to flush memtables; 0: off.", float64(ds.FloorBytes+ds.ReserveBytes))
		writable := 0.0
		if ds.Writable {
			writable = 1
		}
		w.Gauge("parley_store_writable", "1 when the embedded store accepts writes, 0 while they are refused for disk space.", writable)
		w.Family("parley_store_writes_refused_total", "Storage writes refused, by reason (disk_full: below the floor or read-only for lack of space; write_failed: a write failed inside the store, which then reopened).", "counter", []metrics.Sample{
			{Labels: []metrics.Label{{Name: "reason", Value: "disk_full"}}, Value: float64(ds.Refused)},
			{Labels: []metrics.Label{{Name: "reason", Value: "write_failed"}}, Value: float64(ds.Failed)},
		})
	}
	w.Gauge("go_goroutines", "Goroutines.", float64(runtime.NumGoroutine()))
	w.Gauge("go_memstats_heap_alloc_bytes", "Heap bytes allocated and in use.", float64(ms.HeapAlloc))
	w.Gauge("go_memstats_sys_bytes", "Bytes obtained from the OS.", float64(ms.Sys))
	w.Gauge("process_start_time_seconds", "Start time of the process, unix seconds.", float64(s.started.Unix()))
	return w.Flush()
}

// adminStats are the live figures the admin page charts (GET /v1/admin/stats):
// counters are totals since start; the page derives rates and the ACK
// latency percentile from two consecutive samples.
type adminStats struct {
	Time           int64          `json:"time"` // unix ms
	Connections    int            `json:"connections"`
	ConnectionsWS  int            `json:"connections_ws"`
	ConnectionsTCP int            `json:"connections_tcp"`
	Sessions       int            `json:"sessions"`
	MessagesStored uint64         `json:"messages_stored"`
	Deliveries     uint64         `json:"deliveries"`
	SendsFailed    uint64         `json:"sends_failed"`
	RateLimited    uint64         `json:"rate_limited"`
	SlowClosed     uint64         `json:"slow_closed"`
	AckLatency     latencyBuckets `json:"ack_latency"`
	Goroutines     int            `json:"goroutines"`
	HeapBytes      uint64         `json:"heap_bytes"`
	WebhookQueued  int            `json:"webhook_queued"`
	WebhookDropped uint64         `json:"webhook_dropped"`
	Uptime         float64        `json:"uptime_seconds"`
}

type latencyBuckets struct {
	Bounds []float64 `json:"bounds"` // seconds; the last count is +Inf
	Counts []uint64  `json:"counts"`
}

func (s *Server) adminStats() any {
	gs, cs := s.gw.Stats(), s.chat.Stats()
	ack, _ := s.chat.Latencies()
	wh := s.hooks.Stats()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return adminStats{
		Time: time.Now().UnixMilli(), Connections: gs.Open, ConnectionsWS: gs.OpenWS, ConnectionsTCP: gs.OpenTCP,
		Sessions: s.chat.Sessions().Len(), MessagesStored: cs.SendsAccepted, Deliveries: cs.Deliveries,
		SendsFailed: cs.SendsFailed, RateLimited: cs.RateLimited + gs.RateLimited + s.api.RateLimited() + cs.SessionsRefused,
		SlowClosed: gs.SlowClosed, AckLatency: latencyBuckets{Bounds: ack.Bounds, Counts: ack.Counts},
		Goroutines: runtime.NumGoroutine(), HeapBytes: ms.HeapAlloc,
		WebhookQueued: wh.Queued, WebhookDropped: wh.Dropped, Uptime: time.Since(s.started).Seconds(),
	}
}

// writeModerationMetrics writes the hooks' and the word filter's figures.
func writeModerationMetrics(w *metrics.Writer, ms moderation.Stats) {
	var answers, failures, breaker, inFlight, canceled []metrics.Sample
	for _, h := range ms.Hooks.Hooks {
		hl := metrics.Label{Name: "hook", Value: h.Name}
		for _, a := range []struct {
			name string
			n    uint64
		}{{"allow", h.Allow}, {"reject", h.Reject}, {"replace", h.Replace}} {
			answers = append(answers, metrics.Sample{Labels: []metrics.Label{hl, {Name: "action", Value: a.name}}, Value: float64(a.n)})
		}
		for _, f := range []struct {
			name string
			n    uint64
		}{{"timeout", h.Timeout}, {"error", h.Error}, {"malformed", h.Malformed}, {"breaker_open", h.BreakerOpen}, {"no_slot", h.NoSlot}} {
			failures = append(failures, metrics.Sample{Labels: []metrics.Label{hl, {Name: "failure", Value: f.name}}, Value: float64(f.n)})
		}
		open := 0.0
		if h.Breaker != "closed" {
			open = 1
		}
		breaker = append(breaker, metrics.Sample{Labels: []metrics.Label{hl}, Value: open})
		inFlight = append(inFlight, metrics.Sample{Labels: []metrics.Label{hl}, Value: float64(h.InFlight)})
		canceled = append(canceled, metrics.Sample{Labels: []metrics.Label{hl}, Value: float64(h.Canceled)})
	}
	if len(ms.Hooks.Hooks) > 0 {
		w.Family("parley_moderation_hook_answers_total", "Decisions a before-send hook answered, by hook and action.", "counter", answers)
		w.Family("parley_moderation_hook_failures_total", "Calls of a before-send hook its policy decided instead (fail_open or fail_closed), by hook and failure.", "counter", failures)
		w.Family("parley_moderation_hook_breaker_open", "1 while a hook's circuit breaker is open or half-open (its policy decides without calling it).", "gauge", breaker)
		w.Family("parley_moderation_hook_in_flight", "Requests in flight to a hook.", "gauge", inFlight)
		w.Family("parley_moderation_hook_canceled_total", "Hook calls the sender gave up on first (the client went away).", "counter", canceled)
		w.Counter("parley_moderation_decisions_reused_total", "Retried sends answered with the decision of their first attempt (the hooks not asked again).", float64(ms.Cache.Hits+ms.Cache.Shared))
	}
	w.Gauge("parley_word_filter_entries", "Entries of the word filter in use (configuration and admin API lists).", float64(ms.FilterWords))
	w.Family("parley_word_filter_total", "Text payloads the word filter read, by outcome.", "counter", []metrics.Sample{
		{Labels: []metrics.Label{{Name: "outcome", Value: "pass"}}, Value: float64(ms.Filtered - ms.Masked - ms.Rejected)},
		{Labels: []metrics.Label{{Name: "outcome", Value: "masked"}}, Value: float64(ms.Masked)},
		{Labels: []metrics.Label{{Name: "outcome", Value: "rejected"}}, Value: float64(ms.Rejected)},
	})
	w.Counter("parley_word_filter_reload_failures_total", "Failed reloads of the word filter's lists (the lists in use stayed).", float64(ms.ReloadFailures))
}

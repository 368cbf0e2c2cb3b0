package bench

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// checkReactions asserts a reactions run: every reaction acked, the final
// counts as the members' own reactions add up, every view holding them.
func checkReactions(t *testing.T, rep *Report, members uint64) {
	t.Helper()
	x := rep.Reactions
	if x == nil {
		t.Fatal("no reactions section")
	}
	if rep.Requests == 0 || rep.OK != rep.Requests || rep.Latency.Count() != rep.OK {
		t.Errorf("requests %d ok %d latencies %d", rep.Requests, rep.OK, rep.Latency.Count())
	}
	var exp, got uint64
	for _, v := range x.Expected {
		exp += v
	}
	for _, v := range x.Read {
		got += v
	}
	if x.Members != members || x.Lost != 0 || x.Extra != 0 || x.ViewsMismatched != 0 || x.OwnMismatched != 0 ||
		x.Unsettled != 0 || !x.HistoryAgrees || x.ReadVersionsDiffer || exp != got || x.ReadVersion == 0 {
		t.Errorf("reactions %+v", x)
	}
	// Every member holds at most one emoji per stream at a time: some do
	// at the end (the last request of a stream is an add half the time).
	if got == 0 || got > members*uint64(rep.Config.Pipeline) {
		t.Errorf("final total %d for %d members", got, members)
	}
	// The counts reach everyone coalesced: far fewer updates than reactions × members.
	if x.Updates == 0 || x.Updates >= rep.OK*members {
		t.Errorf("%d live updates for %d reactions to %d members", x.Updates, rep.OK, members)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	for _, s := range []string{"Reactions (one message", "Lost in the final counts:\t0", "Reliability: PASS"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, text.String())
		}
	}
}

// reactions: 40 members react at 1,000/s in all for 1.5 s, two requests
// in flight each; then -c 3,000 split over two processes.
func TestReactions(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "reactions")
	cfg.Members, cfg.Pipeline, cfg.Rate, cfg.Duration = 40, 2, 1000, 1500*time.Millisecond
	rep := run(t, cfg, Options{})
	checkReactions(t, rep, 40)
	// Paced: never more than 1,000/s for 1.5 s (plus a little for the
	// last tick). How far below a loaded machine falls is a timing, not
	// asserted.
	if rep.OK == 0 || rep.OK > 1650 {
		t.Errorf("%d reactions at 1,000/s for 1.5 s", rep.OK)
	}
	if rep.Config.Plan == nil || rep.Config.Plan.Groups[0].Seq == 0 || rep.Config.Plan.Groups[0].Members != 41 {
		t.Errorf("plan %+v", rep.Config.Plan)
	}

	cfg.Prefix, cfg.Count, cfg.Duration, cfg.Rate, cfg.Pipeline = "", 3000, 0, 0, 1
	rep = run(t, cfg, Options{Procs: 2, WorkerCommand: []string{os.Args[0], "bench-worker"}})
	if rep.Processes != 2 || rep.Requests != 3000 {
		t.Errorf("processes %d requests %d", rep.Processes, rep.Requests)
	}
	checkReactions(t, rep, 40)
}

// The reactions checks fail when the counts, a view or a member's own
// reactions are off.
func TestReactionsReportFails(t *testing.T) {
	for name, mod := range map[string]func(x *ReactionsReport){
		"lost":    func(x *ReactionsReport) { x.Read["👍"] = 2 },
		"extra":   func(x *ReactionsReport) { x.Read["🎉"] = 1 },
		"view":    func(x *ReactionsReport) { x.ViewsMismatched = 1 },
		"own":     func(x *ReactionsReport) { x.OwnMismatched = 1 },
		"history": func(x *ReactionsReport) { x.HistoryAgrees = false },
	} {
		x := &ReactionsReport{Members: 5, Emojis: []string{"👍"}, Expected: map[string]uint64{"👍": 3}, Read: map[string]uint64{"👍": 3}, HistoryAgrees: true}
		r := &Report{Reactions: x, Latency: NewHistogram(), Status: map[string]uint64{}}
		r.finalize()
		if !r.Passed {
			t.Fatalf("%s: the unchanged report failed: %v", name, r.Failures)
		}
		mod(x)
		r.finalize()
		if r.Passed {
			t.Errorf("%s: passed", name)
		}
	}
	// Merging two processes that read different versions fails.
	a := &ReactionsReport{Expected: map[string]uint64{"👍": 1}, Read: map[string]uint64{"👍": 2}, ReadVersion: 7, HistoryAgrees: true}
	a.merge(&ReactionsReport{Expected: map[string]uint64{"👍": 1}, Read: map[string]uint64{"👍": 2}, ReadVersion: 9, HistoryAgrees: true})
	r := &Report{Reactions: a, Latency: NewHistogram(), Status: map[string]uint64{}}
	r.finalize()
	if r.Passed || !a.ReadVersionsDiffer || a.ReadVersion != 9 {
		t.Errorf("merge of two read versions: %+v, failures %v", a, r.Failures)
	}
	// A view is off on its version or on any count.
	m := &reactor{}
	rd := reactionRead{counts: map[string]uint64{"👍": 2}, version: 5}
	m.view.Apply(&pb.ReactionUpdate{ConversationId: "g", Seq: 1, Version: 5, Reactions: []*pb.Reaction{{Emoji: "👍", Count: 2}}})
	if !viewMatches(m, "g", 1, rd) {
		t.Error("a matching view does not match")
	}
	m.view.Apply(&pb.ReactionUpdate{ConversationId: "g", Seq: 1, Version: 6, Reactions: []*pb.Reaction{{Emoji: "👍", Count: 2}, {Emoji: "🎉", Count: 1}}})
	if viewMatches(m, "g", 1, rd) {
		t.Error("a newer view with another emoji matches")
	}
}

// checkStream asserts a stream run: every chunk delivered once, in order,
// to every member; every finished message received once and stored once,
// with the whole text.
func checkStream(t *testing.T, rep *Report, bots, members uint64) {
	t.Helper()
	d, x := rep.Delivery, rep.Stream
	if d == nil || x == nil {
		t.Fatal("no delivery or stream section")
	}
	if d.Acked == 0 || d.Sent != d.Acked || rep.OK != d.Acked || d.Expected != d.Acked*members || d.Received != d.Expected ||
		d.Lost != 0 || d.Duplicated != 0 || d.OutOfOrder != 0 || d.E2E.Count() != d.Received || d.Receivers != bots*members || d.ReceiversFailed != 0 {
		t.Errorf("delivery %+v", d)
	}
	if x.Bots != bots || x.Receivers != bots*members || x.Messages < bots || x.FinishFailed != 0 ||
		x.FinalsExpected != x.Messages*members || x.FinalsReceived != x.FinalsExpected || x.FinalsMissing+x.FinalsDuplicated+x.FinalsWrongText+x.LiveTextMismatched != 0 ||
		x.Stored != x.Messages || x.StoredMissing+x.StoredDuplicated+x.StoredWrongText != 0 || x.FinishLatency.Count() != x.Messages {
		t.Errorf("stream %+v", x)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	for _, s := range []string{"Streamed messages:", "Stored (history):", "End-to-end latency", "Reliability: PASS"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, text.String())
		}
	}
}

// stream: 3 bots at 100 chunks/s, messages of 20 chunks, 5 members each,
// for 1.5 s; then 4 bots over two processes, JSON over WebSocket.
func TestStream(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "stream")
	cfg.Concurrency, cfg.Members, cfg.Rate, cfg.Chunks, cfg.Duration = 3, 5, 100, 20, 1500*time.Millisecond
	rep := run(t, cfg, Options{})
	checkStream(t, rep, 3, 5)
	// Paced: never more than about 450 chunks (22 messages); how far below
	// a loaded machine falls is a timing, not asserted.
	if rep.OK == 0 || rep.OK > 480 || rep.Stream.Messages == 0 {
		t.Errorf("%d chunks, %d messages", rep.OK, rep.Stream.Messages)
	}

	cfg.Prefix, cfg.Concurrency, cfg.Codec, cfg.Count, cfg.Duration = "", 4, "json", 200, 0
	rep = run(t, cfg, Options{Procs: 2, WorkerCommand: []string{os.Args[0], "bench-worker"}})
	if rep.Processes != 2 || rep.OK != 200 {
		t.Errorf("processes %d, %d chunks", rep.Processes, rep.OK)
	}
	checkStream(t, rep, 4, 5)
}

func TestStreamChunks(t *testing.T) {
	b := make([]byte, 40)
	at := time.Unix(1700000000, 123456789)
	makeChunk(b, at, 12345)
	ns, k, ok := parseChunk(b)
	if !ok || ns != at.UnixNano() || k != 12345 {
		t.Fatalf("parse: %d %d %v (%q)", ns, k, ok, b)
	}
	var msg []byte
	for k := range 3 {
		makeChunk(b, at, k)
		msg = append(msg, b...)
	}
	if !wellFormed(msg, 40) || wellFormed(msg[:len(msg)-1], 40) || wellFormed(append(msg[40:80:80], msg[:40]...), 40) {
		t.Error("wellFormed is wrong")
	}
	// The fast path reads what the full decoder reads, and only chunks.
	f := &pb.ServerFrame{Body: &pb.ServerFrame_StreamChunk{StreamChunk: &pb.StreamChunk{StreamId: "n-1", ConversationId: "g:x", From: "bot", Offset: 80, Text: string(b), ContentType: "text/plain"}}}
	p, err := proto.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	var c streamChunk
	if !parseStreamChunk(p, &c) || string(c.id) != "n-1" || c.offset != 80 || !bytes.Equal(c.text, b) {
		t.Errorf("parsed %q %d %q", c.id, c.offset, c.text)
	}
	p, _ = wire.EncodeServer(wire.Proto, &pb.ServerFrame{Body: &pb.ServerFrame_Message{Message: &pb.Message{ConversationId: "g:x", StreamId: "n-1"}}})
	if parseStreamChunk(p, &c) {
		t.Error("a message parsed as a chunk")
	}
	// A receiver counts a repeated chunk as a duplicate and a gap as out of order.
	s, e, r := &streamScenario{}, newEnv(Config{}), &srecv{tracks: map[string]*chunkTrack{}}
	makeChunk(b, time.Now(), 0)
	s.chunk(e, r, []byte("n-1"), 0, b, time.Now())
	s.chunk(e, r, []byte("n-1"), 0, b, time.Now())
	s.chunk(e, r, []byte("n-1"), 80, b, time.Now())
	if tr := r.tracks["n-1"]; tr.received != 2 || tr.dup != 1 || tr.ooo != 1 || tr.inOrder || e.M.E2E.Count() != 2 {
		t.Errorf("track %+v, latencies %d", tr, e.M.E2E.Count())
	}
}

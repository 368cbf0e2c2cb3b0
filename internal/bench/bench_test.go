package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// TestMain lets the test binary act as a --procs worker: the coordinator
// re-executes it with "bench-worker" as its first argument.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "bench-worker" {
		if err := ServeWorker(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error() + "\n")
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

const testKey = "bench-test-admin-key-0123456789"

// startServer starts a real server on loopback ports in a temp dir and
// returns a config pointing at it.
func startServer(t *testing.T, scenario string) Config {
	t.Helper()
	srv, err := server.New(server.Config{
		DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0",
		AdminAPIKeys: []string{testKey},
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	cfg := DefaultConfig(scenario)
	cfg.HTTPBase, cfg.WSAddr, cfg.TCPAddr, err = Addrs(srv.HTTPAddr(), srv.TCPAddr())
	if err != nil {
		t.Fatal(err)
	}
	cfg.APIKey = testKey
	cfg.Timeout = 30 * time.Second // every run here ends by itself well before
	cfg.Drain = 5 * time.Second
	return cfg
}

// run runs cfg and checks what every report must hold.
func run(t *testing.T, cfg Config, o Options) *Report {
	t.Helper()
	var progress bytes.Buffer
	o.Progress = &progress
	o.ServerPID = os.Getpid()
	o.ServerSharesProcess = true
	rep, err := Run(context.Background(), cfg, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if !rep.Passed {
		t.Fatalf("failed: %v", rep.Failures)
	}
	if rep.Server == nil || rep.Server.PID != os.Getpid() || rep.Server.RSSPeak == 0 {
		t.Errorf("server usage %+v", rep.Server)
	}
	if !strings.Contains(progress.String(), "conn ") {
		t.Errorf("no progress lines: %q", progress.String())
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"Summary: " + requestLatencyLabel(rep.Scenario) + "\n  Run time:\t", "Requests/sec:", "Response time histogram:", "Latency distribution:\n  10% in ", "99.9% in ", "Answers by code:\n  [ok]\t"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("text report lacks %q:\n%s", s, text.String())
		}
	}
	var page bytes.Buffer
	if err := rep.WriteHTML(&page); err != nil || !strings.Contains(page.String(), "<canvas") && !strings.Contains(page.String(), "createElement('canvas')") {
		t.Errorf("html: %v", err)
	}
	if strings.Contains(page.String(), "http://") && strings.Contains(page.String(), "<script src") {
		t.Error("the HTML page loads something from the network")
	}
	checkJSON(t, rep)
	return rep
}

// checkJSON checks the stable field names, and that the report survives
// the round trip workers use.
func checkJSON(t *testing.T, rep *Report) {
	t.Helper()
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"scenario", "config", "started_at", "processes", "total_seconds", "requests", "ok",
		"requests_per_sec", "latency", "latency_summary", "status", "series", "passed", "server"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q", k)
		}
	}
	if cfg := m["config"].(map[string]any); cfg["api_key"] != "" {
		t.Error("the API key is in the report")
	}
	if d, ok := m["delivery"].(map[string]any); ok {
		for _, k := range []string{"sent", "acked", "sends_per_sec", "expected", "received", "lost", "duplicated",
			"out_of_order", "deliveries_per_sec", "e2e_latency", "e2e_summary"} {
			if _, ok := d[k]; !ok {
				t.Errorf("JSON delivery lacks %q", k)
			}
		}
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Latency.Count() != rep.Latency.Count() || back.LatencySummary.Percentiles[7] != rep.LatencySummary.Percentiles[7] {
		t.Error("the JSON round trip changed the latency")
	}
}

// checkDelivery asserts a message run delivered everything it should.
func checkDelivery(t *testing.T, rep *Report, requests, expected uint64) {
	t.Helper()
	d := rep.Delivery
	if rep.Requests != requests || rep.OK != requests || rep.Status["ok"] != requests {
		t.Errorf("requests %d ok %d status %v, want %d", rep.Requests, rep.OK, rep.Status, requests)
	}
	if d == nil {
		t.Fatal("no delivery section")
	}
	if d.Sent != requests || d.Acked != requests || d.Expected != expected || d.Received != expected ||
		d.Lost != 0 || d.Duplicated != 0 || d.OutOfOrder != 0 || d.AckOutOfOrder != 0 {
		t.Errorf("delivery %+v, want %d sent and %d received", d, requests, expected)
	}
	if d.E2E.Count() != expected || d.DeliveriesPerSec <= 0 || d.SendsPerSec <= 0 {
		t.Errorf("e2e count %d, rates %v/%v", d.E2E.Count(), d.SendsPerSec, d.DeliveriesPerSec)
	}
}

func TestLogin(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "login")
	cfg.Count, cfg.Concurrency = 300, 10
	rep := run(t, cfg, Options{})
	if rep.Requests != 300 || rep.OK != 300 || rep.Latency.Count() != 300 || rep.RequestsPerSec <= 0 {
		t.Errorf("requests %d ok %d latencies %d", rep.Requests, rep.OK, rep.Latency.Count())
	}
}

func TestUserOverTCP(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "user")
	cfg.Count, cfg.Concurrency, cfg.Transport = 400, 8, "tcp"
	checkDelivery(t, run(t, cfg, Options{}), 400, 400)
}

func TestUserHalfOnlineJSONCodec(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "user")
	cfg.Count, cfg.Concurrency, cfg.Online, cfg.Codec = 400, 4, 0.5, "json"
	rep := run(t, cfg, Options{})
	// 4 pairs, 2 receivers online; each sender takes from one budget, so
	// the online share of sends is not exactly half: check the sums.
	d := rep.Delivery
	if rep.Requests != 400 || d.Acked != 400 || d.Expected == 0 || d.Expected >= 400 || d.Received != d.Expected || d.Lost != 0 {
		t.Errorf("delivery %+v", d)
	}
}

// push: every push answered 200 reaches its receiver once, in order; the
// load split over two worker processes merges into one report.
func TestPush(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "push")
	cfg.Count, cfg.Concurrency = 600, 6
	checkDelivery(t, run(t, cfg, Options{}), 600, 600)
	cfg.Prefix = ""
	rep := run(t, cfg, Options{Procs: 2, WorkerCommand: []string{os.Args[0], "bench-worker"}})
	checkDelivery(t, rep, 600, 600)
	if rep.Processes != 2 {
		t.Errorf("processes %d, want 2", rep.Processes)
	}
}

func TestOrder(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "order")
	cfg.Count, cfg.Window = 500, 32
	checkDelivery(t, run(t, cfg, Options{}), 500, 500)
}

func TestConns(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "conns")
	cfg.Count, cfg.Concurrency, cfg.Hold = 200, 20, 1500*time.Millisecond
	cfg.SourceIPs = []string{"127.0.0.1", "127.0.0.2"} // loopback answers on all of 127/8
	rep := run(t, cfg, Options{})
	c := rep.Conns
	if c == nil || c.Target != 200 || c.Held != 200 || rep.OK != 200 {
		t.Fatalf("conns %+v ok %d", c, rep.OK)
	}
	if c.ServerRSSBaseline == 0 || c.ServerRSSHeld == 0 {
		t.Errorf("no RSS figures: %+v", c)
	}
}

func TestSoak(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "soak")
	cfg.Concurrency, cfg.Rate, cfg.Duration = 5, 50, 2*time.Second
	rep := run(t, cfg, Options{})
	d := rep.Delivery
	// 10 senders at 50/s for 2 s: about 1,000 sends, all delivered.
	if d.Acked < 500 || d.Acked > 1100 || d.Expected != d.Acked || d.Received != d.Acked {
		t.Errorf("delivery %+v", d)
	}
	if len(rep.Series) < 2 || rep.TotalSeconds < 1.9 || rep.TotalSeconds > 5 {
		t.Errorf("series %d samples, total %.2f s", len(rep.Series), rep.TotalSeconds)
	}
}

func TestProcsMerge(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "user")
	cfg.Count, cfg.Concurrency = 300, 6
	rep := run(t, cfg, Options{Procs: 2, WorkerCommand: []string{os.Args[0], "bench-worker"}})
	if rep.Processes != 2 {
		t.Errorf("processes %d", rep.Processes)
	}
	checkDelivery(t, rep, 300, 300)
}

func TestRemoteWorkers(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ServeWorkers(ctx, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	cfg := startServer(t, "login")
	cfg.Count, cfg.Concurrency = 301, 4
	addr := ln.Addr().String()
	rep := run(t, cfg, Options{Workers: []string{addr, addr}})
	if rep.Processes != 2 || rep.Requests != 301 || rep.OK != 301 {
		t.Errorf("processes %d requests %d ok %d", rep.Processes, rep.Requests, rep.OK)
	}
}

func TestBoundedByDuration(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "user")
	cfg.Count, cfg.Concurrency, cfg.Duration = 0, 2, 700*time.Millisecond
	t0 := time.Now()
	rep := run(t, cfg, Options{})
	if el := time.Since(t0); el > 10*time.Second {
		t.Errorf("a 0.7 s run took %v", el)
	}
	if rep.Requests == 0 || rep.Delivery.Lost != 0 {
		t.Errorf("requests %d delivery %+v", rep.Requests, rep.Delivery)
	}
}

// checkGroupDelivery asserts a conversation run: every acked send reached
// every online member but its sender, once, in order, at rcv receivers.
func checkGroupDelivery(t *testing.T, rep *Report, sends, perSend, rcv uint64) {
	t.Helper()
	checkDelivery(t, rep, sends, sends*perSend)
	if d := rep.Delivery; d.Receivers != rcv || d.ReceiversFailed != 0 || d.EndsMissing != 0 {
		t.Errorf("receivers %d (failed %d), end markers missing %d; want %d receivers", d.Receivers, d.ReceiversFailed, d.EndsMissing, rcv)
	}
}

func TestGroup(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "group")
	// 4 groups of 5 members, 3 online: the sender and 2 receivers each.
	cfg.Count, cfg.Concurrency, cfg.Members, cfg.Online = 300, 4, 5, 0.6
	checkGroupDelivery(t, run(t, cfg, Options{}), 300, 2, 8)
}

func TestGroupPipelineOverTCP(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "group")
	cfg.Count, cfg.Concurrency, cfg.Members, cfg.Online, cfg.Pipeline, cfg.Transport = 400, 2, 1200, 0.004, 4, "tcp"
	// 1,200 members (CreateGroup, then AddMembers past 1,000), 5 online.
	checkGroupDelivery(t, run(t, cfg, Options{}), 400, 4, 8)
}

func TestSendRate(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "send-rate")
	// 5 groups of 10, one receiver online each, at 1,000 msg/s: ~0.4 s.
	cfg.Count, cfg.Groups, cfg.Members, cfg.Rate = 400, 5, 10, 1000
	rep := run(t, cfg, Options{})
	checkGroupDelivery(t, rep, 400, 1, 5)
	if rep.TotalSeconds < 0.3 {
		t.Errorf("400 sends at 1,000/s took %.2f s", rep.TotalSeconds)
	}
}

func TestFanoutProcs(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "fanout")
	// One group of 200, 100 receivers over 2 processes, 3 senders (2 in
	// one process, 1 in the other), each also receiving the other two.
	cfg.Count, cfg.Concurrency, cfg.Pipeline, cfg.Members, cfg.OnlineMembers, cfg.Codec = 300, 3, 2, 200, 100, "json"
	rep := run(t, cfg, Options{Procs: 2, WorkerCommand: []string{os.Args[0], "bench-worker"}})
	if rep.Processes != 2 {
		t.Errorf("processes %d", rep.Processes)
	}
	// Each message reaches the 100 receivers and the 2 other senders.
	checkGroupDelivery(t, rep, 300, 102, 103)
	if rep.Config.Plan == nil || len(rep.Config.Plan.Groups) != 1 {
		t.Errorf("plan %+v", rep.Config.Plan)
	}
}

func TestFanoutSenderWithoutBudget(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "fanout")
	// -c 1 over 2 senders in 2 processes: one sender sends nothing, but
	// still ends its stream, so every receiver settles.
	cfg.Count, cfg.Concurrency, cfg.Pipeline, cfg.Members, cfg.OnlineMembers = 1, 2, 1, 20, 4
	rep := run(t, cfg, Options{Procs: 2, WorkerCommand: []string{os.Args[0], "bench-worker"}})
	checkGroupDelivery(t, rep, 1, 5, 6)
}

func TestMixed(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "mixed")
	cfg.Count, cfg.Duration = 0, 1500*time.Millisecond
	cfg.Pairs, cfg.Groups, cfg.GroupSize, cfg.GroupOnline = 20, 5, 10, 1
	cfg.Members, cfg.OnlineMembers, cfg.Concurrency = 2000, 150, 1
	cfg.Rate, cfg.GroupRate, cfg.BigRate = 20, 40, 20
	rep := run(t, cfg, Options{})
	d := rep.Delivery
	if !rep.Passed || d.Lost != 0 || d.Received != d.Expected || d.Receivers != 20+5+150 || d.EndsMissing != 0 {
		t.Fatalf("delivery %+v", d)
	}
	want := map[string]uint64{"1:1": 1, "groups": 1, "big group": 150} // receivers per send
	var acked, expected uint64
	for _, p := range rep.Parts {
		per, ok := want[p.Name]
		if !ok || p.Delivery.Acked == 0 || p.Delivery.Expected != per*p.Delivery.Acked || p.Delivery.Received != p.Delivery.Expected || p.OK != p.Requests {
			t.Errorf("part %s: %+v", p.Name, p.Delivery)
		}
		delete(want, p.Name)
		acked += p.Delivery.Acked
		expected += p.Delivery.Expected
	}
	if len(want) != 0 || acked != d.Acked || expected != d.Expected {
		t.Errorf("parts missing %v, or not summing to the totals", want)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	if !strings.Contains(text.String(), "Parts:") || !strings.Contains(text.String(), "big group\t") {
		t.Errorf("no parts in the text report:\n%s", text.String())
	}
}

func TestGroupCheckAccounts(t *testing.T) {
	// A receiver's account of one stream: gaps, late arrivals, duplicates,
	// and a send that timed out but was stored.
	e := newEnv(Config{})
	var ends atomic.Int64
	c := newConv("g:x", "", nil, []string{"s", "r"}, 1, 0)
	rx := newRx(c, "r", &ends)
	if rx.wantEnds() != 1 {
		t.Fatalf("want ends %d", rx.wantEnds())
	}
	msg := func(k, seq uint64) {
		rx.handle(e, []byte("g:x"), []byte("s"), makePayload(nil, 32, 0, k), seq, pb.MessageKind_MESSAGE_KIND_NORMAL, time.Now())
	}
	msg(1, 10)
	msg(3, 12) // 2 is late
	msg(2, 11) // out of order
	msg(3, 12) // duplicate
	msg(5, 14) // 4 never comes; 5 timed out at the sender but was stored
	rx.handle(e, []byte("g:x"), []byte("s"), makeEnd(0, &streamEnd{last: 6, failed: []uint64{5}}), 16, pb.MessageKind_MESSAGE_KIND_NORMAL, time.Now())
	rx.handle(e, []byte("g:x"), []byte("r"), makePayload(nil, 32, 1, 1), 17, pb.MessageKind_MESSAGE_KIND_NORMAL, time.Now()) // own stream: echo
	var d Delivery
	rx.settle(&d)
	// Acked: 1, 2, 3, 4, 6. Received: 1, 2, 3, 5.
	want := Delivery{Expected: 5, Received: 4, ReceivedUnacked: 1, Lost: 2, Duplicated: 2, OutOfOrder: 1, Receivers: 1, ReceiversFailed: 1}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("got %+v\nwant %+v", d, want)
	}
	if ends.Load() != 1 {
		t.Errorf("ends %d", ends.Load())
	}
}

func TestConfigErrors(t *testing.T) {
	cfg := DefaultConfig("user")
	cfg.HTTPBase, cfg.APIKey = "http://127.0.0.1:1", "k"
	for name, mod := range map[string]func(*Config){
		"unbounded":   func(c *Config) { c.Count, c.Duration = 0, 0 },
		"json on tcp": func(c *Config) { c.Transport, c.Codec = "tcp", "json" },
		"scenario":    func(c *Config) { c.Scenario = "nope" },
		"fanout -m":   func(c *Config) { c.Scenario, c.Members, c.OnlineMembers = "fanout", 10, 10 },
		"group -m":    func(c *Config) { c.Scenario, c.Members = "group", 1 },
		"online":      func(c *Config) { c.Online = 2 },
		"size":        func(c *Config) { c.Size = 3 },
	} {
		c := cfg
		mod(&c)
		if _, err := Run(context.Background(), c, Options{}); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c := DefaultConfig("order")
	c.HTTPBase, c.APIKey = cfg.HTTPBase, "k"
	if _, err := Run(context.Background(), c, Options{Procs: 2}); err == nil {
		t.Error("order split over processes")
	}
}

func TestAddrs(t *testing.T) {
	h, w, tcp, err := Addrs("ws://10.0.0.1:8080/ws", "")
	if err != nil || h != "http://10.0.0.1:8080" || w != "ws://10.0.0.1:8080/ws" || tcp != "tcp://10.0.0.1:7070" {
		t.Fatalf("%q %q %q %v", h, w, tcp, err)
	}
	if _, _, _, err := Addrs("nohost", ""); err == nil {
		t.Fatal("accepted an address without a port")
	}
}

// A cluster's nodes: -a and --tcp lists; connections go to each node in turn.
func TestClusterAddrs(t *testing.T) {
	h, w, tcp, wsAll, tcpAll, err := ClusterAddrs("127.0.0.1:8081,127.0.0.1:8082", "127.0.0.1:7071,127.0.0.1:7072")
	if err != nil || h != "http://127.0.0.1:8081" || w != "ws://127.0.0.1:8081/ws" || tcp != "tcp://127.0.0.1:7071" ||
		len(wsAll) != 2 || tcpAll[1] != "tcp://127.0.0.1:7072" {
		t.Fatalf("%q %q %q %q %q %v", h, w, tcp, wsAll, tcpAll, err)
	}
	e := &Env{Cfg: Config{WSAddr: w, TCPAddr: tcp, WSAddrs: wsAll, TCPAddrs: tcpAll}}
	var got []string
	for range 4 {
		ws, _ := e.nodeAddrs()
		got = append(got, ws)
	}
	if got[0] != wsAll[0] || got[1] != wsAll[1] || got[2] != wsAll[0] || got[3] != wsAll[1] {
		t.Fatalf("connections went to %q", got)
	}
	if _, _, _, _, _, err := ClusterAddrs("127.0.0.1:8081,127.0.0.1:8082", "127.0.0.1:7071"); err == nil {
		t.Fatal("accepted two nodes with one TCP address")
	}
	if _, _, _, wsAll, _, _ := ClusterAddrs("127.0.0.1:8081", ""); wsAll != nil {
		t.Fatal("a single server is not a cluster")
	}
}

func TestListenerPID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	pid, err := ListenerPID(ln.Addr().(*net.TCPAddr).Port)
	if err != nil || pid != os.Getpid() {
		t.Fatalf("pid %d, %v; want %d", pid, err, os.Getpid())
	}
}

// startPushServer starts a server that sends FCM notifications to a push
// stand-in, as push-offline's users configure theirs (push_ca_file and the
// stand-in's credentials file).
func startPushServer(t *testing.T) Config {
	t.Helper()
	p, err := StartPushProvider(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	srv, err := server.New(server.Config{
		DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0",
		AdminAPIKeys: []string{testKey}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		FCMCredentialsFile: p.CredentialsFile(), FCMEndpoint: p.Endpoint(), PushCAFile: p.CAFile(),
		PushDelay: 300 * time.Millisecond, PushCoalesce: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	cfg := DefaultConfig("push-offline")
	cfg.HTTPBase, cfg.WSAddr, cfg.TCPAddr, err = Addrs(srv.HTTPAddr(), srv.TCPAddr())
	if err != nil {
		t.Fatal(err)
	}
	cfg.APIKey, cfg.Provider = testKey, p
	cfg.Timeout, cfg.Drain = 60*time.Second, 5*time.Second
	return cfg
}

// TestPushOffline: every offline member of every group is notified of every
// message (several sent at once coalesce), through the stand-in; and the
// check fails when a device is not.
func TestPushOffline(t *testing.T) {
	t.Parallel()
	cfg := startPushServer(t)
	cfg.Count, cfg.Concurrency, cfg.Members = 9, 3, 20
	rep := run(t, cfg, Options{})
	p := rep.Push
	if p == nil || p.Devices != 57 || p.Messages != 9 || p.Notifications < 57 || p.DevicesNotCovered != 0 ||
		p.Duplicated != 0 || len(p.Violations) != 0 || p.Latency.Count() == 0 || p.NotificationsPerSec <= 0 {
		t.Fatalf("push report %+v", p)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil || !strings.Contains(text.String(), "Notifications/sec:") {
		t.Errorf("text report lacks the push section: %v\n%s", err, text.String())
	}

	// The platform says one member's device is gone: the server removes its
	// target and that member is never notified.
	cfg.Prefix, cfg.Count, cfg.Concurrency, cfg.Members = "gone-", 2, 1, 5
	cfg.Drain = 2 * time.Second
	cfg.Provider.FCM.Answer(poToken(cfg.Prefix+"g0-m1"), 404, "UNREGISTERED", "")
	rep, err := Run(context.Background(), cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed || rep.Push.DevicesNotCovered != 1 || !strings.Contains(strings.Join(rep.Failures, ";"), "1 of 4 devices were not notified") {
		t.Fatalf("passed %v, failures %q, push %+v; want 1 of 4 devices not notified", rep.Passed, rep.Failures, rep.Push)
	}
}

// TestPushFloor: the floor sends every notification through the server's
// FCM client to the stand-in, each accepted and as FCM documents it; and a
// stand-in that refuses some is reported, not counted.
func TestPushFloor(t *testing.T) {
	t.Parallel()
	p, err := StartPushProvider(t.TempDir(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	r, err := PushFloor{Provider: p, Notifications: 300, Workers: 8}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Notifications != 300 || r.Failed != 0 || len(r.Violations) != 0 || r.PerSec <= 0 {
		t.Fatalf("floor report %+v", r)
	}
	p.FCM.Answer("bench-floor-7", 400, "INVALID_ARGUMENT:message.token", "")
	r, err = PushFloor{Provider: p, Notifications: 20, Workers: 4}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if r.Notifications != 19 || r.Failed != 1 {
		t.Fatalf("with one token refused: %d accepted, %d failed; want 19 and 1", r.Notifications, r.Failed)
	}
}

// TestMediaScenarios: upload (one request and resumable) counts every file
// in its user's usage; download gets the file's bytes back each time; user
// --attach delivers every message with its attachment.
func TestMediaScenarios(t *testing.T) {
	t.Parallel()
	for _, resumable := range []bool{false, true} {
		cfg := startServer(t, "upload")
		cfg.Count, cfg.Concurrency, cfg.FileSize, cfg.Resumable = 30, 3, 100_000, resumable
		rep := run(t, cfg, Options{})
		if m := rep.Media; m == nil || m.Files != 30 || m.Mismatched != 0 || m.MBPerSec <= 0 || rep.OK != 30 {
			t.Fatalf("upload (resumable %v): ok %d, media %+v", resumable, rep.OK, rep.Media)
		}
	}
	cfg := startServer(t, "download")
	cfg.Count, cfg.Concurrency, cfg.FileSize = 60, 3, 50_000
	rep := run(t, cfg, Options{})
	if m := rep.Media; m == nil || m.Files != 60 || rep.OK != 60 || m.MBPerSec <= 0 {
		t.Fatalf("download: ok %d, media %+v", rep.OK, rep.Media)
	}
	cfg = startServer(t, "user")
	cfg.Count, cfg.Concurrency, cfg.Attach = 200, 4, true
	checkDelivery(t, run(t, cfg, Options{}), 200, 200)
}

// TestKeyPackages: every claim gets a one-time package (Setup makes
// enough owners for -c), none twice.
func TestKeyPackages(t *testing.T) {
	t.Parallel()
	cfg := startServer(t, "keypackages")
	cfg.Count, cfg.Concurrency = 450, 4
	rep := run(t, cfg, Options{})
	if rep.Requests != 450 || rep.OK != 450 {
		t.Errorf("requests %d ok %d", rep.Requests, rep.OK)
	}
	if len(rep.Notes) == 0 || !strings.Contains(strings.Join(rep.Notes, " "), "450 one-time packages handed out, 0 last-resort") {
		t.Errorf("notes %v", rep.Notes)
	}
}

package bench

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Config is one benchmark run. The same struct travels as JSON to worker
// processes (each gets its share); field names are stable snake_case.
type Config struct {
	// Scenario is one of Scenarios().
	Scenario string `json:"scenario"`
	// Count is -c: requests (logins, sends, connections) in total; 0 means
	// no count limit (Duration must then bound the run).
	Count int `json:"count"`
	// Concurrency is -t: goroutines issuing requests (login), sender/receiver
	// pairs (user, soak) or dialing goroutines (conns).
	Concurrency int `json:"concurrency"`
	// Online is -p, the share of receivers that are online (user), 0..1.
	Online float64 `json:"online"`
	// Window is how many sends the order scenario keeps in flight.
	Window int `json:"window"`
	// Pipeline is how many sends each user/soak sender keeps in flight, each
	// as its own ordered stream (1: kimbench's one request at a time).
	Pipeline int `json:"pipeline"`
	// Rate is each soak sender's messages per second; in group, send-rate
	// and fanout the messages per second of all senders together; in mixed
	// each 1:1 pair's. 0: as fast as acks allow.
	Rate float64 `json:"rate"`
	// Members is -m: members per group (group, send-rate), or the big
	// group's size (fanout, mixed).
	Members int `json:"members,omitempty"`
	// Groups is --groups: the groups of send-rate, the 100-member groups of mixed.
	Groups int `json:"groups,omitempty"`
	// GroupSize is the size of mixed's small groups (--group-size).
	GroupSize int `json:"group_size,omitempty"`
	// GroupOnline is --group-online: receivers online per group in
	// send-rate and in mixed's small groups (the sender comes on top).
	GroupOnline int `json:"group_online,omitempty"`
	// OnlineMembers is --online: the big group's connected receivers
	// (fanout, mixed); its -t senders come on top.
	OnlineMembers int `json:"online_members,omitempty"`
	// Pairs is --pairs: mixed's 1:1 pairs.
	Pairs int `json:"pairs,omitempty"`
	// GroupRate and BigRate are mixed's messages per second per small group
	// and into the big group (0: as fast as acks allow).
	GroupRate float64 `json:"group_rate,omitempty"`
	BigRate   float64 `json:"big_rate,omitempty"`
	// Emojis is --emojis: how many emojis each member of reactions cycles
	// through (at most len(benchEmojis)).
	Emojis int `json:"emojis,omitempty"`
	// Chunks is --chunks: the chunks of each streamed message of stream
	// (the bot then finishes it and opens the next).
	Chunks int `json:"chunks,omitempty"`
	// Convs is --convs: search's 1:1 conversations (each sender talks to
	// Convs/-t of them, its peers).
	Convs int `json:"convs,omitempty"`
	// Searchers is --searchers: search's query phases, one after the other,
	// each with this many concurrent searchers (the senders' users, each on
	// its sender's connection), one query in flight each.
	Searchers []int `json:"searchers,omitempty"`
	// QueryDuration is how long each of search's query phases lasts (its
	// --duration; the load before them is bounded by -c).
	QueryDuration time.Duration `json:"query_duration_ns,omitempty"`
	// Seed seeds search's generated messages and queries: the same seed
	// gives the same texts, so a rare word's hits are known.
	Seed uint64 `json:"seed,omitempty"`
	// DataDir is the server's data directory when the bench knows it
	// (--data, --embedded): search reports the index's and the store's
	// size on disk.
	DataDir string `json:"data_dir,omitempty"`
	// Plan is the setup the coordinator did once for all processes (the
	// big group of fanout and mixed); nil for other scenarios.
	Plan *Plan `json:"plan,omitempty"`
	// Part and Parts say which share of the run this is (0 of 1 when the
	// run is not split); scenarios that split a shared setup use them.
	Part  int `json:"part"`
	Parts int `json:"parts"`
	// Idle marks a share with nothing to do (more processes than work).
	Idle bool `json:"idle,omitempty"`
	// SendNone marks a share whose senders got none of -c: they only end
	// their streams (receivers elsewhere wait for every stream's end).
	SendNone bool `json:"send_none,omitempty"`
	// Size is the message payload size in bytes (at least 24: the header the
	// bench embeds: stream, number, send time).
	Size int `json:"size"`
	// FileSize is the bytes of each file of upload and download.
	FileSize int64 `json:"file_size,omitempty"`
	// Resumable makes upload use the resumable endpoint (tus) instead of
	// one request per file.
	Resumable bool `json:"resumable,omitempty"`
	// Attach makes each 1:1 send of user carry one attachment (a file the
	// sender uploaded once before the run).
	Attach bool `json:"attach,omitempty"`
	// Hold is how long conns keeps its connections open once all are up.
	Hold time.Duration `json:"hold_ns"`
	// Duration bounds the timed phase (0: until Count is done).
	Duration time.Duration `json:"duration_ns"`
	// Timeout is the hard cap on the whole run, setup and drain included.
	Timeout time.Duration `json:"timeout_ns"`
	// Drain is how long to wait, after the last send, for deliveries.
	Drain time.Duration `json:"drain_ns"`
	// DeliveredAck makes receivers send cumulative delivered cursors (the
	// second step of the two-step ACK), as real clients do.
	DeliveredAck bool `json:"delivered_ack"`

	// HTTPBase is the server's HTTP API, "http://host:port".
	HTTPBase string `json:"http_base"`
	// WSAddr is the WebSocket URL, "ws://host:port/ws".
	WSAddr string `json:"ws_addr"`
	// TCPAddr is the raw TCP address, "tcp://host:port".
	TCPAddr string `json:"tcp_addr"`
	// WSAddrs and TCPAddrs, when set, are every node of a cluster (WSAddr
	// and TCPAddr are their first): connections go to them in turn.
	WSAddrs  []string `json:"ws_addrs,omitempty"`
	TCPAddrs []string `json:"tcp_addrs,omitempty"`
	// Transport is "ws" or "tcp"; Codec "proto" or "json" (ws only).
	Transport string `json:"transport"`
	Codec     string `json:"codec"`
	// APIKey authenticates token minting (X-Api-Key). It is sent to remote
	// workers in clear over their TCP link: use workers on trusted networks.
	APIKey string `json:"api_key"`
	// Prefix starts every user id of the run (random per run, so runs
	// against the same server never share users).
	Prefix string `json:"prefix"`
	// SourceIPs are local addresses outgoing connections are spread over
	// (raw connections only: conns and order's sender).
	SourceIPs []string `json:"source_ips,omitempty"`
	// Provider is push-offline's push stand-in, in this process (the
	// scenario runs in one process: it is not sent to workers).
	Provider *PushProvider `json:"-"`
}

// DefaultConfig returns the defaults of a scenario's flags.
func DefaultConfig(scenario string) Config {
	c := Config{
		Scenario: scenario, Count: 100, Concurrency: 10, Online: 1, Window: 64, Pipeline: 1,
		Size: 64, Hold: 10 * time.Second, Timeout: 10 * time.Minute,
		Drain: 10 * time.Second, DeliveredAck: true, Transport: "ws", Codec: "proto",
	}
	switch scenario {
	case "order":
		c.Count, c.Concurrency = 10000, 1
	case "conns":
		c.Count, c.Concurrency = 1000, 50
	case "soak":
		c.Count, c.Duration, c.Rate = 0, time.Minute, 10
	case "group":
		c.Count, c.Members, c.Online = 1000, 20, 0.5
	case "send-rate":
		c.Count, c.Concurrency, c.Groups, c.Members, c.GroupOnline = 100000, 0, 100, 100, 1
	case "fanout":
		c.Count, c.Concurrency, c.Pipeline, c.Members, c.OnlineMembers = 1000, 2, 4, 10000, 5000
		c.Drain = 30 * time.Second
	case "push-offline":
		c.Count, c.Concurrency, c.Members = 20, 20, 1000
		c.Drain = 30 * time.Second
	case "upload", "download":
		c.Count, c.Concurrency, c.FileSize = 1000, 100, 1<<20
	case "reactions":
		c.Count, c.Duration, c.Members, c.Emojis = 0, 10*time.Second, 1000, 4
	case "stream":
		c.Count, c.Duration, c.Concurrency, c.Members, c.Rate, c.Chunks, c.Size = 0, 20*time.Second, 100, 100, 50, 100, 32
	case "search":
		c.Count, c.Concurrency, c.Pipeline, c.Convs, c.Searchers, c.Seed = 1000000, 50, 8, 10000, []int{50}, 1
		c.QueryDuration, c.Drain, c.Timeout = 20*time.Second, 10*time.Minute, 30*time.Minute
	case "mixed":
		c.Count, c.Duration, c.Concurrency = 0, time.Minute, 1
		c.Pairs, c.Groups, c.GroupSize, c.GroupOnline = 1000, 100, 100, 1
		c.Members, c.OnlineMembers = 10000, 5000
		// WuKongIM's mixed table: 10 msg/s per pair, 20 per group, 5 into the big group.
		c.Rate, c.GroupRate, c.BigRate = 10, 20, 5
		c.Drain = 30 * time.Second
	}
	c.Parts = 1
	return c
}

// validate checks a config whose addresses are filled in.
func (c Config) validate() error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	_, ok := newScenario(c.Scenario)
	check(ok, "unknown scenario %q (have %s)", c.Scenario, strings.Join(Scenarios(), ", "))
	check(c.Count >= 0, "-c must be >= 0")
	check(c.Count > 0 || c.Duration > 0, "-c 0 needs --duration: a run must be bounded")
	check(c.Concurrency >= 1 || c.Scenario == "send-rate", "-t must be >= 1")
	check(c.Online >= 0 && c.Online <= 1, "-p must be within 0..1")
	check(c.Window >= 1, "--window must be >= 1")
	check(c.Pipeline >= 1 && c.Pipeline <= 4096, "--pipeline must be 1..4096")
	check(c.Rate >= 0, "--rate must be >= 0")
	check(c.Size >= payloadHeader && c.Size <= 60000, "--size must be %d..60000", payloadHeader)
	check(c.Timeout > 0, "--timeout must be positive")
	check(c.Duration >= 0 && c.Hold >= 0 && c.Drain >= 0, "durations must not be negative")
	check(c.Transport == "ws" || c.Transport == "tcp", "--transport must be ws or tcp")
	check(c.Codec == "proto" || c.Codec == "json", "--codec must be proto or json")
	check(!(c.Transport == "tcp" && c.Codec == "json"), "--codec json needs --transport ws (TCP is protobuf only)")
	check(c.HTTPBase != "", "no server address (-a or --embedded)")
	check(c.APIKey != "", "no admin API key (--api-key, --data DIR or --embedded)")
	errs = append(errs, c.validateGroups()...)
	errs = append(errs, c.validateRich()...)
	if c.Scenario == "upload" || c.Scenario == "download" {
		check(c.FileSize >= 1 && c.FileSize <= 1<<40, "--file-size must be positive")
	}
	if c.Scenario == "search" {
		check(c.Count > 0, "search: -c must be > 0 (the messages stored before the queries)")
		check(c.Convs >= c.Concurrency, "--convs must be >= -t (each sender has at least one peer)")
		for _, n := range c.Searchers {
			check(n >= 1 && n <= 100000, "--searchers: each phase's searchers must be 1..100000")
		}
		check(c.QueryDuration >= 0, "--duration must not be negative")
	}
	if c.Scenario == "push-offline" {
		check(c.Members >= 2 && c.Members <= 100000, "-m must be 2..100000")
	}
	for _, ip := range c.SourceIPs {
		check(net.ParseIP(ip) != nil, "--source-ips: %q is not an IP address", ip)
	}
	return errors.Join(errs...)
}

// share returns worker i's part of c when n workers run it: requests and
// concurrency split as evenly as integers allow, and its own user prefix.
func (c Config) share(i, n int) Config {
	part := func(total int) int {
		p := total / n
		if i < total%n {
			p++
		}
		return p
	}
	s := c
	s.Part, s.Parts = i, n
	s.Prefix = fmt.Sprintf("%sw%d-", c.Prefix, i)
	if isGroupScenario(c.Scenario) {
		c.groupShare(&s, i, n)
		return s
	}
	if c.Scenario == "reactions" {
		// Members are split by Part (see reactionsScenario); the budget evenly.
		s.Count = part(c.Count)
		s.SendNone = c.Count > 0 && s.Count == 0
		return s
	}
	s.Count = part(c.Count)
	s.Concurrency = max(part(c.Concurrency), 1)
	if c.Count > 0 && s.Count == 0 {
		s.Concurrency = 0 // nothing to do for this worker
	}
	return s
}

// ClusterAddrs is Addrs for comma-separated lists (the nodes of a cluster,
// tcpAddrs empty or as many): the first node's addresses, and every
// node's WebSocket and TCP addresses.
func ClusterAddrs(httpAddrs, tcpAddrs string) (httpBase, wsAddr, tcp string, wsAll, tcpAll []string, err error) {
	hs := strings.Split(httpAddrs, ",")
	var ts []string
	if tcpAddrs != "" {
		ts = strings.Split(tcpAddrs, ",")
		if len(ts) != len(hs) {
			return "", "", "", nil, nil, fmt.Errorf("--tcp lists %d addresses, -a %d", len(ts), len(hs))
		}
	}
	for i, h := range hs {
		t := ""
		if ts != nil {
			t = ts[i]
		}
		hb, w, tc, err := Addrs(strings.TrimSpace(h), strings.TrimSpace(t))
		if err != nil {
			return "", "", "", nil, nil, err
		}
		if i == 0 {
			httpBase, wsAddr, tcp = hb, w, tc
		}
		wsAll, tcpAll = append(wsAll, w), append(tcpAll, tc)
	}
	if len(hs) == 1 {
		wsAll, tcpAll = nil, nil
	}
	return httpBase, wsAddr, tcp, wsAll, tcpAll, nil
}

// Addrs derives the three server addresses from -a (HTTP host:port, with or
// without a scheme) and the TCP address (host:port; empty: the HTTP host at
// port 7070, the server's default).
func Addrs(httpAddr, tcpAddr string) (httpBase, wsAddr, tcp string, err error) {
	for _, p := range []string{"http://", "ws://", "https://", "wss://"} {
		httpAddr = strings.TrimPrefix(httpAddr, p)
	}
	httpAddr = strings.TrimSuffix(strings.TrimSuffix(httpAddr, "/ws"), "/")
	host, _, err := net.SplitHostPort(httpAddr)
	if err != nil {
		return "", "", "", fmt.Errorf("-a %q: want host:port", httpAddr)
	}
	if tcpAddr == "" {
		tcpAddr = net.JoinHostPort(host, "7070")
	}
	tcpAddr = strings.TrimPrefix(tcpAddr, "tcp://")
	if _, _, err := net.SplitHostPort(tcpAddr); err != nil {
		return "", "", "", fmt.Errorf("--tcp %q: want host:port", tcpAddr)
	}
	return "http://" + httpAddr, "ws://" + httpAddr + "/ws", "tcp://" + tcpAddr, nil
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/bench"
	"github.com/parleyim/parley/server"
)

// benchCmd is `parley bench <scenario> [flags]` and `parley bench worker`.
func benchCmd(args []string) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		benchUsage()
		if len(args) == 0 {
			return errors.New("bench: which scenario?")
		}
		return nil
	}
	name := args[0]
	if name == "worker" {
		return benchWorker(args[1:])
	}
	if name == "hook-server" {
		return benchHookServer(args[1:])
	}
	if name == "floor" {
		return benchFloor(args[1:])
	}
	if !slices.Contains(bench.Scenarios(), name) {
		benchUsage()
		return fmt.Errorf("bench: unknown scenario %q", name)
	}
	cfg := bench.DefaultConfig(name)
	fs := flag.NewFlagSet("bench "+name, flag.ContinueOnError)
	fs.IntVar(&cfg.Count, "c", cfg.Count, countHelp(name))
	fs.IntVar(&cfg.Concurrency, "t", cfg.Concurrency, concHelp(name))
	addr := fs.String("a", "127.0.0.1:8080", "server HTTP address host:port (WebSocket at ws://ADDR/ws); a cluster's nodes comma-separated, connections spread over them")
	tcpAddr := fs.String("tcp", "", "server TCP address host:port (default: the -a host, port 7070); for a cluster, one per -a node")
	fs.StringVar(&cfg.Transport, "transport", cfg.Transport, "ws or tcp")
	fs.StringVar(&cfg.Codec, "codec", cfg.Codec, "proto or json (json: WebSocket only)")
	fs.StringVar(&cfg.APIKey, "api-key", "", "admin API key, to mint users' tokens (or --data)")
	dataDir := fs.String("data", "", "the server's data directory: read the API key from DIR/secrets.json (default ./data when it holds one)")
	embedded := fs.Bool("embedded", false, "start a server in this process, in a temporary directory")
	durationHelp := "bound the timed phase (0: until -c is done)"
	if name == "search" {
		// search's --duration is its query phase; its load is bounded by -c.
		cfg.Duration, cfg.QueryDuration = cfg.QueryDuration, 0
		durationHelp = "how long each query phase (--searchers) lasts, once the index has caught up"
	}
	fs.DurationVar(&cfg.Duration, "duration", cfg.Duration, durationHelp)
	fs.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "hard cap on the whole run, setup and drain included")
	jsonOut := fs.String("json", "", "write the JSON report to FILE")
	htmlOut := fs.String("html", "", "write the HTML report (charts, no network needed) to FILE")
	procs := fs.Int("procs", 1, "run the load in N worker processes of this machine and merge their reports")
	workers := fs.String("workers", "", "run the load on remote workers host:port,... (parley bench worker --listen)")
	sourceIPs := fs.String("source-ips", "", "spread every connection over these local IPs (when one address runs out of ports), e.g. 127.0.0.2,127.0.0.3")
	serverPID := fs.Int("server-pid", 0, "sample this server process's CPU and memory (default: found by port when local)")
	quiet := fs.Bool("quiet", false, "no live progress on stderr")
	sizeHelp := "message payload bytes (at least 24)"
	switch name {
	case "stream":
		sizeHelp = "bytes of each chunk (at least 24: its send time and number)"
	case "search":
		sizeHelp = "ignored: search sends generated sentences (about 30–150 bytes)"
	}
	fs.IntVar(&cfg.Size, "size", cfg.Size, sizeHelp)
	var providerAddr, providerDir *string
	var providerSetup, floor *bool
	var floorWorkers *int
	var pushDelay, pushCoalesce *time.Duration
	switch name {
	case "push-offline":
		fs.IntVar(&cfg.Members, "m", cfg.Members, "members per group: the sender and m-1 offline members with a push target")
		fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "messages per second of all senders together (0: as fast as acks come)")
		fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, drainHelp(name))
		providerAddr = fs.String("provider", "127.0.0.1:9443", "where the FCM stand-in listens (the server's fcm_endpoint; with --embedded a free port)")
		providerDir = fs.String("provider-dir", filepath.Join(os.TempDir(), "parley-push-standin"), "the stand-in's keys and the server's settings for it (server.yaml); made when missing")
		providerSetup = fs.Bool("provider-setup", false, "only write --provider-dir's files and say how to start the server with them")
		floor = fs.Bool("floor", false, "no server: send the -c × (m-1) notifications of the run from this process straight to the stand-in\nthrough the server's FCM client, --floor-workers in flight (the ceiling the platform requests alone allow here)")
		floorWorkers = fs.Int("floor-workers", 64, "with --floor: requests in flight (a server's push_workers)")
		pushDelay = fs.Duration("push-delay", 0, "with --embedded: the server's push_delay (0: its default, 3s)")
		pushCoalesce = fs.Duration("push-coalesce", 0, "with --embedded: the server's push_coalesce (0: its default, 10s)")
	case "push":
		fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, drainHelp(name))
	case "upload", "download":
		fs.Int64Var(&cfg.FileSize, "file-size", cfg.FileSize, "bytes of each file")
		if name == "upload" {
			fs.BoolVar(&cfg.Resumable, "resumable", false, "upload through the resumable endpoint (tus, one PATCH per file) instead of POST /v1/files")
		}
	case "user", "soak", "order", "group", "send-rate", "fanout", "mixed", "stream":
		fs.BoolVar(&cfg.DeliveredAck, "ack", cfg.DeliveredAck, "receivers send delivered cursors (two-step ACK)")
		fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, drainHelp(name))
	case "reactions", "search":
		fs.DurationVar(&cfg.Drain, "drain", cfg.Drain, drainHelp(name))
	}
	switch name {
	case "group", "send-rate", "fanout", "mixed", "search":
		fs.IntVar(&cfg.Pipeline, "pipeline", cfg.Pipeline, "sends in flight per sender, each its own ordered stream (1: one at a time, as kimbench)")
	}
	switch name {
	case "user":
		fs.Float64Var(&cfg.Online, "p", cfg.Online, "share of receivers online, 0..1")
		fs.BoolVar(&cfg.Attach, "attach", false, "each send carries an attachment (a 1 KiB file each sender uploads before the run)")
		fs.IntVar(&cfg.Pipeline, "pipeline", cfg.Pipeline, "sends in flight per sender, each its own ordered stream (1: one at a time, as kimbench)")
		fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "messages per second of all senders together, each stream paced evenly (0: as fast as acks come); a stream whose ack comes later than its next send is due falls behind")
	case "soak":
		fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "messages per second per user (0: as fast as acks come)")
	case "order":
		fs.IntVar(&cfg.Window, "window", cfg.Window, "sends in flight")
	case "conns":
		fs.DurationVar(&cfg.Hold, "hold", cfg.Hold, "hold the connections this long once all are up")
	case "group":
		fs.IntVar(&cfg.Members, "m", cfg.Members, "members per group (the sender included)")
		fs.Float64Var(&cfg.Online, "p", cfg.Online, "share of each group's members online, the sender included, 0..1")
		fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "messages per second of all senders together (0: as fast as acks come)")
	case "send-rate":
		fs.IntVar(&cfg.Groups, "groups", cfg.Groups, "groups, each with one sender")
		fs.IntVar(&cfg.Members, "m", cfg.Members, "members per group")
		fs.IntVar(&cfg.GroupOnline, "group-online", cfg.GroupOnline, "receivers online per group (the sender comes on top)")
		fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "messages per second of all groups together (0: as fast as acks come, --pipeline in flight per sender)")
	case "fanout":
		fs.IntVar(&cfg.Members, "m", cfg.Members, "members of the group")
		fs.IntVar(&cfg.OnlineMembers, "online", cfg.OnlineMembers, "receivers connected (the -t senders, also members, come on top)")
		fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "messages per second of all senders together (0: as fast as acks come)")
	case "reactions":
		fs.IntVar(&cfg.Members, "m", cfg.Members, "members of the group, all online, all reacting to its one message")
		fs.IntVar(&cfg.Emojis, "emojis", cfg.Emojis, "emojis the members cycle through (at most 8)")
		fs.IntVar(&cfg.Pipeline, "pipeline", cfg.Pipeline, "reactions in flight per member, each stream over its own emojis (at most --emojis)")
		fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "reactions per second of all members together (0: as fast as answers come)")
	case "stream":
		fs.IntVar(&cfg.Members, "m", cfg.Members, "online members of each bot's group (the bot comes on top)")
		fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "chunks per second of each stream (0: as fast as appends are answered)")
		fs.IntVar(&cfg.Chunks, "chunks", cfg.Chunks, "chunks of each streamed message (then it is finished and the next one opened)")
	case "search":
		fs.IntVar(&cfg.Convs, "convs", cfg.Convs, "1:1 conversations: sender i messages the peers j with j mod -t == i (peers have accounts, stay offline)")
		fs.Func("searchers", "query phases after the load, one after the other, each with this many concurrent searchers (the senders' users,\non their connections), one query in flight each, for --duration: N or N,N,... (default 50)", func(v string) error {
			cfg.Searchers = nil
			for _, f := range strings.Split(v, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil {
					return fmt.Errorf("--searchers: %q is not a number", f)
				}
				cfg.Searchers = append(cfg.Searchers, n)
			}
			return nil
		})
		fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the generated texts and queries (the same seed, the same texts)")
	case "mixed":
		fs.IntVar(&cfg.Pairs, "pairs", cfg.Pairs, "1:1 pairs (sender and receiver online)")
		fs.IntVar(&cfg.Groups, "groups", cfg.Groups, "small groups, each with one sender")
		fs.IntVar(&cfg.GroupSize, "group-size", cfg.GroupSize, "members per small group")
		fs.IntVar(&cfg.GroupOnline, "group-online", cfg.GroupOnline, "receivers online per small group (the sender comes on top)")
		fs.IntVar(&cfg.Members, "m", cfg.Members, "members of the big group")
		fs.IntVar(&cfg.OnlineMembers, "online", cfg.OnlineMembers, "receivers connected in the big group (its -t senders come on top)")
		fs.Float64Var(&cfg.Rate, "rate", cfg.Rate, "messages per second per pair (0: as fast as acks come)")
		fs.Float64Var(&cfg.GroupRate, "group-rate", cfg.GroupRate, "messages per second per small group (0: as fast as acks come)")
		fs.Float64Var(&cfg.BigRate, "big-rate", cfg.BigRate, "messages per second into the big group, all its senders together (0: as fast as acks come)")
	}
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: parley bench %s [flags]\n\n%s\n\nflags:\n", name, scenarioHelp(name))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("bench: unexpected arguments %q", fs.Args())
	}
	if name == "search" {
		cfg.Duration, cfg.QueryDuration = 0, cfg.Duration
	}
	if *sourceIPs != "" {
		cfg.SourceIPs = strings.Split(*sourceIPs, ",")
	}
	opts := bench.Options{Procs: *procs, ServerPID: *serverPID}
	if *workers != "" {
		opts.Workers = strings.Split(*workers, ",")
	}
	if !*quiet {
		opts.Progress = os.Stderr
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	if name == "push-offline" {
		dir, addr := *providerDir, *providerAddr
		if *embedded {
			tmp, err := os.MkdirTemp("", "parley-push-standin-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(tmp)
			dir, addr = tmp, "127.0.0.1:0"
		}
		p, err := bench.StartPushProvider(dir, addr)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		defer p.Close()
		if *providerSetup {
			fmt.Printf("The push stand-in's files are in %s.\nStart the server with them (or copy the keys of %s into your config):\n\n  parley serve --config %s\n\nthen run parley bench push-offline --provider %s --provider-dir %s\n",
				p.Dir, p.ServerYAML(), p.ServerYAML(), addr, p.Dir)
			return nil
		}
		cfg.Provider = p
		if *floor {
			p.FCM.SetKeep(0)
			r, err := bench.PushFloor{Provider: p, Notifications: cfg.Count * (cfg.Members - 1), Workers: *floorWorkers}.Run(ctx)
			if err != nil {
				return fmt.Errorf("bench: %w", err)
			}
			r.Print(os.Stdout)
			if *jsonOut != "" {
				b, err := json.MarshalIndent(r, "", "  ")
				if err != nil {
					return err
				}
				if err := os.WriteFile(*jsonOut, b, 0o644); err != nil {
					return err
				}
			}
			if r.Failed > 0 || len(r.Violations) > 0 {
				return fmt.Errorf("bench: push floor: %d requests failed, %d not as FCM documents them", r.Failed, len(r.Violations))
			}
			return nil
		}
	}
	if *embedded {
		var mod func(*server.Config)
		if p := cfg.Provider; p != nil {
			mod = func(c *server.Config) {
				c.FCMCredentialsFile, c.FCMEndpoint, c.PushCAFile = p.CredentialsFile(), p.Endpoint(), p.CAFile()
				c.PushDelay, c.PushCoalesce = *pushDelay, *pushCoalesce
			}
		}
		srv, err := bench.StartEmbedded(mod)
		if err != nil {
			return fmt.Errorf("bench: embedded server: %w", err)
		}
		defer srv.Close()
		srv.Apply(&cfg)
		cfg.DataDir = srv.Dir
		if opts.ServerPID == 0 {
			opts.ServerPID, opts.ServerSharesProcess = os.Getpid(), true
		}
	} else {
		var err error
		if cfg.HTTPBase, cfg.WSAddr, cfg.TCPAddr, cfg.WSAddrs, cfg.TCPAddrs, err = bench.ClusterAddrs(*addr, *tcpAddr); err != nil {
			return err
		}
		if cfg.APIKey == "" && *dataDir == "" {
			// A server started from the README keeps its key in ./data:
			// run from the same directory, no flag is needed.
			if _, serr := os.Stat(filepath.Join("data", auth.SecretsFile)); serr == nil {
				*dataDir = "data"
			} else {
				return errors.New("bench: the admin API key is needed to make users: --data DIR (the server's data directory) or --api-key KEY")
			}
		}
		if cfg.APIKey == "" {
			if cfg.APIKey, err = apiKeyFrom(*dataDir); err != nil {
				return err
			}
		}
		cfg.DataDir = *dataDir
		if opts.ServerPID == 0 {
			opts.ServerPID = localServerPID(cfg.HTTPBase)
		}
	}

	rep, err := bench.Run(ctx, cfg, opts)
	if rep != nil {
		fmt.Println()
		if werr := rep.WriteText(os.Stdout); werr != nil {
			return werr
		}
		if *jsonOut != "" {
			b, _ := json.MarshalIndent(rep, "", "  ")
			if werr := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); werr != nil {
				return werr
			}
		}
		if *htmlOut != "" {
			f, werr := os.Create(*htmlOut)
			if werr != nil {
				return werr
			}
			werr = rep.WriteHTML(f)
			if cerr := f.Close(); werr == nil {
				werr = cerr
			}
			if werr != nil {
				return werr
			}
		}
	}
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if !rep.Passed {
		return fmt.Errorf("bench: reliability check failed: %s", strings.Join(rep.Failures, "; "))
	}
	return nil
}

// benchWorker is `parley bench worker`: a load process for a coordinator,
// over stdin/stdout (--stdio, started by --procs) or TCP (--listen).
func benchWorker(args []string) error {
	fs := flag.NewFlagSet("bench worker", flag.ContinueOnError)
	listen := fs.String("listen", "", "accept coordinators (parley bench ... --workers) on this address")
	stdio := fs.Bool("stdio", false, "run one job read from stdin, results on stdout (how --procs starts workers)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	switch {
	case *stdio:
		return bench.ServeWorker(ctx, os.Stdin, os.Stdout)
	case *listen != "":
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "parley bench worker listening on %s\n", ln.Addr())
		return bench.ServeWorkers(ctx, ln)
	}
	return errors.New("bench worker: give --listen ADDR or --stdio")
}

// apiKeyFrom reads admin_api_keys[0] from the server's DIR/secrets.json.
func apiKeyFrom(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, "secrets.json"))
	if err != nil {
		return "", fmt.Errorf("bench: --data: %w", err)
	}
	var s struct {
		AdminAPIKeys []string `json:"admin_api_keys"`
	}
	if err := json.Unmarshal(b, &s); err != nil || len(s.AdminAPIKeys) == 0 {
		return "", fmt.Errorf("bench: --data: no admin_api_keys in %s", filepath.Join(dir, "secrets.json"))
	}
	_, secret := auth.ParseAdminKey(s.AdminAPIKeys[0]) // "name:secret" entries send the secret
	return secret, nil
}

// localServerPID finds the server's process when it listens on this
// machine's loopback; 0 otherwise (the report then has no server section).
func localServerPID(httpBase string) int {
	host, port, err := net.SplitHostPort(strings.TrimPrefix(httpBase, "http://"))
	if err != nil {
		return 0
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return 0
	}
	p, _ := strconv.Atoi(port)
	pid, err := bench.ListenerPID(p)
	if err != nil {
		return 0
	}
	return pid
}

func countHelp(name string) string {
	switch name {
	case "login":
		return "logins in total"
	case "conns":
		return "connections to open and hold"
	case "soak", "mixed":
		return "messages in total (0: until --duration ends)"
	case "reactions":
		return "reactions in total (0: until --duration ends)"
	case "stream":
		return "chunks in total (0: until --duration ends)"
	case "search":
		return "text messages stored before the queries"
	case "upload":
		return "files uploaded in total"
	case "download":
		return "downloads in total"
	}
	return "messages in total"
}

func concHelp(name string) string {
	switch name {
	case "login":
		return "concurrent logins"
	case "conns":
		return "concurrent dials"
	case "group":
		return "senders, each with its own group (each sender has one request in flight per --pipeline stream)"
	case "send-rate":
		return "ignored: send-rate has one sender per group (--groups)"
	case "fanout":
		return "senders into the group (members too)"
	case "mixed":
		return "senders into the big group (members too)"
	case "order":
		return "ignored: order is one sender and one receiver"
	case "push-offline":
		return "groups, each with one online sender"
	case "push":
		return "pushers, each with its own online receiver (one HTTP request in flight each, as ab -c)"
	case "upload", "download":
		return "users, each with one transfer in flight"
	case "reactions":
		return "ignored: every one of the -m members reacts"
	case "stream":
		return "bots, each streaming to its own group"
	case "search":
		return "senders, each messaging --convs/t peers (--pipeline sends in flight each)"
	}
	return "sender/receiver pairs (each sender has one request in flight)"
}

func drainHelp(name string) string {
	switch name {
	case "group", "send-rate", "fanout", "mixed":
		return "after the last send, wait for the end markers until nothing has arrived for this long"
	case "reactions":
		return "after the last reaction, wait at most this long for the counts to settle and every member's view to hold them"
	case "stream":
		return "after the last chunk, wait for the finished messages until nothing has arrived for this long"
	case "search":
		return "after the last send, wait this long at most for the search index to catch up (lag 0)"
	}
	return "after the last send, wait this long at most for deliveries"
}

func scenarioHelp(name string) string {
	switch name {
	case "login":
		return "login: connect + authenticate until auth_ok, then close (kimbench login)."
	case "user":
		return "user: 1:1 sends, each timed until its ack (after durable store); delivery to the\n-p share of online receivers verified: none lost, duplicated or out of order (kimbench user)."
	case "order":
		return "order: one sender pipelines -c messages (--window in flight) to one receiver;\nthe server's seqs and the receiver's order must equal the send order (WuKongIM ordering)."
	case "conns":
		return "conns: open -c idle authenticated connections, hold them, report the server's\nRSS per connection (needs the server's pid: local server or --server-pid; --procs past 19k)."
	case "soak":
		return "soak: -t pairs message each other at --rate for --duration; reliability checked,\nserver CPU and memory sampled each second."
	case "group":
		return "group: -t senders, each owning a group of -m members of which the -p share is online;\neach request is one group send until its ack; every online member but the sender must\nreceive each message once, in order (kimbench group)."
	case "send-rate":
		return "send-rate: --groups groups of -m members, --group-online receivers online each, one sender\nper group, at --rate messages/s in total; reports sends/s and ack latency, deliveries\nverified (WuKongIM send rate)."
	case "fanout":
		return "fanout: one group of -m members, --online receivers connected (spread over --procs),\n-t senders send -c messages; reports deliveries/s, expected vs received, lost, duplicated,\nout of order at every receiver, end-to-end latency (WuKongIM receive rate)."
	case "push-offline":
		return "push-offline: -t groups of -m members: the sender online, the others offline with an FCM\npush target; -c messages round-robin into the groups; the server notifies every member\nthrough a local FCM stand-in (--provider; the server must be configured for it, see\n--provider-setup, or use --embedded); reports notifications/s and the latency from message\nstored to platform request; every device must be notified of every message, none twice."
	case "upload":
		return "upload: -t users upload -c files of --file-size bytes in all, one at a time each, in one request\n(POST /v1/files) or resumable (--resumable, tus); each timed until the server answers with the\nfile's record; reports files/s and MB/s; every accepted file must count in its user's media usage."
	case "download":
		return "download: -t users each upload one file of --file-size bytes and get its signed URL; then\n-c GETs in all, one at a time per user, each timed to its last byte, which must all be the file's;\nreports requests/s, MB/s and latency."
	case "push":
		return "push: -t receivers online; -t pushers POST -c pushes in total to /v1/admin/push/users\n(one each in flight, keep-alive, as ab -k -c); each request timed until its answer; every\npush must reach its receiver once, in order (goim push benchmark)."
	case "reactions":
		return "reactions: -m members of one group, all online, react to its one message, each cycling through\n--emojis emojis (adding one, taking it back), --pipeline in flight each or --rate in total, for\n--duration; reports reactions/s acked and their latency; the final counts, read afresh, must be\nwhat the members' acked reactions add up to, and every member's view (the coalesced live updates)\nmust hold them."
	case "stream":
		return "stream: -t bots each stream messages of --chunks chunks to their own group of -m online members\nat --rate chunks/s, for --duration; reports chunk delivery latency (send time in the chunk,\ntimed at each member), chunks delivered vs expected; every finished message must reach every\nmember once with the whole text, and be stored once with it."
	case "search":
		return "search: -t senders store -c text messages (sentences in English, German, French, Russian, Greek,\nChinese, Japanese, Korean, Thai, from word lists with a seeded PRNG) over --convs 1:1 conversations;\nreports sends/s and the server's CPU, the index's throughput while sends go on (from /metrics), its\nlag and the time to catch up; then verifies rare-word hits against the generator and runs\n--searchers searchers for --duration (one-word, rare-word, phrase and CJK queries; a list such as\n1,8,50 runs a phase for each): p50/p99/max and queries/s per kind, TOO_MANY_REQUESTS counted; with --data, DATA/search and DATA/store\nper million messages. Against a server with search: off only the load runs (the baseline)."
	case "keypackages":
		return "keypackages: -t claimers claim MLS KeyPackages (one of one device per request), -c in all,\ncycling over owners holding 200 one-time packages each (enough for every claim); reports\nclaims/s and latency; no one-time package may be handed out twice (docs/e2ee.md)."
	case "mixed":
		return "mixed: --pairs 1:1 pairs, --groups groups of --group-size and one big group of -m\n(--online receivers) at once, at WuKongIM's rates by default; each part and the total\nreported and verified (WuKongIM mixed)."
	}
	return ""
}

func benchUsage() {
	fmt.Fprintf(os.Stderr, `usage: parley bench <scenario> [flags]
       parley bench worker --listen ADDR | --stdio
       parley bench hook-server --secret S [--listen ADDR] [--delay D]   (an allow-all before-send hook)
       parley bench floor [--http ADDR] [--tcp ADDR] [--api-key KEY]       (a relay to measure the server against)

scenarios:
`)
	for _, s := range bench.Scenarios() {
		fmt.Fprintf(os.Stderr, "  %s\n", strings.ReplaceAll(scenarioHelp(s), "\n", "\n    "))
	}
	fmt.Fprintf(os.Stderr, "\n  %s\n", strings.ReplaceAll(floorHelp, "\n", "\n    "))
	fmt.Fprintf(os.Stderr, `
common flags: -c N -t N -a HOST:PORT [--tcp HOST:PORT] [--transport ws|tcp] [--codec proto|json]
  [--api-key KEY | --data DIR | --embedded] [--duration D] [--timeout D] [--procs N]
  [--workers HOST:PORT,...] [--source-ips IP,...] [--server-pid PID] [--json FILE] [--html FILE]
Run 'parley bench <scenario> -h' for a scenario's flags.
`)
}

// benchHookServer runs an allow-everything before-send hook in this process
// until interrupted, for the hook figures of docs/benchmarks.md.
func benchHookServer(args []string) error {
	fs := flag.NewFlagSet("bench hook-server", flag.ContinueOnError)
	listen := fs.String("listen", "127.0.0.1:9099", "address to serve the hook on (http://ADDR/)")
	secret := fs.String("secret", "", "the hook's secret (moderation_hooks[].secret); required")
	delay := fs.Duration("delay", 0, "add this to every answer")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *secret == "" {
		return errors.New("bench hook-server: --secret is required")
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	h := &bench.HookServer{Secret: *secret, Delay: *delay}
	fmt.Fprintf(os.Stderr, "hook-server: serving http://%s/\n", ln.Addr())
	err = h.Serve(ctx, ln)
	fmt.Println(h.Summary())
	return err
}

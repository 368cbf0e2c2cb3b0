package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"strings"
	"sync"
	"time"
)

// Options are the coordinator's settings: how many load processes, where
// the server's process is, where progress goes.
type Options struct {
	// Procs starts that many local worker processes (each with its share of
	// -c and -t) and merges their reports; 0 or 1 runs the load in this
	// process. One process here holds at most ~19,000 sockets.
	Procs int
	// Workers are remote workers' host:port (`parley bench worker --listen`);
	// when set, the load runs there and Procs is ignored.
	Workers []string
	// WorkerCommand starts one local worker that speaks the worker protocol
	// on stdin/stdout. Default: this executable with "bench worker --stdio".
	WorkerCommand []string
	// ServerPID is the server's process, sampled from /proc each second
	// (0: not sampled).
	ServerPID int
	// ServerSharesProcess says the server runs inside this process (an
	// embedded server), so its CPU figures include the load generator's
	// unless the load runs in worker processes.
	ServerSharesProcess bool
	// Progress receives a live progress line each second (nil: none).
	Progress io.Writer
}

// Run runs cfg and returns its report. It always ends by itself: the timed
// phase ends after Count requests or Duration, the whole run after Timeout.
// A report comes back even with an error when the run got that far.
func Run(ctx context.Context, cfg Config, o Options) (*Report, error) {
	if cfg.Prefix == "" {
		var b [4]byte
		rand.Read(b[:])
		cfg.Prefix = "b" + hex.EncodeToString(b[:]) + "-"
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := max(o.Procs, 1)
	if len(o.Workers) > 0 {
		n = len(o.Workers)
	}
	if n > 1 && !splittable(cfg.Scenario) {
		return nil, fmt.Errorf("%s runs in one process: it cannot be split over processes", cfg.Scenario)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	if needsPlan(cfg.Scenario) {
		// The shared setup (one big group) is done once, here, before any
		// load process starts; each gets the plan in its job.
		var err error
		if cfg.Plan, err = makePlan(ctx, cfg, o.Progress); err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
	}

	board := &progressBoard{out: o.Progress, parts: map[int]Progress{}}
	var sampler *serverSampler
	var notes []string
	onStart := func() {
		if o.ServerSharesProcess {
			// Return setup's garbage (token minting) to the OS first, or
			// the connections would fill freed heap and the RSS growth
			// would understate them.
			debug.FreeOSMemory()
		}
		if o.ServerPID > 0 {
			var err error
			if sampler, err = startServerSampler(o.ServerPID); err != nil {
				notes = append(notes, fmt.Sprintf("server pid %d not sampled: %v", o.ServerPID, err))
			}
		}
		board.begin(sampler)
	}

	var rep *Report
	var err error
	if n == 1 && len(o.Workers) == 0 {
		var once sync.Once
		rep, err = runShare(ctx, cfg, shareHooks{
			ready:    func(context.Context) error { once.Do(onStart); return nil },
			progress: func(p Progress) { board.set(0, p) },
		})
	} else {
		rep, err = runDistributed(ctx, cfg, o, n, onStart, board)
	}
	board.end()
	if rep == nil {
		return nil, err
	}
	rep.Config = cfg
	rep.Config.APIKey = ""
	rep.Notes = append(rep.Notes, notes...)
	if sampler != nil {
		base, series := sampler.close()
		rep.addServer(o.ServerPID, o.ServerSharesProcess && n == 1 && len(o.Workers) == 0, base, series)
	}
	rep.finalize()
	return rep, err
}

// addServer folds the server samples into the report.
func (r *Report) addServer(pid int, shared bool, base uint64, series []serverSample) {
	u := &ServerUsage{PID: pid, SharesProcess: shared, RSSBaseline: base, RSSPeak: base, RSSEnd: base, SampledSeconds: len(series)}
	var cpuSum float64
	for _, s := range series {
		cpuSum += s.CPUPercent
		u.CPUMaxPercent = max(u.CPUMaxPercent, s.CPUPercent)
		u.RSSPeak = max(u.RSSPeak, s.RSS)
		u.RSSEnd = s.RSS
		i := max(int(math.Ceil(s.T-0.05))-1, 0) // sample at T covers (T-1, T]: series entry ⌈T⌉
		for len(r.Series) <= i {
			r.Series = append(r.Series, Sample{T: float64(len(r.Series) + 1)})
		}
		r.Series[i].ServerCPUPercent = s.CPUPercent
		r.Series[i].ServerRSSBytes = s.RSS
	}
	if len(series) > 0 {
		u.CPUAvgPercent = cpuSum / float64(len(series))
	}
	r.Server = u
	if c := r.Conns; c != nil && c.Target > 0 {
		// The held figure: the highest RSS while every connection was up.
		c.ServerRSSBaseline = base
		for i, s := range r.Series {
			if s.Connected >= int64(c.Target) && i < len(r.Series) {
				c.ServerRSSHeld = max(c.ServerRSSHeld, s.ServerRSSBytes)
			}
		}
		if c.ServerRSSHeld > base {
			c.BytesPerConn = float64(c.ServerRSSHeld-base) / float64(c.Target)
		}
	}
}

// shareHooks connect a share of the run to whoever coordinates it.
type shareHooks struct {
	// ready is called after setup and returns when the timed phase may begin.
	ready func(ctx context.Context) error
	// progress gets the cumulative counters once a second.
	progress func(Progress)
}

// runShare runs one process's share: setup, the timed phase, finish.
func runShare(ctx context.Context, cfg Config, h shareHooks) (*Report, error) {
	sc, ok := newScenario(cfg.Scenario)
	if !ok {
		return nil, fmt.Errorf("unknown scenario %q", cfg.Scenario)
	}
	e := newEnv(cfg)
	rep := &Report{Scenario: cfg.Scenario, Config: cfg, Processes: 1, Latency: e.M.Latency, Status: map[string]uint64{}}
	rep.Config.APIKey = ""
	// this process got no share of the work
	idle := cfg.Idle || cfg.Concurrency == 0 && !isGroupScenario(cfg.Scenario)
	if !idle {
		if err := sc.Setup(ctx, e); err != nil {
			_ = sc.Finish(ctx, e, rep) // closes what Setup opened
			return nil, fmt.Errorf("setup: %w", err)
		}
	}
	if err := h.ready(ctx); err != nil {
		_ = sc.Finish(ctx, e, rep)
		return nil, err
	}
	e.start = time.Now()
	rep.StartedAt = e.start
	stopSeries := make(chan struct{})
	seriesDone := make(chan struct{})
	go func() {
		defer close(seriesDone)
		rep.Series = sampleSeries(e, stopSeries, h.progress)
	}()

	runCtx := ctx
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	var runErr, finErr error
	if !idle {
		runErr = sc.Run(runCtx, e)
	}
	end := time.Now()
	if ns := e.end.Load(); ns != 0 {
		end = time.Unix(0, ns)
	}
	rep.TotalSeconds = end.Sub(e.start).Seconds()
	if !idle {
		finErr = sc.Finish(ctx, e, rep)
	}
	close(stopSeries)
	<-seriesDone

	rep.Requests = e.M.requests.Load()
	rep.OK = rep.Requests - e.M.errors.Load()
	rep.Status = e.M.statusCopy()
	if d := rep.Delivery; d != nil {
		d.Sent = e.M.sent.Load()
		d.E2E = e.M.E2E
		if last := e.M.lastRecv.Load(); last != 0 {
			d.DeliverySeconds = time.Unix(0, last).Sub(e.start).Seconds()
		}
	}
	e.notes.Range(func(k, _ any) bool { rep.Notes = append(rep.Notes, k.(string)); return true })
	if ctx.Err() != nil && runErr == nil {
		runErr = fmt.Errorf("run cut short: %w (--timeout %v)", ctx.Err(), cfg.Timeout)
	}
	return rep, errors.Join(runErr, finErr)
}

// sampleSeries records one Sample per second until stop (plus a last,
// partial one), handing the cumulative counters to progress as it goes.
func sampleSeries(e *Env, stop <-chan struct{}, progress func(Progress)) []Sample {
	var out []Sample
	var prev Progress
	t := time.NewTicker(time.Second)
	defer t.Stop()
	take := func(now time.Time) {
		p := e.M.progress()
		out = append(out, Sample{
			T: now.Sub(e.start).Seconds(), Connected: p.Connected,
			Requests: p.Requests - prev.Requests, Errors: p.Errors - prev.Errors,
			Sent: p.Sent - prev.Sent, Acked: p.Acked - prev.Acked, Delivered: p.Delivered - prev.Delivered,
		})
		prev = p
		if progress != nil {
			progress(p)
		}
	}
	for {
		select {
		case now := <-t.C:
			take(now)
		case <-stop:
			take(time.Now())
			return out
		}
	}
}

// progressBoard sums the processes' progress and prints it once a second.
type progressBoard struct {
	out   io.Writer
	mu    sync.Mutex // guards the fields below
	parts map[int]Progress
	start time.Time
	srv   *serverSampler
	prev  Progress
	prevT time.Time
	stop  chan struct{}
	done  chan struct{}
}

func (b *progressBoard) set(i int, p Progress) {
	b.mu.Lock()
	b.parts[i] = p
	b.mu.Unlock()
}

func (b *progressBoard) begin(srv *serverSampler) {
	b.mu.Lock()
	b.start, b.prevT, b.srv = time.Now(), time.Now(), srv
	b.mu.Unlock()
	if b.out == nil {
		return
	}
	b.stop, b.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(b.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				b.print()
			case <-b.stop:
				return
			}
		}
	}()
}

func (b *progressBoard) end() {
	if b.stop != nil {
		close(b.stop)
		<-b.done
		b.print()
	}
}

func (b *progressBoard) print() {
	b.mu.Lock()
	defer b.mu.Unlock()
	var p Progress
	for _, q := range b.parts {
		p = p.add(q)
	}
	now := time.Now()
	dt := now.Sub(b.prevT).Seconds()
	rate := func(cur, prev uint64) float64 {
		if dt <= 0 {
			return 0
		}
		return float64(cur-prev) / dt
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "[%5.0fs] conn %d  req %d (%.0f/s)", now.Sub(b.start).Seconds(), p.Connected, p.Requests, rate(p.Requests, b.prev.Requests))
	if p.Sent > 0 {
		fmt.Fprintf(&sb, "  sent %d (%.0f/s)  acked %d  delivered %d (%.0f/s)", p.Sent, rate(p.Sent, b.prev.Sent), p.Acked, p.Delivered, rate(p.Delivered, b.prev.Delivered))
	}
	fmt.Fprintf(&sb, "  errors %d", p.Errors)
	if b.srv != nil {
		s := b.srv.latest()
		fmt.Fprintf(&sb, "  | server cpu %.0f%% rss %s", s.CPUPercent, mib(s.RSS))
	}
	sb.WriteByte('\n')
	io.WriteString(b.out, sb.String())
	b.prev, b.prevT = p, now
}

package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"time"
)

// The worker protocol: JSON lines both ways, over a worker process's
// stdin/stdout (--procs) or a TCP connection (--workers, NSQ style).
//
//	coordinator → worker: {"type":"job","job":CONFIG}, later {"type":"start"} or {"type":"stop"}
//	worker → coordinator: {"type":"ready"}, {"type":"progress","progress":…} each second,
//	                      then {"type":"result","report":…,"error":"…"} or {"type":"error","error":"…"}
//
// The job is the worker's share of the run (its -c and -t, its user
// prefix). Workers set up (users, connections), say ready, and begin the
// timed phase together on start, so their reports merge into one run.
type linkMsg struct {
	Type     string    `json:"type"`
	Job      *Config   `json:"job,omitempty"`
	Progress *Progress `json:"progress,omitempty"`
	Report   *Report   `json:"report,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// lineWriter serializes messages from several goroutines.
type lineWriter struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (w *lineWriter) send(m linkMsg) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.enc.Encode(m)
}

// ServeWorker runs one job received on r, answering on w: the worker side
// of the protocol above. It returns when the job is done, or when r ends
// (the coordinator went away: the job is canceled).
func ServeWorker(ctx context.Context, r io.Reader, w io.Writer) error {
	dec := json.NewDecoder(bufio.NewReader(r))
	out := &lineWriter{enc: json.NewEncoder(w)}
	var m linkMsg
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("bench worker: read job: %w", err)
	}
	if m.Type != "job" || m.Job == nil {
		return errors.New("bench worker: expected a job")
	}
	cfg := *m.Job
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	start := make(chan struct{})
	go func() {
		var once sync.Once
		for {
			var m linkMsg
			if err := dec.Decode(&m); err != nil {
				cancel()
				return
			}
			switch m.Type {
			case "start":
				once.Do(func() { close(start) })
			case "stop":
				cancel()
			}
		}
	}()
	rep, err := runShare(ctx, cfg, shareHooks{
		ready: func(ctx context.Context) error {
			if err := out.send(linkMsg{Type: "ready"}); err != nil {
				return err
			}
			select {
			case <-start:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		},
		progress: func(p Progress) { _ = out.send(linkMsg{Type: "progress", Progress: &p}) },
	})
	res := linkMsg{Type: "result", Report: rep}
	if rep == nil {
		res.Type = "error"
	}
	if err != nil {
		res.Error = err.Error()
	}
	return out.send(res)
}

// ServeWorkers accepts coordinators on ln and runs each one's job, until
// ctx ends or ln is closed (`parley bench worker --listen ADDR`).
func ServeWorkers(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			_ = ServeWorker(ctx, c, c)
		}()
	}
}

// link is the coordinator's end of one worker.
type link struct {
	name string
	out  *lineWriter
	in   *json.Decoder
	stop func() // ends the link (and the process, for --procs)
}

func openLinks(ctx context.Context, o Options, n int) ([]*link, error) {
	var links []*link
	fail := func(err error) ([]*link, error) {
		for _, l := range links {
			l.stop()
		}
		return nil, err
	}
	for i := range n {
		if len(o.Workers) > 0 {
			var d net.Dialer
			c, err := d.DialContext(ctx, "tcp", o.Workers[i])
			if err != nil {
				return fail(fmt.Errorf("worker %s: %w", o.Workers[i], err))
			}
			links = append(links, &link{name: o.Workers[i], out: &lineWriter{enc: json.NewEncoder(c)},
				in: json.NewDecoder(bufio.NewReader(c)), stop: func() { c.Close() }})
			continue
		}
		argv := o.WorkerCommand
		if len(argv) == 0 {
			exe, err := os.Executable()
			if err != nil {
				return fail(err)
			}
			argv = []string{exe, "bench", "worker", "--stdio"}
		}
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return fail(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return fail(err)
		}
		if err := cmd.Start(); err != nil {
			return fail(fmt.Errorf("start worker: %w", err))
		}
		links = append(links, &link{name: fmt.Sprintf("worker process %d", cmd.Process.Pid),
			out: &lineWriter{enc: json.NewEncoder(stdin)}, in: json.NewDecoder(bufio.NewReader(stdout)),
			stop: func() {
				stdin.Close() // the worker cancels its job when its input ends
				done := make(chan struct{})
				go func() { cmd.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(10 * time.Second):
					cmd.Process.Kill()
					<-done
				}
			}})
	}
	return links, nil
}

// runDistributed runs cfg on n workers (local processes or remote) and
// merges their reports.
func runDistributed(ctx context.Context, cfg Config, o Options, n int, onStart func(), board *progressBoard) (*Report, error) {
	links, err := openLinks(ctx, o, n)
	if err != nil {
		return nil, err
	}
	defer func() {
		for _, l := range links {
			l.stop()
		}
	}()
	type event struct {
		i   int
		msg linkMsg
		err error
	}
	events := make(chan event, 64)
	for i, l := range links {
		job := cfg.share(i, n)
		if err := l.out.send(linkMsg{Type: "job", Job: &job}); err != nil {
			return nil, fmt.Errorf("%s: %w", l.name, err)
		}
		go func() {
			for {
				var m linkMsg
				if err := l.in.Decode(&m); err != nil {
					events <- event{i: i, err: err}
					return
				}
				events <- event{i: i, msg: m}
				if m.Type == "result" || m.Type == "error" {
					return
				}
			}
		}()
	}
	stopAll := func() {
		for _, l := range links {
			_ = l.out.send(linkMsg{Type: "stop"})
		}
	}
	ready, finished := 0, 0
	reports := make([]*Report, n)
	var errs []error
	started := false
	ctxDone := ctx.Done()
	for finished < n {
		select {
		case <-ctxDone:
			stopAll() // the workers end their timed phase and report
			ctxDone = nil
			continue
		case ev := <-events:
			l := links[ev.i]
			if ev.err != nil {
				finished++
				errs = append(errs, fmt.Errorf("%s: link ended without a result: %w", l.name, ev.err))
				stopAll()
				continue
			}
			switch ev.msg.Type {
			case "ready":
				if ready++; ready == n && !started {
					started = true
					onStart()
					for _, l := range links {
						_ = l.out.send(linkMsg{Type: "start"})
					}
				}
			case "progress":
				board.set(ev.i, *ev.msg.Progress)
			case "result", "error":
				finished++
				reports[ev.i] = ev.msg.Report
				if ev.msg.Error != "" {
					errs = append(errs, fmt.Errorf("%s: %s", l.name, ev.msg.Error))
				}
				if ev.msg.Type == "error" {
					stopAll() // a worker failed its setup: the run cannot be whole
				}
			}
		}
	}
	var rep *Report
	for _, r := range reports {
		if r == nil {
			continue
		}
		if rep == nil {
			rep = r
		} else {
			rep.merge(r)
		}
	}
	return rep, errors.Join(errs...)
}

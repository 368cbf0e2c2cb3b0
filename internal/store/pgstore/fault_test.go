package pgstore

import (
	"context"
	"errors"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// proxy is a TCP proxy to PostgreSQL that a test can cut (connections
// refused), stall (connections accepted, nothing forwarded) and restore.
type proxy struct {
	t      *testing.T
	target string
	addr   string

	mu      sync.Mutex
	ln      net.Listener  // nil while cut
	conns   []net.Conn    // guarded by mu
	stalled bool          // guarded by mu
	resume  chan struct{} // closed and replaced when a stall ends; guarded by mu
}

func startProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target, resume: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) serve(ln net.Listener) {
	p.ln = ln
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns = append(p.conns, c)
			p.mu.Unlock()
			go p.forward(c)
		}
	}()
}

func (p *proxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, up)
	p.mu.Unlock()
	go p.pipe(up, c)
	p.pipe(c, up)
}

// pipe copies src to dst, holding data back while the proxy is stalled.
func (p *proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			stalled, resume := p.stalled, p.resume
			p.mu.Unlock()
			if stalled {
				<-resume
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF or closed: the other direction ends too
			return
		}
	}
}

// cut closes the listener and every connection: the database is gone.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	if p.stalled {
		p.stalled = false
		close(p.resume)
		p.resume = make(chan struct{})
	}
}

// restore listens again on the same address.
func (p *proxy) restore() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy listening again on %s: %v", p.addr, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.serve(ln)
}

// stall stops forwarding: the network is partitioned but nothing is refused.
func (p *proxy) stall() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stalled = true
}

// proxied starts a proxy to raw's host and returns raw pointed at it.
func proxied(t *testing.T, raw string) (*proxy, string) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Skip("PARLEY_TEST_PG is not a postgres:// URL with a host; the outage tests need one")
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	p := startProxy(t, target)
	u.Host = p.addr
	return p, u.String()
}

func wantUnavailable(t *testing.T, what string, err error, start time.Time, bound time.Duration) {
	t.Helper()
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("%s: %v, want an error wrapping ErrUnavailable", what, err)
	}
	var temp interface{ Temporary() bool }
	if !errors.As(err, &temp) || !temp.Temporary() {
		t.Fatalf("%s: %v has no Temporary() true", what, err)
	}
	if d := time.Since(start); d > bound {
		t.Fatalf("%s took %v, want under %v", what, d, bound)
	}
}

// TestPGOutageFailsFastAndRecovers: with the database cut off (refused) or
// partitioned (stalled), calls fail within the timeouts with a temporary
// error, Ping says not ready, and the pool serves again by itself once the
// database is back, continuing the seqs.
func TestPGOutageFailsFastAndRecovers(t *testing.T) {
	raw := testURL(t)
	p, through := proxied(t, raw)
	schema := freshSchema(t, raw)
	ctx := context.Background()
	s, err := Open(ctx, through, Options{Schema: schema, Logger: quiet, ConnectTimeout: time.Second, QueryTimeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	mustAppend(t, s, message("c1", "alice", "bob", "1"))

	for _, outage := range []struct {
		name  string
		start func()
		bound time.Duration // the timeout that ends each call, with slack for a loaded machine
	}{
		{"refused", p.cut, time.Second + 2*time.Second},     // ConnectTimeout at most
		{"stalled", p.stall, 2*time.Second + 2*time.Second}, // QueryTimeout
	} {
		t.Run(outage.name, func(t *testing.T) {
			outage.start()
			start := time.Now()
			wantUnavailable(t, "Ping", s.Ping(ctx), start, outage.bound)
			start = time.Now()
			_, err := s.Append(ctx, []*pb.Message{message("c1", "alice", "bob", "during-"+outage.name)})
			wantUnavailable(t, "Append", err, start, outage.bound)
			start = time.Now()
			_, err = s.Messages(ctx, "c1", 0, 10)
			wantUnavailable(t, "Messages", err, start, outage.bound)

			p.cut() // drop the stalled connections too
			p.restore()
			deadline := time.Now().Add(15 * time.Second)
			for s.Ping(ctx) != nil {
				if time.Now().After(deadline) {
					t.Fatal("Ping still failing 15 s after the database came back")
				}
				time.Sleep(20 * time.Millisecond)
			}
			// The failed send is retried, as a client would.
			res, err := s.Append(ctx, []*pb.Message{message("c1", "alice", "bob", "during-"+outage.name)})
			if err != nil {
				t.Fatalf("Append after recovery: %v", err)
			}
			got, err := s.Messages(ctx, "c1", 0, 100)
			if err != nil || len(got) == 0 || res[0].Msg.Seq != uint64(len(got)) || got[len(got)-1].ClientMsgId != "during-"+outage.name {
				t.Fatalf("after recovery: seq %d, stored %v, %v", res[0].Msg.Seq, seqsOf(got), err)
			}
			for i, m := range got {
				if m.Seq != uint64(i+1) {
					t.Fatalf("seqs %v after an outage, want no gaps", seqsOf(got))
				}
			}
		})
	}
}

// TestOpenUnreachableFailsFast needs no database: Open against a port that
// refuses, and one that accepts but never answers, fails within the
// connect timeout with a temporary error.
func TestOpenUnreachableFailsFast(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		var held []net.Conn // accepted and never answered
		defer func() {
			for _, c := range held {
				_ = c.Close()
			}
		}()
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	for name, addr := range map[string]string{"refused": "127.0.0.1:1", "silent": silent.Addr().String()} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			s, err := Open(context.Background(), "postgres://parley@"+addr+"/parley?sslmode=disable",
				Options{Logger: quiet, ConnectTimeout: 500 * time.Millisecond})
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded without a database")
			}
			wantUnavailable(t, "Open", err, start, 3*time.Second)
		})
	}
}

// TestPGReadOnlyDatabaseIsNotReady: a node whose database only accepts
// reads (a standby, or a primary set read-only during a failover) opens an
// up-to-date schema, serves reads, and reports Ping and Append as
// temporarily unavailable rather than ready.
func TestPGReadOnlyDatabaseIsNotReady(t *testing.T) {
	raw := testURL(t)
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		t.Skip("PARLEY_TEST_PG is not a postgres:// URL; this test adds a parameter to it")
	}
	schema := freshSchema(t, raw)
	rw := openSchema(t, raw, schema)
	t.Cleanup(func() { _ = rw.Close() })
	mustAppend(t, rw, message("c1", "alice", "bob", "1"))

	q := u.Query()
	q.Set("default_transaction_read_only", "on")
	u.RawQuery = q.Encode()
	ro := openSchema(t, u.String(), schema)
	t.Cleanup(func() { _ = ro.Close() })
	ctx := context.Background()
	if got, err := ro.Messages(ctx, "c1", 0, 10); err != nil || len(got) != 1 {
		t.Fatalf("read on a read-only database = %v, %v", got, err)
	}
	start := time.Now()
	wantUnavailable(t, "Ping", ro.Ping(ctx), start, 5*time.Second)
	_, err = ro.Append(ctx, []*pb.Message{message("c1", "alice", "bob", "2")})
	wantUnavailable(t, "Append", err, start, 5*time.Second)
	if err := rw.Ping(ctx); err != nil {
		t.Fatalf("Ping of the writable node: %v", err)
	}
}

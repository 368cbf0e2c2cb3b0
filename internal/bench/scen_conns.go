package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// connsScenario opens -c idle authenticated connections (-t dialing at
// once), holds them for --hold, and closes them. The coordinator samples
// the server's RSS before and while they are held: the memory per
// connection. Connections are raw (no SDK goroutines or buffers), so the
// load side stays small; --source-ips spreads them over source addresses.
type connsScenario struct {
	tokens []string
	mu     sync.Mutex // guards conns
	conns  []*rawConn
	wg     sync.WaitGroup
}

func (s *connsScenario) Setup(ctx context.Context, e *Env) error {
	ids := make([]string, e.Cfg.Count)
	for i := range ids {
		ids[i] = e.UserID("c", i)
	}
	var err error
	s.tokens, err = e.MintTokens(ctx, ids)
	return err
}

func (s *connsScenario) Run(ctx context.Context, e *Env) error {
	// Dialing ignores the end of the timed phase: the scenario's figure
	// needs every connection up; --timeout still bounds it.
	dctx := context.WithoutCancel(ctx)
	_ = parallel(dctx, len(s.tokens), e.Cfg.Concurrency, func(_ context.Context, i int) error {
		if !e.Take(dctx) {
			return nil
		}
		cctx, cancel := context.WithTimeout(dctx, 10*time.Second)
		defer cancel()
		t0 := time.Now()
		c, err := e.dialRaw(cctx, s.tokens[i], "d0")
		e.M.done(time.Since(t0), err)
		if err != nil {
			return nil // counted; the others go on
		}
		e.M.connected.Add(1)
		s.mu.Lock()
		s.conns = append(s.conns, c)
		s.mu.Unlock()
		s.wg.Add(1)
		go s.idle(e, c)
		return nil
	})
	e.MarkEnd()
	hold := time.NewTimer(e.Cfg.Hold)
	defer hold.Stop()
	select {
	case <-hold.C:
	case <-ctx.Done(): // --duration, when given, caps the hold
	}
	return nil
}

// idle keeps one connection alive: it reads (pongs, a disconnect) and pings
// when nothing arrived for the heartbeat interval.
func (s *connsScenario) idle(e *Env, c *rawConn) {
	defer s.wg.Done()
	hb := time.Duration(c.authOk.GetHeartbeatSeconds()) * time.Second
	if hb <= 0 {
		hb = 30 * time.Second
	}
	for {
		c.conn.SetReadDeadline(time.Now().Add(hb))
		f, err := c.read()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			if c.write(&pb.ClientFrame{Id: 2, Body: &pb.ClientFrame_Ping{Ping: &pb.Ping{}}}) == nil && c.flush() == nil {
				continue
			}
		}
		if err != nil {
			e.M.connected.Add(-1)
			return
		}
		if d := f.GetDisconnect(); d != nil {
			e.Note(fmt.Sprintf("the server closed held connections: %s", d.GetCode()))
		}
	}
}

func (s *connsScenario) Finish(ctx context.Context, e *Env, r *Report) error {
	held := int(e.M.connected.Load())
	r.Conns = &Conns{Target: uint64(e.Cfg.Count), Held: uint64(max(held, 0))}
	s.mu.Lock()
	for _, c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// pushScenario is goim's push benchmark (ApacheBench on /push/mids) with the
// delivery checked: -t receivers are online, -t pushers each POST pushes to
// their receiver through the admin push API, one request at a time; a
// request is timed until its HTTP answer (the push queued on the receiver's
// session). Every push must reach its receiver once, in order.
type pushScenario struct {
	hc        *client.Admin
	receivers []*client.Client
	streams   []*stream
}

// errNotDelivered: the push API answered that no session took the push.
var errNotDelivered = errors.New("push reached no session")

func (s *pushScenario) Setup(ctx context.Context, e *Env) error {
	n := e.Cfg.Concurrency
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = n // one kept-alive connection per pusher, as ab -k
	tr.MaxIdleConns = n
	s.hc = &client.Admin{HTTP: client.HTTPClient{BaseURL: e.Cfg.HTTPBase, Client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, Key: e.Cfg.APIKey}
	ids := make([]string, n)
	for i := range n {
		ids[i] = e.UserID("r", i)
		s.streams = append(s.streams, &stream{id: uint32(i), from: "push", to: ids[i], online: true})
	}
	toks, err := e.MintTokens(ctx, ids)
	if err != nil {
		return err
	}
	s.receivers = make([]*client.Client, n)
	return parallel(ctx, n, setupParallel, func(ctx context.Context, i int) error {
		o := e.ClientOptions(toks[i], "d0")
		st := s.streams[i]
		o.OnPush = func(p *pb.Push) {
			id, k, sentAt, ok := parsePayload(p.Body)
			if !ok || id != st.id {
				e.Note("pushes that were not this run's arrived (counted nowhere)")
				return
			}
			st.onReceive(k, k) // pushes have no seq: their number is their order
			e.M.received(sentAt)
		}
		c, err := e.Dial(ctx, o)
		if err != nil {
			return fmt.Errorf("connect %s: %w", ids[i], err)
		}
		s.receivers[i] = c
		return nil
	})
}

func (s *pushScenario) Run(ctx context.Context, e *Env) error {
	var wg sync.WaitGroup
	for i, st := range s.streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			var k uint64
			target := client.PushTarget{UserIDs: []string{s.streams[i].to}}
			for e.Take(ctx) {
				k++
				buf = makePayload(buf, e.Cfg.Size, st.id, k)
				e.M.sent.Add(1)
				t0 := time.Now()
				n, err := s.hc.Push(context.WithoutCancel(ctx), target, 1, buf)
				if err == nil && n != 1 {
					err = errNotDelivered
				}
				e.M.done(time.Since(t0), err)
				if err == nil {
					e.M.acked.Add(1)
					st.onAck(k, k)
				}
			}
		}()
	}
	wg.Wait()
	return nil
}

func (s *pushScenario) Finish(ctx context.Context, e *Env, r *Report) error {
	d := drain(ctx, e, s.streams)
	r.Delivery = &d
	for _, c := range s.receivers {
		e.Close(c)
	}
	return nil
}

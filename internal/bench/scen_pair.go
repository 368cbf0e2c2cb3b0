package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// pairScenario is kimbench's user (1:1) and WuKongIM's soak.
//
// user: -t pairs; each request is one send from a pair's sender to its
// receiver, timed until its ack (stored durably). The first -p share of
// receivers are online, and every acked message must reach them once, in
// order.
//
// soak: -t pairs of online users who message each other at --rate each
// until --duration ends, with the same checks in both directions while the
// server's CPU and memory are sampled.
type pairScenario struct {
	soak    bool
	users   []*pairUser
	streams []*stream
	// bare counts received messages without the attachment --attach sends.
	bare atomic.Uint64
}

// pairUser is one connected (or offline) user and the streams it sends.
type pairUser struct {
	id    string
	token string
	c     *client.Client // nil: offline
	out   []*stream
	// file is what each of its sends carries (--attach).
	file []*pb.Attachment
}

func (s *pairScenario) Setup(ctx context.Context, e *Env) error {
	n := e.Cfg.Concurrency
	online := n
	if !s.soak {
		online = int(math.Round(e.Cfg.Online * float64(n)))
	}
	if online < n {
		e.Note("messages to offline receivers are acked (stored) but not checked for delivery")
	}
	s.users = make([]*pairUser, 2*n)
	ids := make([]string, 2*n)
	for i := range n {
		a, b := &pairUser{id: e.UserID("a", i)}, &pairUser{id: e.UserID("b", i)}
		s.users[2*i], s.users[2*i+1] = a, b
		ids[2*i], ids[2*i+1] = a.id, b.id
		// --pipeline streams per sender: each is sequential (so its order can
		// be checked), together they keep that many sends in flight.
		for range max(1, e.Cfg.Pipeline) {
			st := &stream{id: uint32(len(s.streams)), from: a.id, to: b.id, online: i < online}
			s.streams = append(s.streams, st)
			a.out = append(a.out, st)
		}
		if s.soak {
			st := &stream{id: uint32(len(s.streams)), from: b.id, to: a.id, online: true}
			s.streams = append(s.streams, st)
			b.out = append(b.out, st)
		}
	}
	toks, err := e.MintTokens(ctx, ids)
	if err != nil {
		return err
	}
	return parallel(ctx, 2*n, setupParallel, func(ctx context.Context, i int) error {
		u := s.users[i]
		u.token = toks[i]
		if !s.soak && i%2 == 1 && i/2 >= online {
			return nil // an offline receiver
		}
		if e.Cfg.Attach && len(u.out) > 0 {
			data := benchFile(1024)
			a, err := e.http.UploadFile(ctx, u.token, "bench.bin", bytes.NewReader(data), int64(len(data)))
			if err != nil {
				return fmt.Errorf("upload for %s: %w", u.id, err)
			}
			u.file = []*pb.Attachment{{Id: a.Id}}
		}
		o := e.ClientOptions(u.token, "d0")
		o.AutoDeliveredAck = e.Cfg.DeliveredAck
		o.OnMessage = receiver(e, s.streams, u.id)
		if e.Cfg.Attach {
			check := o.OnMessage
			o.OnMessage = func(m *pb.Message) {
				if len(m.Attachments) != 1 || m.Attachments[0].Size != 1024 {
					s.bare.Add(1)
				}
				check(m)
			}
		}
		c, err := e.Dial(ctx, o)
		if err != nil {
			return fmt.Errorf("connect %s: %w", u.id, err)
		}
		u.c = c
		return nil
	})
}

// receiver returns the OnMessage handler of user me: it checks each bench
// message against its stream.
func receiver(e *Env, streams []*stream, me string) func(*pb.Message) {
	return func(m *pb.Message) {
		id, k, sentAt, ok := parsePayload(m.Payload)
		if !ok || int(id) >= len(streams) || streams[id].to != me || streams[id].from != m.From {
			e.Note("messages that were not this run's arrived (counted nowhere)")
			return
		}
		streams[id].onReceive(k, m.Seq)
		e.M.received(sentAt)
	}
}

func (s *pairScenario) Run(ctx context.Context, e *Env) error {
	var wg sync.WaitGroup
	for _, u := range s.users {
		for _, st := range u.out {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.send(ctx, e, u, st)
			}()
		}
	}
	wg.Wait()
	return nil
}

// send is one stream's sender loop: one message at a time, each waiting
// for its ack; paced at --rate in soak.
func (s *pairScenario) send(ctx context.Context, e *Env, u *pairUser, st *stream) {
	var interval time.Duration
	switch {
	case s.soak && e.Cfg.Rate > 0: // per user
		interval = time.Duration(float64(time.Second) / e.Cfg.Rate)
	case e.Cfg.Rate > 0: // user: of all streams together
		interval = time.Duration(float64(time.Second) * float64(len(s.streams)) / e.Cfg.Rate)
	}
	next := time.Now()
	if interval > 0 {
		next = next.Add(rand.N(interval)) // spread the senders' phases
	}
	var buf []byte
	var k uint64
	for e.Take(ctx) {
		if interval > 0 {
			if !sleepUntil(ctx, next) {
				return
			}
			next = next.Add(interval)
		}
		k++
		buf = makePayload(buf, e.Cfg.Size, st.id, k)
		e.M.sent.Add(1)
		t0 := time.Now()
		// An in-flight send outlives the timed phase: it ends with its ack
		// (or the request timeout), not as "canceled".
		ack, err := u.c.Send(context.WithoutCancel(ctx), &pb.Send{To: st.to, ContentType: "bench", Payload: buf, Attachments: u.file})
		e.M.done(time.Since(t0), err)
		if err == nil {
			e.M.acked.Add(1)
			st.onAck(k, ack.Seq)
		}
		if u.c.Err() != nil {
			e.Note(fmt.Sprintf("a sender's connection ended: %v", u.c.Err()))
			return
		}
	}
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (s *pairScenario) Finish(ctx context.Context, e *Env, r *Report) error {
	d := drain(ctx, e, s.streams)
	r.Delivery = &d
	if n := s.bare.Load(); n > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d messages arrived without their attachment", n))
	}
	for _, u := range s.users {
		if u.c != nil {
			e.Close(u.c)
		}
	}
	return nil
}

// drain waits (up to --drain) until every acked message has reached its
// online receiver, then tallies the checks.
func drain(ctx context.Context, e *Env, streams []*stream) Delivery {
	var expected uint64
	for _, st := range streams {
		if st.online {
			expected += st.ackedN
		}
	}
	ctx, cancel := context.WithTimeout(ctx, e.Cfg.Drain)
	defer cancel()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		// The cheap count first; the exact tally once it looks complete.
		if e.M.delivered.Load() >= expected {
			if d := tally(streams); d.Lost == 0 {
				return d
			}
		}
		select {
		case <-ctx.Done():
			return tally(streams)
		case <-t.C:
		}
	}
}

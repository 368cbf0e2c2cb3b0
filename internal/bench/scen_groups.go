package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/internal/chat"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// groupScenario runs the conversation scenarios:
//
// group (kimbench): -t senders, each the owner of its own group of -m
// members of which the -p share is online (the sender counts); each request
// is one group send until its ack (--pipeline streams per sender).
//
// send-rate (WuKongIM's send test): --groups groups of -m members, each with
// one sender and --group-online receivers online, at --rate messages/s in
// total (0: as fast as acks allow).
//
// fanout (WuKongIM's receive test): one group of -m members (made by the
// coordinator: see Plan), --online receivers connected over every process
// and -t senders (--pipeline streams each) sending -c messages, at --rate in
// total (0: as fast as acks allow).
//
// mixed (WuKongIM's mixed test): --pairs 1:1 pairs at --rate each, --groups
// groups of --group-size at --group-rate each, and fanout's big group at
// --big-rate, all at once; each part is reported on its own.
//
// Receivers are raw connections, one goroutine each, decoding only what the
// checks read; senders are SDK clients (which also receive, and check, the
// other senders' streams of their group).
type groupScenario struct {
	kind     string
	e        *Env
	parts    []*part // mixed only
	senders  []*gsender
	raws     []*rawRecv
	endsWant int64
	endsGot  atomic.Int64
	active   atomic.Int64   // streams still in the timed phase
	ran      bool           // Run was called (Finish then drains)
	readers  sync.WaitGroup // raw receivers' reader goroutines
}

// part is one part of mixed, counted on its own besides the totals.
type part struct {
	name     string
	lat, e2e *Histogram
	sent     atomic.Uint64
	requests atomic.Uint64
	errors   atomic.Uint64
	lastRecv atomic.Int64
}

func (p *part) done(lat time.Duration, err error) {
	p.requests.Add(1)
	if err != nil {
		p.errors.Add(1)
		return
	}
	p.lat.Record(lat)
}

// gsender is one sending session and its streams.
type gsender struct {
	user    string
	conv    *gconv
	create  []string // members to create conv with (the sender owns it); nil: it exists
	streams []*gstream
	rx      *rxState // the other senders' streams (nil: there are none)
	c       *client.Client
	closed  chan struct{} // closed when c's reader has ended
	once    sync.Once
}

func (g *gsender) markClosed() { g.once.Do(func() { close(g.closed) }) }

// gstream is one ordered stream of sends: one in flight at a time.
type gstream struct {
	idx    uint32
	st     stream // its sender side: acked set and ack order
	sentK  uint64
	failed []uint64
}

// rawRecv is one receiving member on a raw connection.
type rawRecv struct {
	user    string
	rx      *rxState
	rc      *rawConn
	closing atomic.Bool
}

func (s *groupScenario) addSender(user string, c *gconv, create []string, firstStream, n int, receives bool) *gsender {
	g := &gsender{user: user, conv: c, create: create, closed: make(chan struct{})}
	for i := range n {
		g.streams = append(g.streams, &gstream{idx: uint32(firstStream + i)})
	}
	if receives {
		g.rx = newRx(c, user, &s.endsGot)
	}
	s.senders = append(s.senders, g)
	return g
}

func (s *groupScenario) addReceiver(user string, c *gconv) {
	s.raws = append(s.raws, &rawRecv{user: user, rx: newRx(c, user, &s.endsGot)})
}

// addGroups adds groups [lo, hi) of n members, each with its owner as
// sender and online receivers, created at setup; name makes user ids.
func (s *groupScenario) addGroups(lo, hi, n, online int, p *part, interval time.Duration, name func(g, i int) string) {
	cfg := s.e.Cfg
	for g := lo; g < hi; g++ {
		owner := name(g, 0)
		c := newConv("", "", p, []string{owner}, cfg.Pipeline, interval)
		members := make([]string, n-1)
		for i := range members {
			members[i] = name(g, i+1)
		}
		s.addSender(owner, c, members, 0, cfg.Pipeline, false)
		for i := 1; i <= online; i++ {
			s.addReceiver(name(g, i), c)
		}
	}
}

// addBig adds this process's slice of the plan's big group: its senders
// (members 0..-t-1) and receivers (the next --online).
func (s *groupScenario) addBig(p *part, rate float64) error {
	cfg := s.e.Cfg
	if cfg.Plan == nil || len(cfg.Plan.Groups) == 0 {
		return errors.New("no big group in the plan (the coordinator makes it)")
	}
	g := cfg.Plan.Groups[0]
	t, pipe := cfg.Concurrency, cfg.Pipeline
	senders := make([]string, t)
	for i := range senders {
		senders[i] = g.Member(i)
	}
	c := newConv(g.ConversationID, "", p, senders, pipe, streamInterval(rate, t*pipe))
	lo, hi := splitRange(t, cfg.Part, cfg.Parts)
	for j := lo; j < hi; j++ {
		s.addSender(senders[j], c, nil, j*pipe, pipe, t > 1)
	}
	lo, hi = splitRange(cfg.OnlineMembers, cfg.Part, cfg.Parts)
	for r := lo; r < hi; r++ {
		s.addReceiver(g.Member(t+r), c)
	}
	return nil
}

// build lays out this process's share: senders, streams and receivers.
func (s *groupScenario) build() error {
	cfg := s.e.Cfg
	pipe := cfg.Pipeline
	idx := func(prefix string) func(g, i int) string {
		return func(g, i int) string { return cfg.Prefix + prefix + strconv.Itoa(g) + "-" + strconv.Itoa(i) }
	}
	switch s.kind {
	case "group":
		online := max(1, int(math.Round(cfg.Online*float64(cfg.Members))))
		if online < cfg.Members {
			s.e.Note("messages to offline members are stored, not pushed: only online members are checked")
		}
		lo, hi := splitRange(cfg.Concurrency, cfg.Part, cfg.Parts)
		s.addGroups(lo, hi, cfg.Members, online-1, nil, streamInterval(cfg.Rate, cfg.Concurrency*pipe), idx("g"))
	case "send-rate":
		lo, hi := splitRange(cfg.Groups, cfg.Part, cfg.Parts)
		s.addGroups(lo, hi, cfg.Members, cfg.GroupOnline, nil, streamInterval(cfg.Rate, cfg.Groups*pipe), idx("g"))
	case "fanout":
		return s.addBig(nil, cfg.Rate)
	case "mixed":
		pairs := &part{name: "1:1", lat: NewHistogram(), e2e: NewHistogram()}
		groups := &part{name: "groups", lat: NewHistogram(), e2e: NewHistogram()}
		big := &part{name: "big group", lat: NewHistogram(), e2e: NewHistogram()}
		s.parts = []*part{pairs, groups, big}
		lo, hi := splitRange(cfg.Pairs, cfg.Part, cfg.Parts)
		for j := lo; j < hi; j++ {
			a, b := cfg.Prefix+"p"+strconv.Itoa(j)+"a", cfg.Prefix+"p"+strconv.Itoa(j)+"b"
			c := newConv(chat.DirectID(a, b), b, pairs, []string{a}, pipe, streamInterval(cfg.Rate, pipe))
			s.addSender(a, c, nil, 0, pipe, false)
			s.addReceiver(b, c)
		}
		lo, hi = splitRange(cfg.Groups, cfg.Part, cfg.Parts)
		s.addGroups(lo, hi, cfg.GroupSize, cfg.GroupOnline, groups, streamInterval(cfg.GroupRate, pipe), idx("g"))
		return s.addBig(big, cfg.BigRate)
	default:
		return fmt.Errorf("unknown scenario %q", s.kind)
	}
	return nil
}

func (s *groupScenario) Setup(ctx context.Context, e *Env) error {
	s.e = e
	if err := s.build(); err != nil {
		return err
	}
	ids := make([]string, 0, len(s.senders)+len(s.raws))
	for _, g := range s.senders {
		ids = append(ids, g.user)
	}
	for _, r := range s.raws {
		ids = append(ids, r.user)
	}
	toks, err := e.MintTokens(ctx, ids)
	if err != nil {
		return err
	}
	// Senders connect and create their groups, then receivers connect: the
	// groups' own events (created, members added) are pushed before they
	// are online, and nothing of the run's is sent before all are.
	err = parallel(ctx, len(s.senders), setupParallel, func(ctx context.Context, i int) error {
		g := s.senders[i]
		o := e.ClientOptions(toks[i], "d0")
		o.OnClose = func(error) { g.markClosed() }
		if rx := g.rx; rx != nil {
			o.AutoDeliveredAck = e.Cfg.DeliveredAck
			o.OnMessage = func(m *pb.Message) {
				rx.handle(e, bytesOf(m.ConversationId), bytesOf(m.From), m.Payload, m.Seq, m.Kind, time.Now())
				rx.flush(e, time.Now())
			}
		}
		c, err := e.Dial(ctx, o)
		if err != nil {
			g.markClosed()
			return fmt.Errorf("connect %s: %w", g.user, err)
		}
		g.c = c
		if g.create != nil {
			id, err := createGroup(ctx, c, "bench "+s.kind, g.create)
			if err != nil {
				return fmt.Errorf("%s: %w", g.user, err)
			}
			g.conv.id = id
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, g := range s.senders {
		if g.rx != nil {
			s.endsWant += g.rx.wantEnds()
		}
	}
	for _, r := range s.raws {
		s.endsWant += r.rx.wantEnds()
	}
	toks = toks[len(s.senders):]
	return parallel(ctx, len(s.raws), setupParallel, func(ctx context.Context, i int) error {
		r := s.raws[i]
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		rc, err := e.dialRaw(dctx, toks[i], "d0")
		if err != nil {
			return fmt.Errorf("connect receiver %s: %w", r.user, err)
		}
		r.rc = rc
		e.M.connected.Add(1)
		s.readers.Add(1)
		go s.receive(e, r)
		return nil
	})
}

// bytesOf views s as bytes, for the checks' read-only use.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// receive is a raw receiver's reader: it checks each pushed message, acks
// the received seq after each burst (--ack) and pings when it has sent
// nothing for half the heartbeat interval.
func (s *groupScenario) receive(e *Env, r *rawRecv) {
	defer s.readers.Done()
	defer e.M.connected.Add(-1)
	rc, rx := r.rc, r.rx
	hb := time.Duration(rc.authOk.GetHeartbeatSeconds()) * time.Second
	if hb <= 0 {
		hb = 30 * time.Second
	}
	lastWrite := time.Now()
	var acked uint64
	write := func(f *pb.ClientFrame, now time.Time) error {
		rc.conn.SetWriteDeadline(now.Add(10 * time.Second))
		if err := rc.write(f); err != nil {
			return err
		}
		if err := rc.flush(); err != nil {
			return err
		}
		lastWrite = now
		return rc.conn.SetReadDeadline(now.Add(hb / 2))
	}
	rc.conn.SetReadDeadline(lastWrite.Add(hb / 2))
	var m pushedMsg
	var err error
	for {
		var p []byte
		var codec wire.Codec
		p, codec, err = rc.readPayload()
		now := time.Now()
		if err != nil {
			var ne net.Error
			if r.closing.Load() {
				err = nil
				break
			}
			if errors.As(err, &ne) && ne.Timeout() {
				if err = write(&pb.ClientFrame{Body: &pb.ClientFrame_Ping{Ping: &pb.Ping{}}}, now); err == nil {
					continue
				}
			}
			break
		}
		if codec == wire.Proto && parsePushed(p, &m) {
			rx.handle(e, m.conv, m.from, m.payload, m.seq, m.kind, now)
		} else {
			f := new(pb.ServerFrame)
			if err = wire.DecodeServer(codec, p, f); err != nil {
				break
			}
			if msg := f.GetMessage(); msg != nil {
				rx.handle(e, bytesOf(msg.ConversationId), bytesOf(msg.From), msg.Payload, msg.Seq, msg.Kind, now)
			} else if d := f.GetDisconnect(); d != nil {
				err = fmt.Errorf("disconnected by the server: %s", d.GetCode())
				break
			}
		}
		if rc.br.Buffered() > 0 {
			continue // the burst goes on
		}
		rx.flush(e, now)
		switch {
		case e.Cfg.DeliveredAck && rx.lastSeq > acked:
			acked = rx.lastSeq
			err = write(&pb.ClientFrame{Body: &pb.ClientFrame_Delivered{Delivered: &pb.DeliveredAck{ConversationId: rx.conv.id, Seq: acked}}}, now)
		case now.Sub(lastWrite) > hb/2:
			err = write(&pb.ClientFrame{Body: &pb.ClientFrame_Ping{Ping: &pb.Ping{}}}, now)
		}
		if err != nil {
			break
		}
	}
	rx.flush(e, time.Now())
	if err != nil && !r.closing.Load() {
		e.Note(fmt.Sprintf("a receiver's connection ended during the run: %v", err))
	}
	rc.close()
}

func (s *groupScenario) Run(ctx context.Context, e *Env) error {
	s.ran = true
	var wg sync.WaitGroup
	for _, g := range s.senders {
		s.active.Add(int64(len(g.streams)))
	}
	for _, g := range s.senders {
		for _, st := range g.streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.send(ctx, e, g, st)
			}()
		}
	}
	wg.Wait()
	return nil
}

// send is one stream's loop: one message at a time, each until its ack,
// paced by the conversation's interval; then the stream's end marker.
func (s *groupScenario) send(ctx context.Context, e *Env, g *gsender, st *gstream) {
	c, p := g.conv, g.conv.part
	next := time.Now()
	if c.interval > 0 {
		next = next.Add(rand.N(c.interval)) // spread the streams' phases
	}
	var buf []byte
	for !e.Cfg.SendNone && e.Take(ctx) {
		if c.interval > 0 {
			if !sleepUntil(ctx, next) {
				break
			}
			next = next.Add(c.interval)
		}
		st.sentK++
		k := st.sentK
		buf = makePayload(buf, e.Cfg.Size, st.idx, k)
		e.M.sent.Add(1)
		if p != nil {
			p.sent.Add(1)
		}
		m := &pb.Send{ContentType: "bench", Payload: buf}
		if c.to != "" {
			m.To = c.to
		} else {
			m.ConversationId = c.id
		}
		t0 := time.Now()
		// An in-flight send outlives the timed phase: it ends with its ack
		// (or the request timeout), not as "canceled".
		ack, err := g.c.Send(context.WithoutCancel(ctx), m)
		lat := time.Since(t0)
		e.M.done(lat, err)
		if p != nil {
			p.done(lat, err)
		}
		if err == nil {
			e.M.acked.Add(1)
			st.st.onAck(k, ack.Seq)
		} else {
			st.failed = append(st.failed, k)
		}
		if g.c.Err() != nil {
			e.Note(fmt.Sprintf("a sender's connection ended: %v", g.c.Err()))
			break
		}
	}
	if s.active.Add(-1) == 0 {
		e.MarkEnd() // the end markers are not part of the timed phase
	}
	s.sendEnd(ctx, e, g, st)
}

// sendEnd sends the stream's end marker, retrying with the same client
// message id (stored at most once) on timeouts.
func (s *groupScenario) sendEnd(ctx context.Context, e *Env, g *gsender, st *gstream) {
	end := &streamEnd{last: st.sentK, failed: st.failed}
	if len(st.failed) > maxEndFailed {
		e.Note(fmt.Sprintf("a stream had more than %d failed sends: receivers count some of them as lost", maxEndFailed))
	}
	g.conv.ends[st.idx].CompareAndSwap(nil, end) // this process's receivers need not wait for the marker
	m := &pb.Send{ClientMsgId: "bench-end-" + strconv.Itoa(int(st.idx)), ContentType: "bench-end", Payload: makeEnd(st.idx, end)}
	if g.conv.to != "" {
		m.To = g.conv.to
	} else {
		m.ConversationId = g.conv.id
	}
	mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	var err error
	for range 5 {
		if _, err = g.c.Send(mctx, m); err == nil || !errors.Is(err, client.ErrTimeout) && !client.IsCode(err, pb.ErrorCode_ERROR_CODE_UNAVAILABLE) {
			break
		}
	}
	if err != nil {
		e.Note(fmt.Sprintf("a stream's end marker was not acked (%v): its receivers cannot settle", err))
	}
}

// drain waits until every receiver here has every stream's end marker, or
// nothing has arrived for --drain, or ctx ends. Receivers in a process
// without senders wait here for the other processes' senders.
func (s *groupScenario) drain(ctx context.Context, e *Env) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	last, lastEnds := e.M.delivered.Load(), s.endsGot.Load()
	quietSince := time.Now()
	for s.endsGot.Load() < s.endsWant {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			d, n := e.M.delivered.Load(), s.endsGot.Load()
			if d != last || n != lastEnds {
				last, lastEnds, quietSince = d, n, now
			} else if now.Sub(quietSince) > e.Cfg.Drain {
				return
			}
		}
	}
}

func (s *groupScenario) Finish(ctx context.Context, e *Env, r *Report) error {
	if s.e == nil {
		return nil
	}
	if s.ran {
		s.drain(ctx, e)
	}
	for _, g := range s.senders {
		if g.c == nil {
			continue
		}
		e.Close(g.c)
		select {
		case <-g.closed:
		case <-time.After(5 * time.Second):
		}
	}
	for _, rr := range s.raws {
		if rr.rc != nil {
			rr.closing.Store(true)
			rr.rc.conn.SetReadDeadline(time.Now())
		}
	}
	s.readers.Wait()

	// Tally: totals, and mixed's parts.
	var tot Delivery
	byPart := map[*part]*Delivery{}
	acct := func(p *part) *Delivery {
		if p == nil {
			return nil
		}
		if byPart[p] == nil {
			byPart[p] = &Delivery{}
		}
		return byPart[p]
	}
	for _, g := range s.senders {
		for _, st := range g.streams {
			for _, d := range []*Delivery{&tot, acct(g.conv.part)} {
				if d != nil {
					d.Acked += st.st.ackedN
					d.AckOutOfOrder += st.st.ackDisord
				}
			}
		}
	}
	settle := func(rx *rxState) {
		if rx == nil {
			return
		}
		rx.settle(&tot)
		if d := acct(rx.conv.part); d != nil {
			rx.settle(d)
		}
	}
	for _, g := range s.senders {
		settle(g.rx)
	}
	for _, rr := range s.raws {
		if rr.rc != nil {
			settle(rr.rx)
		}
	}
	r.Delivery = &tot
	for _, p := range s.parts {
		d := acct(p)
		d.Sent = p.sent.Load()
		d.E2E = p.e2e
		if last := p.lastRecv.Load(); last != 0 {
			d.DeliverySeconds = time.Unix(0, last).Sub(e.start).Seconds()
		}
		req := p.requests.Load()
		r.Parts = append(r.Parts, &PartReport{Name: p.name, Requests: req, OK: req - p.errors.Load(), Latency: p.lat, Delivery: *d})
	}
	return nil
}

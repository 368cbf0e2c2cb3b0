package bench

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// streamScenario (parley bench stream): -t bots, each streaming messages to
// its own group of -m online members at --rate chunks/s (each a
// StreamAppend waited for), --chunks chunks a message (then StreamFinish
// and the next message), for --duration or -c chunks in all.
//
// Each chunk is --size bytes of ASCII starting with its send time, so the
// members (raw connections, one goroutine each) time its delivery; they
// check each stream's chunks arrive once, in order (by offset), and that
// its finished message arrives once with the whole text, which the chunks
// they got must add up to. At the end each bot reads its group's history:
// every finished message must be stored once, with the whole text.
//
// A group, its bot and its members are in one process: the load splits
// over processes by groups (-t).
type streamScenario struct {
	e          *Env
	groups     []*sgroup
	ran        bool
	readers    sync.WaitGroup
	finalsWant atomic.Int64 // finished messages × online members, as bots finish them
	finalsGot  atomic.Int64 // first arrivals of finished messages
	finishLat  *Histogram
}

// sgroup is one bot, its group and its members.
type sgroup struct {
	bot  string
	conv string
	c    *client.Client
	rx   []*srecv

	// The bot's goroutine's own; read after Run.
	streams                      map[string]*sstream // by stream id
	finished, finishFailed, late uint64
}

// sstream is what a bot wrote into one streamed message.
type sstream struct {
	chunks    int    // appends acked
	length    int    // their bytes
	hash      uint64 // FNV-1a of their text, in order
	uncertain bool   // an append got no answer: the text is not known for sure
	seq       uint64 // the stored message (StreamFinish acked), 0: not finished
}

// srecv is one online member on a raw connection. Its maps are owned by its
// reader goroutine and read once that has ended.
type srecv struct {
	user    string
	rc      *rawConn
	closing atomic.Bool
	tracks  map[string]*chunkTrack // stream id → the chunks received
	finals  map[string]*finalSeen  // stream id → the finished message
	other   uint64                 // messages of the group not from a stream (its creation)
}

// chunkTrack is one receiver's account of one stream's chunks.
type chunkTrack struct {
	next     uint32 // the offset the next chunk should have
	received int
	dup, ooo int
	hash     uint64 // FNV-1a of the chunk texts received in order
	inOrder  bool   // every chunk came at its offset (the hash is the text's)
}

// finalSeen is a finished message as a receiver got it.
type finalSeen struct {
	n      int
	length int
	hash   uint64
	chunks bool // its text splits into well-formed chunks numbered 0, 1, ...
}

// chunkHeader is the bytes of a chunk's header: 16 hex digits of its send
// time (unix ns), 7 of its number in the message, and '|'.
const chunkHeader = 24

// makeChunk fills b (len --size) with chunk k sent at t.
func makeChunk(b []byte, t time.Time, k int) {
	const hex = "0123456789abcdef"
	ns := uint64(t.UnixNano())
	for i := 15; i >= 0; i-- {
		b[i] = hex[ns&15]
		ns >>= 4
	}
	n := uint32(k)
	for i := 22; i >= 16; i-- {
		b[i] = hex[n&15]
		n >>= 4
	}
	b[23] = '|'
	for i := chunkHeader; i < len(b); i++ {
		b[i] = 'a' + byte((k+i)%26)
	}
}

// parseChunk reads a chunk's send time and number.
func parseChunk(b []byte) (sentAt int64, k int, ok bool) {
	if len(b) < chunkHeader || b[23] != '|' {
		return 0, 0, false
	}
	var ns, n uint64
	for i := range 23 {
		c := b[i]
		var v uint64
		switch {
		case c >= '0' && c <= '9':
			v = uint64(c - '0')
		case c >= 'a' && c <= 'f':
			v = uint64(c-'a') + 10
		default:
			return 0, 0, false
		}
		if i < 16 {
			ns = ns<<4 | v
		} else {
			n = n<<4 | v
		}
	}
	return int64(ns), int(n), true
}

// wellFormed says whether p is chunks of size bytes numbered 0, 1, ...
func wellFormed(p []byte, size int) bool {
	if len(p) == 0 || len(p)%size != 0 {
		return false
	}
	for k := 0; k*size < len(p); k++ {
		if _, n, ok := parseChunk(p[k*size : (k+1)*size]); !ok || n != k {
			return false
		}
	}
	return true
}

func fnvOf(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// fnvAdd continues an FNV-1a hash (start: fnvOf(nil)) over b.
func fnvAdd(h uint64, b []byte) uint64 {
	const prime = 1099511628211
	for _, c := range b {
		h ^= uint64(c)
		h *= prime
	}
	return h
}

var fnvStart = fnvOf(nil)

func (s *streamScenario) Setup(ctx context.Context, e *Env) error {
	s.e = e
	s.finishLat = NewHistogram()
	cfg := e.Cfg
	var ids []string
	for g := range cfg.Concurrency {
		sg := &sgroup{bot: e.UserID("bot", g), streams: map[string]*sstream{}}
		ids = append(ids, sg.bot)
		for i := range cfg.Members {
			r := &srecv{user: e.Cfg.Prefix + "s" + strconv.Itoa(g) + "-" + strconv.Itoa(i+1),
				tracks: map[string]*chunkTrack{}, finals: map[string]*finalSeen{}}
			sg.rx = append(sg.rx, r)
			ids = append(ids, r.user)
		}
		s.groups = append(s.groups, sg)
	}
	toks, err := e.MintTokens(ctx, ids)
	if err != nil {
		return err
	}
	admin := &client.Admin{HTTP: e.http, Key: cfg.APIKey}
	per := cfg.Members + 1
	// Bots get the role, connect and make their groups; then the members
	// connect (the groups' own events are not part of the run).
	err = parallel(ctx, len(s.groups), setupParallel, func(ctx context.Context, i int) error {
		g := s.groups[i]
		if _, err := admin.SetBot(ctx, g.bot, true); err != nil {
			return fmt.Errorf("give %s the bot role: %w", g.bot, err)
		}
		c, err := e.Dial(ctx, e.ClientOptions(toks[i*per], "d0"))
		if err != nil {
			return fmt.Errorf("connect %s: %w", g.bot, err)
		}
		g.c = c
		members := make([]string, len(g.rx))
		for j, r := range g.rx {
			members[j] = r.user
		}
		if g.conv, err = createGroup(ctx, c, "bench stream", members); err != nil {
			return fmt.Errorf("%s: %w", g.bot, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return parallel(ctx, len(s.groups)*cfg.Members, setupParallel, func(ctx context.Context, i int) error {
		g, r := s.groups[i/cfg.Members], s.groups[i/cfg.Members].rx[i%cfg.Members]
		dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		rc, err := e.dialRaw(dctx, toks[(i/cfg.Members)*per+1+i%cfg.Members], "d0")
		if err != nil {
			return fmt.Errorf("connect member %s: %w", r.user, err)
		}
		r.rc = rc
		e.M.connected.Add(1)
		s.readers.Add(1)
		go s.receive(e, g, r)
		return nil
	})
}

func (s *streamScenario) Run(ctx context.Context, e *Env) error {
	s.ran = true
	var interval time.Duration
	if e.Cfg.Rate > 0 {
		interval = time.Duration(float64(time.Second) / e.Cfg.Rate)
	}
	var wg sync.WaitGroup
	for _, g := range s.groups {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.stream(ctx, e, g, interval)
		}()
	}
	wg.Wait()
	e.MarkEnd()
	return nil
}

// stream is one bot's loop: messages of --chunks chunks, one append in
// flight, paced at interval; the message in progress when the timed phase
// ends is finished with what it has.
func (s *streamScenario) stream(ctx context.Context, e *Env, g *sgroup, interval time.Duration) {
	next := time.Now()
	if interval > 0 {
		next = next.Add(rand.N(interval))
	}
	buf := make([]byte, e.Cfg.Size)
	wctx := context.WithoutCancel(ctx) // requests in flight at the end are waited for
	for ctx.Err() == nil {
		var st *client.Stream
		var ss *sstream
		for k := 0; k < e.Cfg.Chunks && !e.Cfg.SendNone && e.Take(ctx); k++ {
			if interval > 0 {
				if !sleepUntil(ctx, next) {
					break
				}
				if time.Since(next) > interval {
					g.late++
				}
				next = next.Add(interval)
			}
			if st == nil {
				var err error
				if st, err = g.c.OpenStream(wctx, &pb.StreamOpen{ConversationId: g.conv}); err != nil {
					e.Note(fmt.Sprintf("a bot could not open a stream: %v", err))
					return
				}
				ss = &sstream{hash: fnvStart}
				g.streams[st.ID] = ss
			}
			makeChunk(buf, time.Now(), ss.chunks)
			e.M.sent.Add(1)
			t0 := time.Now()
			err := st.Append(wctx, string(buf))
			e.M.done(time.Since(t0), err)
			switch {
			case err == nil:
				e.M.acked.Add(1)
				ss.chunks++
				ss.length += len(buf)
				ss.hash = fnvAdd(ss.hash, buf)
			case !isAnswered(err):
				ss.uncertain = true
			}
			if g.c.Err() != nil {
				e.Note(fmt.Sprintf("a bot's connection ended: %v", g.c.Err()))
				return
			}
		}
		if st == nil {
			return // the budget or the time is spent
		}
		fctx, cancel := context.WithTimeout(wctx, 30*time.Second)
		t0 := time.Now()
		ack, err := st.Finish(fctx)
		cancel()
		if err != nil {
			g.finishFailed++
			e.Note(fmt.Sprintf("a StreamFinish failed: %v", err))
			if g.c.Err() != nil {
				return
			}
			continue
		}
		s.finishLat.Record(time.Since(t0))
		ss.seq = ack.Seq
		g.finished++
		s.finalsWant.Add(int64(len(g.rx)))
	}
}

// receive is a member's reader: chunks and messages, delivered cursors
// after each burst (--ack), pings when idle.
func (s *streamScenario) receive(e *Env, g *sgroup, r *srecv) {
	defer s.readers.Done()
	defer e.M.connected.Add(-1)
	rc := r.rc
	hb := time.Duration(rc.authOk.GetHeartbeatSeconds()) * time.Second
	if hb <= 0 {
		hb = 30 * time.Second
	}
	lastWrite := time.Now()
	var acked, lastSeq uint64
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
	var ch streamChunk
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
		if codec == wire.Proto && parseStreamChunk(p, &ch) {
			s.chunk(e, r, ch.id, ch.offset, ch.text, now)
		} else {
			f := new(pb.ServerFrame)
			if err = wire.DecodeServer(codec, p, f); err != nil {
				break
			}
			switch b := f.Body.(type) {
			case *pb.ServerFrame_StreamChunk:
				c := b.StreamChunk
				s.chunk(e, r, bytesOf(c.StreamId), c.Offset, bytesOf(c.Text), now)
			case *pb.ServerFrame_Message:
				m := b.Message
				lastSeq = max(lastSeq, m.Seq)
				if m.StreamId == "" || m.ConversationId != g.conv {
					r.other++
					break
				}
				fs := r.finals[m.StreamId]
				if fs == nil {
					fs = &finalSeen{length: len(m.Payload), hash: fnvOf(m.Payload), chunks: wellFormed(m.Payload, e.Cfg.Size) && !m.Incomplete}
					r.finals[m.StreamId] = fs
					s.finalsGot.Add(1)
				}
				fs.n++
			case *pb.ServerFrame_Disconnect:
				err = fmt.Errorf("disconnected by the server: %s", b.Disconnect.GetCode())
			}
			if err != nil {
				break
			}
		}
		if rc.br.Buffered() > 0 {
			continue // the burst goes on
		}
		switch {
		case e.Cfg.DeliveredAck && lastSeq > acked:
			acked = lastSeq
			err = write(&pb.ClientFrame{Body: &pb.ClientFrame_Delivered{Delivered: &pb.DeliveredAck{ConversationId: g.conv, Seq: acked}}}, now)
		case now.Sub(lastWrite) > hb/2:
			err = write(&pb.ClientFrame{Body: &pb.ClientFrame_Ping{Ping: &pb.Ping{}}}, now)
		}
		if err != nil {
			break
		}
	}
	if err != nil && !r.closing.Load() {
		e.Note(fmt.Sprintf("a member's connection ended during the run: %v", err))
	}
	rc.close()
}

// chunk records one chunk at a receiver.
func (s *streamScenario) chunk(e *Env, r *srecv, id []byte, offset uint32, text []byte, now time.Time) {
	t := r.tracks[string(id)] // no allocation for the lookup
	if t == nil {
		t = &chunkTrack{hash: fnvStart, inOrder: true}
		r.tracks[string(id)] = t
	}
	switch {
	case offset < t.next:
		t.dup++
		return
	case offset > t.next:
		t.ooo++ // a gap: something before it is missing (or late)
		t.inOrder = false
	}
	t.received++
	t.next = offset + uint32(len(text))
	t.hash = fnvAdd(t.hash, text)
	if sentAt, _, ok := parseChunk(text); ok {
		e.M.delivered.Add(1)
		e.M.lastRecv.Store(now.UnixNano())
		e.M.E2E.Record(now.Sub(time.Unix(0, sentAt)))
	}
}

// streamChunk is the part of a StreamChunk frame the checks read.
type streamChunk struct {
	id, text []byte
	offset   uint32
}

// parseStreamChunk reads a protobuf ServerFrame holding a stream_chunk
// without decoding the whole frame; false for any other frame.
func parseStreamChunk(b []byte, c *streamChunk) bool {
	var body []byte
	found := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == 42 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			body, found, b = v, true, b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return false
		}
		b = b[n:]
	}
	if !found {
		return false
	}
	*c = streamChunk{}
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return false
		}
		body = body[n:]
		switch {
		case typ == protowire.BytesType && (num == 1 || num == 5):
			v, n := protowire.ConsumeBytes(body)
			if n < 0 {
				return false
			}
			if num == 1 {
				c.id = v
			} else {
				c.text = v
			}
			body = body[n:]
		case typ == protowire.VarintType && num == 4:
			v, n := protowire.ConsumeVarint(body)
			if n < 0 {
				return false
			}
			c.offset = uint32(v)
			body = body[n:]
		default:
			if n = protowire.ConsumeFieldValue(num, typ, body); n < 0 {
				return false
			}
			body = body[n:]
		}
	}
	return c.id != nil
}

// drain waits until every finished message reached every member, or
// nothing has arrived for --drain, or ctx ends.
func (s *streamScenario) drain(ctx context.Context, e *Env) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	last, lastGot := e.M.delivered.Load(), s.finalsGot.Load()
	quietSince := time.Now()
	for s.finalsGot.Load() < s.finalsWant.Load() {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			d, n := e.M.delivered.Load(), s.finalsGot.Load()
			if d != last || n != lastGot {
				last, lastGot, quietSince = d, n, now
			} else if now.Sub(quietSince) > e.Cfg.Drain {
				return
			}
		}
	}
}

// stored reads a group's history: each finished message's count, and
// whether each copy has the bot's text.
func (s *streamScenario) stored(ctx context.Context, g *sgroup) (found map[string]int, wrong uint64, err error) {
	found = map[string]int{}
	var before uint64
	for range 100000 {
		hctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		p, err := g.c.History(hctx, g.conv, before, 200)
		cancel()
		if err != nil {
			return nil, 0, err
		}
		for _, m := range p.Messages {
			before = m.Seq
			if m.StreamId == "" {
				continue
			}
			found[m.StreamId]++
			ss := g.streams[m.StreamId]
			if ss == nil || ss.seq != m.Seq || m.Incomplete || ss.length != len(m.Payload) || ss.hash != fnvOf(m.Payload) {
				wrong++
			}
		}
		if !p.HasMore || len(p.Messages) == 0 {
			return found, wrong, nil
		}
	}
	return nil, 0, errors.New("history: too many pages")
}

func (s *streamScenario) Finish(ctx context.Context, e *Env, r *Report) error {
	if s.e == nil {
		return nil
	}
	if s.ran {
		s.drain(ctx, e)
	}
	for _, g := range s.groups {
		for _, rr := range g.rx {
			if rr.rc != nil {
				rr.closing.Store(true)
				rr.rc.conn.SetReadDeadline(time.Now())
			}
		}
	}
	s.readers.Wait()
	defer func() {
		for _, g := range s.groups {
			e.Close(g.c)
		}
	}()
	if !s.ran {
		return nil
	}

	sr := &StreamReport{Bots: uint64(len(s.groups)), FinishLatency: s.finishLat}
	d := &Delivery{}
	r.Stream, r.Delivery = sr, d
	for _, g := range s.groups {
		sr.Messages += g.finished
		sr.FinishFailed += g.finishFailed
		sr.ChunksLate += g.late
		if g.c != nil && g.c.Err() == nil {
			found, wrong, err := s.stored(ctx, g)
			if err != nil {
				return fmt.Errorf("read %s's history: %w", g.conv, err)
			}
			sr.StoredWrongText += wrong
			for id, ss := range g.streams {
				if ss.seq == 0 {
					continue
				}
				switch n := found[id]; {
				case n == 0:
					sr.StoredMissing++
				default:
					sr.Stored++
					sr.StoredDuplicated += uint64(n - 1)
				}
			}
		} else {
			sr.StoredMissing += g.finished
			e.Note("a bot's connection had ended: its group's history was not read")
		}
		for _, rr := range g.rx {
			if rr.rc == nil {
				continue
			}
			sr.Receivers++
			d.Receivers++
			failed := false
			for id, ss := range g.streams {
				t := rr.tracks[id]
				if t == nil {
					t = &chunkTrack{hash: fnvStart, inOrder: true}
				}
				d.Expected += uint64(ss.chunks)
				got := min(t.received, ss.chunks)
				d.Received += uint64(got)
				d.Lost += uint64(ss.chunks - got)
				d.Duplicated += uint64(t.dup)
				d.OutOfOrder += uint64(t.ooo)
				if ss.chunks != got || t.dup > 0 || t.ooo > 0 {
					failed = true
				}
				if ss.seq == 0 {
					continue
				}
				sr.FinalsExpected++
				fs := rr.finals[id]
				switch {
				case fs == nil:
					sr.FinalsMissing++
					failed = true
					continue
				case fs.n > 1:
					sr.FinalsDuplicated += uint64(fs.n - 1)
					failed = true
				}
				sr.FinalsReceived++
				if !fs.chunks || fs.length != ss.length || fs.hash != ss.hash {
					sr.FinalsWrongText++
					failed = true
				}
				if t.inOrder && t.received == ss.chunks && (t.hash != fs.hash || int(t.next) != fs.length) {
					sr.LiveTextMismatched++
					failed = true
				}
			}
			for id := range rr.tracks {
				if g.streams[id] == nil {
					e.Note("a member got chunks of a stream its bot did not open")
					failed = true
				}
			}
			if failed {
				d.ReceiversFailed++
			}
		}
		for _, ss := range g.streams {
			if ss.uncertain {
				e.Note("an append got no answer: its stream's text is not known for sure")
			}
			d.Acked += uint64(ss.chunks)
		}
	}
	return nil
}

// validateRich checks the flags of reactions and stream.
func (c Config) validateRich() []error {
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	switch c.Scenario {
	case "reactions":
		check(c.Members >= 1 && c.Members < 100000, "-m must be 1..99999 (the group has one more member, who reads)")
		check(c.Emojis >= 1 && c.Emojis <= len(benchEmojis), "--emojis must be 1..%d", len(benchEmojis))
		check(c.Pipeline <= c.Emojis, "--pipeline must be at most --emojis (each request stream owns its emojis)")
		check(c.Drain >= readQuiet, "--drain must be at least %v", readQuiet)
	case "stream":
		check(c.Members >= 1 && c.Members <= 100000, "-m must be 1..100000")
		check(c.Chunks >= 1, "--chunks must be >= 1")
		check(c.Size >= chunkHeader, "--size must be at least %d", chunkHeader)
		// A streamed message's text is bounded by the server's largest
		// frame (max_frame_bytes, 64 KiB by default).
		check(c.Chunks*c.Size <= 60000, "--chunks × --size must be at most 60000 bytes (the server's largest message)")
	}
	return errs
}

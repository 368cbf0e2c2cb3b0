package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// benchEmojis are what reactions' members cycle through (--emojis of them).
var benchEmojis = []string{"👍", "❤️", "😂", "🎉", "😮", "😢", "🔥", "👀"}

// reactionsScenario (parley bench reactions): -m members of one group (made
// by the coordinator with the message they react to, and one more member
// who only reads: see Plan), all online, react to that one message as fast as their answers come
// (--pipeline requests in flight each) or at --rate in total, for
// --duration or -c reactions. Each of a member's request streams owns some
// of the --emojis emojis and cycles through them, adding one and taking it
// back, so every request changes the counts and each member's own
// reactions at the end follow from its acked requests.
//
// Members are SDK clients that keep a client.ReactionState fed with the
// live (coalesced) updates and their own answers. At the end a fresh
// connection reads the counts (SyncReactions, and History for a second
// opinion) once they have stopped changing; they must equal the members'
// own reactions added up, and every member's view must equal them.
type reactionsScenario struct {
	e       *Env
	conv    string
	seq     uint64
	emojis  []string
	members []*reactor
	ran     bool
}

// reactor is one member and its request streams.
type reactor struct {
	user    string
	c       *client.Client
	view    client.ReactionState
	updates atomic.Uint64 // live updates (not its answers)
	streams []*reactStream

	// The member's own reactions as its newest answer has them. Kept apart
	// from view: an answer can reach the stream's goroutine after the
	// reader goroutine applied a later live update, and ReactionState then
	// drops it, `me` and all.
	mu        sync.Mutex
	ownV      uint64
	own       []string
	ownAnswer bool
}

// answer records one of the member's answers (personal updates).
func (m *reactor) answer(u *pb.ReactionUpdate) {
	m.view.Apply(u)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ownAnswer && u.Version < m.ownV {
		return
	}
	m.ownV, m.own, m.ownAnswer = u.Version, m.own[:0], true
	for _, x := range u.Reactions {
		if x.Me {
			m.own = append(m.own, x.Emoji)
		}
	}
}

// reactStream is one sequence of requests, one in flight at a time, over
// emojis no other stream of its member touches. Owned by its goroutine
// until Run returns.
type reactStream struct {
	emojis    []string
	k         uint64          // requests made
	held      map[string]bool // its emojis the member holds, per its acked requests
	uncertain bool            // a request's outcome is unknown (no answer)
}

// op is request k of the stream: add emojis[k/2 mod n] when k is even,
// take it back when odd.
func (st *reactStream) op(k uint64) (emoji string, remove bool) {
	return st.emojis[(k/2)%uint64(len(st.emojis))], k%2 == 1
}

func (s *reactionsScenario) Setup(ctx context.Context, e *Env) error {
	s.e = e
	cfg := e.Cfg
	if cfg.Plan == nil || len(cfg.Plan.Groups) == 0 || cfg.Plan.Groups[0].Seq == 0 {
		return errors.New("no group and message in the plan (the coordinator makes them)")
	}
	g := cfg.Plan.Groups[0]
	s.conv, s.seq, s.emojis = g.ConversationID, g.Seq, benchEmojis[:cfg.Emojis]
	lo, hi := splitRange(cfg.Members, cfg.Part, cfg.Parts)
	ids := make([]string, 0, hi-lo)
	for i := lo; i < hi; i++ {
		m := &reactor{user: g.Member(i)}
		// Stream j of member i owns the emojis j, j+P, j+2P, ... of the
		// list, turned by i so the members spread over all of them.
		for j := range cfg.Pipeline {
			st := &reactStream{held: map[string]bool{}}
			for x := j; x < len(s.emojis); x += cfg.Pipeline {
				st.emojis = append(st.emojis, s.emojis[(x+i)%len(s.emojis)])
			}
			m.streams = append(m.streams, st)
		}
		s.members = append(s.members, m)
		ids = append(ids, m.user)
	}
	toks, err := e.MintTokens(ctx, ids)
	if err != nil {
		return err
	}
	return parallel(ctx, len(s.members), setupParallel, func(ctx context.Context, i int) error {
		m := s.members[i]
		o := e.ClientOptions(toks[i], "d0")
		o.OnReaction = func(u *pb.ReactionUpdate) {
			m.updates.Add(1)
			e.M.delivered.Add(1) // the progress line's deliveries
			m.view.Apply(u)
		}
		c, err := e.Dial(ctx, o)
		if err != nil {
			return fmt.Errorf("connect %s: %w", m.user, err)
		}
		m.c = c
		return nil
	})
}

func (s *reactionsScenario) Run(ctx context.Context, e *Env) error {
	s.ran = true
	interval := streamInterval(e.Cfg.Rate, e.Cfg.Members*e.Cfg.Pipeline)
	var wg sync.WaitGroup
	for _, m := range s.members {
		for _, st := range m.streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.react(ctx, e, m, st, interval)
			}()
		}
	}
	wg.Wait()
	e.MarkEnd()
	return nil
}

// react is one stream's loop: one request at a time, each until its answer.
func (s *reactionsScenario) react(ctx context.Context, e *Env, m *reactor, st *reactStream, interval time.Duration) {
	next := time.Now()
	if interval > 0 {
		next = next.Add(rand.N(interval)) // spread the streams' phases
	}
	for !e.Cfg.SendNone && e.Take(ctx) {
		if interval > 0 {
			if !sleepUntil(ctx, next) {
				break
			}
			next = next.Add(interval)
		}
		emoji, remove := st.op(st.k)
		st.k++
		e.M.sent.Add(1)
		t0 := time.Now()
		// An answer in flight when the timed phase ends is waited for.
		u, err := s.request(context.WithoutCancel(ctx), m.c, emoji, remove)
		e.M.done(time.Since(t0), err)
		switch {
		case err == nil:
			e.M.acked.Add(1)
			m.answer(u)
			if remove {
				delete(st.held, emoji)
			} else {
				st.held[emoji] = true
			}
		case isAnswered(err):
			// Refused: nothing changed.
		default:
			st.uncertain = true
		}
		if m.c.Err() != nil {
			e.Note(fmt.Sprintf("a member's connection ended: %v", m.c.Err()))
			return
		}
	}
}

func (s *reactionsScenario) request(ctx context.Context, c *client.Client, emoji string, remove bool) (*pb.ReactionUpdate, error) {
	if remove {
		return c.Unreact(ctx, s.conv, s.seq, emoji)
	}
	return c.React(ctx, s.conv, s.seq, emoji)
}

// isAnswered says the server answered a request with an error (so it
// changed nothing), as opposed to no answer at all.
func isAnswered(err error) bool {
	var ce *client.Error
	return errors.As(err, &ce)
}

// settle makes the own reactions of a stream whose outcome is unknown
// known again: it takes back each of its emojis (taking back one you do
// not hold changes nothing).
func (s *reactionsScenario) settle(ctx context.Context, m *reactor, st *reactStream) bool {
	for _, emoji := range st.emojis {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		u, err := m.c.Unreact(rctx, s.conv, s.seq, emoji)
		cancel()
		if err != nil {
			return false
		}
		m.answer(u)
		delete(st.held, emoji)
	}
	st.uncertain = false
	return true
}

// reactionRead is the counts of the message as a fresh read finds them.
type reactionRead struct {
	counts  map[string]uint64
	version uint64
}

// read pages through the conversation's reaction changes from the start
// and keeps the message's (personal to the reader, who does not react).
func (s *reactionsScenario) read(ctx context.Context, c *client.Client) (reactionRead, error) {
	r := reactionRead{counts: map[string]uint64{}}
	var after uint64
	for range 1000 {
		p, err := c.SyncReactions(ctx, s.conv, after, 1000)
		if err != nil {
			return r, err
		}
		for _, u := range p.Updates {
			if u.Seq == s.seq && u.Version >= r.version {
				r.version = u.Version
				clear(r.counts)
				for _, x := range u.Reactions {
					r.counts[x.Emoji] = uint64(x.Count)
				}
			}
			after = max(after, u.Version)
		}
		if !p.HasMore || len(p.Updates) == 0 {
			return r, nil
		}
	}
	return r, errors.New("SyncReactions: more than 1000 pages")
}

// historyCounts reads the message itself and returns its counts.
func (s *reactionsScenario) historyCounts(ctx context.Context, c *client.Client) (map[string]uint64, uint64, error) {
	p, err := c.History(ctx, s.conv, s.seq+1, 1)
	if err != nil {
		return nil, 0, err
	}
	for _, m := range p.Messages {
		if m.Seq == s.seq {
			out := map[string]uint64{}
			for _, x := range m.Reactions {
				out[x.Emoji] = uint64(x.Count)
			}
			return out, m.ReactionVersion, nil
		}
	}
	return nil, 0, fmt.Errorf("History: message %d not in the page", s.seq)
}

// viewMatches says whether a member's view holds the read's counts and
// version (its `me` is checked apart: see reactor.own).
func viewMatches(m *reactor, conv string, seq uint64, r reactionRead) bool {
	rs, v := m.view.Get(conv, seq)
	if v != r.version {
		return false
	}
	n := 0
	for _, x := range rs {
		if x.Count == 0 || r.counts[x.Emoji] != uint64(x.Count) {
			return false
		}
		n++
	}
	return n == len(r.counts)
}

// readQuiet is how long the counts must stay the same before they are
// final: longer than the server's coalescing interval (50 ms), and than the
// gap between two processes' last reactions.
const readQuiet = 500 * time.Millisecond

func (s *reactionsScenario) Finish(ctx context.Context, e *Env, r *Report) error {
	if s.e == nil {
		return nil
	}
	defer func() {
		for _, m := range s.members {
			e.Close(m.c)
		}
	}()
	if !s.ran || len(s.members) == 0 {
		return nil
	}
	rep := &ReactionsReport{Members: uint64(len(s.members)), Emojis: s.emojis, Expected: map[string]uint64{}, HistoryAgrees: true}
	r.Reactions = rep
	for _, m := range s.members {
		for _, st := range m.streams {
			if st.uncertain && (m.c.Err() != nil || !s.settle(ctx, m, st)) {
				rep.Unsettled++
			}
		}
	}

	// A fresh connection reads the counts, as the member who does not
	// react (the last: see makePlan).
	g := e.Cfg.Plan.Groups[0]
	toks, err := e.MintTokens(ctx, []string{g.Member(g.Members - 1)})
	if err != nil {
		return err
	}
	// One device of its own per process: a second login with the same
	// device type would replace the first.
	o := e.ClientOptions(toks[0], fmt.Sprintf("verify-%d", e.Cfg.Part))
	o.DeviceType = fmt.Sprintf("bench-verify-%d", e.Cfg.Part)
	vc, err := e.Dial(ctx, o)
	if err != nil {
		return fmt.Errorf("connect to read the final counts: %w", err)
	}
	defer e.Close(vc)
	deadline := time.Now().Add(e.Cfg.Drain)
	var final reactionRead
	changed := time.Now()
	for first := true; ; first = false {
		rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		rd, err := s.read(rctx, vc)
		cancel()
		if err != nil {
			return fmt.Errorf("read the final counts: %w", err)
		}
		if first || rd.version != final.version {
			final, changed = rd, time.Now()
		}
		mismatched := 0
		for _, m := range s.members {
			if !viewMatches(m, s.conv, s.seq, final) {
				mismatched++
			}
		}
		quiet := time.Since(changed) >= readQuiet
		if quiet && mismatched == 0 || time.Now().After(deadline) {
			rep.ViewsMismatched = uint64(mismatched)
			for _, m := range s.members {
				if !viewMatches(m, s.conv, s.seq, final) {
					rs, v := m.view.Get(s.conv, s.seq)
					e.Note(fmt.Sprintf("a member's view (%s): %s at version %d, after %d live updates; the read: %v at version %d",
						m.user, reactionsString(rs), v, m.updates.Load(), final.counts, final.version))
					break
				}
			}
			break
		}
		if !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return ctx.Err()
		}
	}
	rep.Read, rep.ReadVersion = final.counts, final.version

	hctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	hc, hv, err := s.historyCounts(hctx, vc)
	cancel()
	if err != nil {
		return err
	}
	if hv != final.version || !mapsEqual(hc, final.counts) {
		rep.HistoryAgrees = false
		e.Note(fmt.Sprintf("History shows %v at version %d, SyncReactions %v at version %d", hc, hv, final.counts, final.version))
	}

	// Every member's own reactions: from its acked requests, and as its
	// newest answer has them (`me`).
	for _, m := range s.members {
		own := map[string]bool{}
		for _, st := range m.streams {
			for emoji := range st.held {
				own[emoji] = true
				rep.Expected[emoji]++
			}
		}
		m.mu.Lock()
		me := m.own
		m.mu.Unlock()
		if len(me) != len(own) || slices.ContainsFunc(me, func(x string) bool { return !own[x] }) {
			rep.OwnMismatched++
		}
		rep.Updates += m.updates.Load()
	}
	return nil
}

func reactionsString(rs []*pb.Reaction) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, x := range rs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s:%d", x.Emoji, x.Count)
		if x.Me {
			b.WriteString("(me)")
		}
	}
	b.WriteByte(']')
	return b.String()
}

func mapsEqual(a, b map[string]uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// searchScenario measures message search in three parts.
//
// Load and indexing: -t senders store -c text messages over --convs 1:1
// conversations (sender i talks to the peers j with j mod t == i; peers
// have accounts and tokens but stay offline), --pipeline sends in flight
// per sender. The texts are sentences drawn with a seeded PRNG from word
// lists in nine languages (searchLangs), a few with a rare word. While
// they are sent, and after, until the index has caught up, the server's
// /metrics is read: entries indexed per second, and the index's lag.
//
// Verification: once the index has caught up, every sender searches for
// every rare word, all pages: the hits must be what the sender's acked
// messages hold (a send with no answer may or may not be stored: it widens
// the range allowed), every hit in one of the sender's conversations.
//
// Queries: for each number in --searchers (a phase each, in order), that
// many searchers (the senders' users, on their senders' connections; each
// reads Convs/t conversations) run queries back to back for --duration,
// the kinds in turn (searchKinds). A TOO_MANY_REQUESTS
// (the node runs 8 searches at once) is counted and retried after a short
// pause; latency is reported per attempt answered and as the user waits
// (first attempt to answer, retries included).
//
// With the data directory known (--data), the index's and the store's
// size on disk are reported, per million messages. Against a server with
// search off, only the load runs (its sends/s and CPU are the baseline).
type searchScenario struct {
	senders []*searchSender
	off     bool
	rep     *SearchReport
	watch   *indexWatch
}

// searchSender is one sender and what it stored.
type searchSender struct {
	idx   int
	id    string
	token string
	c     *client.Client
	peers []string
	convs map[string]bool // conversation ids with its peers
	next  atomic.Uint64   // its next message number
	// Per rare word (searchRares): messages acked, and messages whose send
	// got no answer (stored or not, the bench cannot tell).
	rareAcked []atomic.Uint64
	rareMaybe []atomic.Uint64
}

func directConv(a, b string) string {
	if b < a {
		a, b = b, a
	}
	return "p:" + a + ":" + b
}

func (s *searchScenario) Setup(ctx context.Context, e *Env) error {
	n, convs := e.Cfg.Concurrency, e.Cfg.Convs
	s.rep = &SearchReport{Senders: n, Conversations: convs, Seed: e.Cfg.Seed}
	ids := make([]string, 0, n+convs)
	for i := range n {
		s.senders = append(s.senders, &searchSender{idx: i, id: e.UserID("s", i), convs: map[string]bool{},
			rareAcked: make([]atomic.Uint64, len(searchRares)), rareMaybe: make([]atomic.Uint64, len(searchRares))})
		ids = append(ids, s.senders[i].id)
	}
	for j := range convs {
		p := e.UserID("p", j)
		ids = append(ids, p)
		sd := s.senders[j%n]
		sd.peers = append(sd.peers, p)
		sd.convs[directConv(sd.id, p)] = true
	}
	// Every peer gets an account (a minted token); they stay offline.
	toks, err := e.MintTokens(ctx, ids)
	if err != nil {
		return err
	}
	s.watch = &indexWatch{e: e}
	if _, ok, err := s.watch.read(ctx); err != nil {
		return fmt.Errorf("read /metrics: %w", err)
	} else if !ok {
		s.off = true
		s.rep.SearchOff = true
		e.Note("the server keeps no search index (search: off, or no parley_search_index_lag in /metrics): only the load ran")
	}
	return parallel(ctx, n, setupParallel, func(ctx context.Context, i int) error {
		sd := s.senders[i]
		sd.token = toks[i]
		c, err := e.Dial(ctx, e.ClientOptions(sd.token, "d0"))
		if err != nil {
			return fmt.Errorf("connect %s: %w", sd.id, err)
		}
		sd.c = c
		return nil
	})
}

func (s *searchScenario) Run(ctx context.Context, e *Env) error {
	rep := s.rep
	if !s.off {
		if err := s.watch.start(ctx); err != nil {
			return fmt.Errorf("read /metrics: %w", err)
		}
	}
	var wg sync.WaitGroup
	for _, sd := range s.senders {
		for range e.Cfg.Pipeline {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.send(ctx, e, sd)
			}()
		}
	}
	wg.Wait()
	e.MarkEnd()
	loadEnd := time.Now()
	rep.LoadSeconds = loadEnd.Sub(e.start).Seconds()
	if s.off {
		return ctx.Err()
	}
	s.watch.loadEnded(loadEnd)

	// Catch-up: poll every 100 ms until the lag is 0 and every acked
	// message has been indexed. The lag alone is not enough: the server
	// measures it against the store position its index follower read at
	// its last step, so it reads 0 until the follower looks again.
	cctx, cancel := context.WithTimeout(ctx, e.Cfg.Drain)
	defer cancel()
	caught := s.watch.waitCaughtUp(cctx, e.M.acked.Load())
	s.watch.stop()
	s.watch.fill(rep, e.start, loadEnd)
	if !caught {
		rep.CatchUpSeconds = time.Since(loadEnd).Seconds()
		return ctx.Err() // the failure is in the report (not caught up)
	}

	// Verification, then the query phase.
	t0 := time.Now()
	if err := s.verify(ctx, e); err != nil {
		return err
	}
	rep.Verify.Seconds = time.Since(t0).Seconds()
	for _, n := range e.Cfg.Searchers {
		if ctx.Err() != nil {
			break
		}
		st := &QueryStep{Searchers: n, Kinds: map[string]*SearchKind{}, StartS: time.Since(e.start).Seconds()}
		s.query(ctx, e, st)
		st.EndS = time.Since(e.start).Seconds()
		rep.Steps = append(rep.Steps, st)
	}
	return ctx.Err()
}

// send is one of a sender's --pipeline loops: one message at a time.
func (s *searchScenario) send(ctx context.Context, e *Env, sd *searchSender) {
	var sb strings.Builder
	for e.Take(ctx) {
		m := sd.next.Add(1) - 1
		text, rare := searchText(e.Cfg.Seed, sd.idx, m, &sb)
		to := sd.peers[m%uint64(len(sd.peers))]
		e.M.sent.Add(1)
		t0 := time.Now()
		_, err := sd.c.Send(context.WithoutCancel(ctx), &pb.Send{To: to, ContentType: "text/plain", Payload: []byte(text)})
		e.M.done(time.Since(t0), err)
		var ce *client.Error
		switch {
		case err == nil:
			e.M.acked.Add(1)
			if rare >= 0 {
				sd.rareAcked[rare].Add(1)
			}
		case !errors.As(err, &ce) && rare >= 0:
			sd.rareMaybe[rare].Add(1) // no answer: it may be stored
		}
		if sd.c.Err() != nil {
			e.Note(fmt.Sprintf("a sender's connection ended: %v", sd.c.Err()))
			return
		}
	}
}

// searchOnce runs one search, retrying TOO_MANY_REQUESTS after a short
// pause until it is answered, fails otherwise, or ctx ends. It returns
// the answered attempt's latency and the refusals.
func searchOnce(ctx context.Context, c *client.Client, q *pb.Search, r *rand.Rand) (res *pb.SearchResults, lat time.Duration, refused uint64, err error) {
	for {
		t0 := time.Now()
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		res, err = c.Search(rctx, q)
		cancel()
		lat = time.Since(t0)
		var ce *client.Error
		if !errors.As(err, &ce) || ce.Code != pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS {
			return res, lat, refused, err
		}
		refused++
		if !sleepUntil(ctx, time.Now().Add(2*time.Millisecond+time.Duration(r.Int64N(int64(8*time.Millisecond))))) {
			return nil, lat, refused, err
		}
	}
}

// verify searches every rare word as every sender, all pages.
func (s *searchScenario) verify(ctx context.Context, e *Env) error {
	v := &s.rep.Verify
	var mu sync.Mutex // guards v's counts and samples
	type job struct{ sd, rare int }
	var jobs []job
	for i := range s.senders {
		for k := range searchRares {
			jobs = append(jobs, job{i, k})
		}
	}
	// Four at a time: fewer than the node's eight search slots.
	return parallel(ctx, len(jobs), 4, func(ctx context.Context, i int) error {
		j := jobs[i]
		sd := s.senders[j.sd]
		rw := searchRares[j.rare].word()
		r := rand.New(rand.NewPCG(e.Cfg.Seed, uint64(i)))
		q := &pb.Search{Query: rw.query, Limit: 100}
		seen := map[string]bool{}
		var unreadable, refused uint64
		for pages := 0; ; pages++ {
			if pages > 1000 {
				return fmt.Errorf("verify %q as %s: more than 1000 pages", rw.query, sd.id)
			}
			res, _, ref, err := searchOnce(ctx, sd.c, q, r)
			refused += ref
			if err != nil {
				return fmt.Errorf("verify %q as %s: %w", rw.query, sd.id, err)
			}
			for _, h := range res.Hits {
				seen[h.ConversationId+"/"+strconv.FormatUint(h.Seq, 10)] = true
				if !sd.convs[h.ConversationId] || h.From != sd.id {
					unreadable++
				}
			}
			if res.Next == nil {
				break
			}
			q.Before = res.Next
		}
		lo := sd.rareAcked[j.rare].Load()
		hi := lo + sd.rareMaybe[j.rare].Load()
		got := uint64(len(seen))
		mu.Lock()
		defer mu.Unlock()
		v.Searches++
		v.Refused += refused
		v.Hits += got
		v.Expected += lo
		v.Unreadable += unreadable
		bad := got < lo || got > hi
		if bad {
			v.Mismatched++
		}
		// Samples: the first sender's words, and every mismatch (up to 20).
		if (j.sd == 0 || bad) && len(v.Samples) < 40 {
			v.Samples = append(v.Samples, VerifySample{User: sd.id, Query: rw.query, Word: rw.word, Expected: lo, ExpectedMax: hi, Got: got})
		}
		return nil
	})
}

// query runs one phase's searchers for --duration.
func (s *searchScenario) query(ctx context.Context, e *Env, rep *QueryStep) {
	for _, k := range searchKinds {
		rep.Kinds[k] = &SearchKind{Latency: NewHistogram(), Waited: NewHistogram()}
	}
	qctx, cancel := context.WithTimeout(ctx, e.Cfg.QueryDuration)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex // guards the kinds' counts
	for j := range rep.Searchers {
		sd := s.senders[j%len(s.senders)]
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(e.Cfg.Seed+1+uint64(rep.Searchers)<<32, uint64(j)))
			for n := j; qctx.Err() == nil; n++ {
				kind := searchKinds[n%len(searchKinds)]
				text, phrase := searchQuery(kind, r)
				t0 := time.Now()
				res, lat, refused, err := searchOnce(qctx, sd.c, &pb.Search{Query: text, Phrase: phrase, Limit: 20}, r)
				waited := time.Since(t0)
				var hits, unreadable uint64
				if err == nil {
					hits = uint64(len(res.Hits))
					for _, h := range res.Hits {
						if !sd.convs[h.ConversationId] || h.From != sd.id {
							unreadable++
						}
					}
				}
				mu.Lock()
				k := rep.Kinds[kind]
				k.Refused += refused
				switch {
				case err == nil:
					k.Answered++
					k.Hits += hits
					k.Unreadable += unreadable
					k.Latency.Record(lat)
					k.Waited.Record(waited)
				case qctx.Err() != nil && refused > 0:
					k.Abandoned++ // refused until the phase ended
				default:
					k.Errors++
					if k.Codes == nil {
						k.Codes = map[string]uint64{}
					}
					k.Codes[statusOf(err)]++
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func (s *searchScenario) Finish(ctx context.Context, e *Env, r *Report) error {
	if s.watch != nil {
		s.watch.stop()
	}
	if s.rep != nil {
		if dir := e.Cfg.DataDir; dir != "" {
			s.rep.DataDir = dir
			s.rep.SearchBytes, _ = dirSize(filepath.Join(dir, "search"))
			s.rep.StoreBytes, _ = dirSize(filepath.Join(dir, "store"))
		}
		s.rep.Messages = e.M.acked.Load()
		r.Search = s.rep
	}
	for _, sd := range s.senders {
		if sd.c != nil {
			e.Close(sd.c)
		}
	}
	return nil
}

// dirSize is the bytes the files under dir take on disk (allocated
// blocks), 0 when it does not exist.
func dirSize(dir string) (uint64, error) {
	var n uint64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking (a compaction)
			}
			return err
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += diskBytes(fi)
			}
		}
		return nil
	})
	return n, err
}

// indexWatch reads the index's counters from the server's /metrics: each
// second while the load runs, every 100 ms after it until the lag is 0.
type indexWatch struct {
	e       *Env
	stopC   chan struct{}
	done    chan struct{}
	once    sync.Once
	mu      sync.Mutex // guards the fields below
	samples []indexPoint
	loadEnd time.Time
	caught  time.Time
}

type indexPoint struct {
	at      time.Time
	indexed uint64
	lag     uint64
}

// read returns the indexed total and the lag; ok is false when the server
// has no index.
func (w *indexWatch) read(ctx context.Context) (indexPoint, bool, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.e.Cfg.HTTPBase+"/metrics", nil)
	if err != nil {
		return indexPoint{}, false, err
	}
	req.Header.Set("X-Api-Key", w.e.Cfg.APIKey)
	resp, err := w.e.http.Client.Do(req)
	if err != nil {
		return indexPoint{}, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return indexPoint{}, false, fmt.Errorf("/metrics: HTTP %d", resp.StatusCode)
	}
	p := indexPoint{at: time.Now()}
	var haveLag, haveIndexed bool
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		switch name {
		case "parley_search_index_lag":
			f, _ := strconv.ParseFloat(strings.TrimSpace(val), 64)
			p.lag, haveLag = uint64(f), true
		case "parley_search_indexed_total":
			f, _ := strconv.ParseFloat(strings.TrimSpace(val), 64)
			p.indexed, haveIndexed = uint64(f), true
		}
	}
	return p, haveLag && haveIndexed, sc.Err()
}

func (w *indexWatch) start(ctx context.Context) error {
	w.stopC, w.done = make(chan struct{}), make(chan struct{})
	p, ok, err := w.read(ctx)
	if err == nil && !ok {
		err = errors.New("/metrics no longer shows the search index")
	}
	if err != nil {
		close(w.done)
		return err
	}
	w.samples = append(w.samples, p) // the base: everything indexed before the load
	go func() {
		defer close(w.done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-w.stopC:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				if p, ok, err := w.read(ctx); err == nil && ok {
					w.mu.Lock()
					w.samples = append(w.samples, p)
					w.mu.Unlock()
				}
			}
		}
	}()
	return nil
}

func (w *indexWatch) loadEnded(t time.Time) {
	w.mu.Lock()
	w.loadEnd = t
	w.mu.Unlock()
}

// waitCaughtUp polls until the lag is 0 and at least acked entries were
// indexed since the first sample; false when ctx ends first.
func (w *indexWatch) waitCaughtUp(ctx context.Context, acked uint64) bool {
	for {
		p, ok, err := w.read(ctx)
		if err == nil && ok {
			w.mu.Lock()
			w.samples = append(w.samples, p)
			base := w.samples[0].indexed
			w.mu.Unlock()
			if p.lag == 0 && p.indexed >= base+acked {
				w.mu.Lock()
				w.caught = p.at
				w.mu.Unlock()
				return true
			}
		}
		if !sleepUntil(ctx, time.Now().Add(100*time.Millisecond)) {
			return false
		}
	}
}

func (w *indexWatch) stop() {
	w.once.Do(func() {
		if w.stopC != nil {
			close(w.stopC)
			<-w.done
		}
	})
}

// fill derives the indexing figures from the samples.
func (w *indexWatch) fill(rep *SearchReport, start, loadEnd time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ps := w.samples
	if len(ps) == 0 {
		return
	}
	// Samples in time order (the ticker's and the catch-up poll's interleave).
	for i := 1; i < len(ps); i++ {
		for k := i; k > 0 && ps[k].at.Before(ps[k-1].at); k-- {
			ps[k], ps[k-1] = ps[k-1], ps[k]
		}
	}
	base := ps[0]
	atEnd := base // the last sample at or before the load's end
	for _, p := range ps {
		rep.LagPeak = max(rep.LagPeak, p.lag)
		if !p.at.After(loadEnd) {
			atEnd = p
		}
	}
	last := ps[len(ps)-1]
	rep.IndexedTotal = last.indexed - base.indexed
	rep.IndexedDuringLoad = atEnd.indexed - base.indexed
	rep.LagAtLoadEnd = atEnd.lag
	if d := atEnd.at.Sub(base.at).Seconds(); d > 0 {
		rep.IndexedPerSecLoad = float64(rep.IndexedDuringLoad) / d
	}
	if d := last.at.Sub(atEnd.at).Seconds(); d > 0 {
		rep.IndexedPerSecAfter = float64(last.indexed-atEnd.indexed) / d
	}
	if !w.caught.IsZero() {
		rep.CaughtUp = true
		rep.CatchUpSeconds = max(w.caught.Sub(loadEnd).Seconds(), 0)
	}
	// One point per second: the entries indexed within it and the lag at its end.
	prev := base
	for _, p := range ps[1:] {
		if p.at.Sub(prev.at) < 900*time.Millisecond && p != last {
			continue
		}
		rep.Series = append(rep.Series, IndexSample{
			T: p.at.Sub(start).Seconds(), IndexedPerSec: float64(p.indexed-prev.indexed) / p.at.Sub(prev.at).Seconds(), Lag: p.lag,
		})
		prev = p
	}
}

// diskBytes is a file's allocated size (its blocks), or its length where
// the platform does not say.
func diskBytes(fi os.FileInfo) uint64 {
	if b, ok := fileBlocks(fi); ok {
		return b
	}
	return uint64(fi.Size())
}

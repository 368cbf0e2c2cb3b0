package chat

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/parleyim/parley/internal/search"
	"github.com/parleyim/parley/internal/session"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Searcher answers message searches already narrowed to what the asking
// user may read (package search). Nil: search is off (UNAVAILABLE).
type Searcher interface {
	Search(ctx context.Context, q search.Query) (search.Result, error)
}

const (
	// maxSearchQuery bounds Search.query, in bytes.
	maxSearchQuery = 256
	// defaultSearchLimit is a page's size when the request gives none.
	defaultSearchLimit = 20
	// searchSlotCount bounds the searches a node runs at once, so searches
	// cannot take the cores sends need; past it a search waits in a short
	// queue (searchQueueMax, searchQueueWait), then is refused with
	// TOO_MANY_REQUESTS (temporary).
	searchSlotCount = 8
	// searchQueueMax bounds the searches waiting for a slot; past it a
	// search is refused at once. Refusing at once whenever the slots are
	// busy made clients retry in a storm (each retry a round trip and a
	// refusal), and the wait as a user saw it long-tailed; a queue serves
	// them in order.
	searchQueueMax = 64
	// searchQueueWait bounds a search's wait in the queue.
	searchQueueWait = time.Second
	// searchTimeout bounds one search, index and store reads included.
	searchTimeout = 10 * time.Second
	// searchRounds bounds the index calls of one request: hits the user
	// deleted for themselves are left out after the index answers, so a
	// page may take more than one call to fill.
	searchRounds = 4
)

// searchMessages answers a Search: the conversations uid reads (or the one
// asked for), each narrowed to the seqs uid may read there, searched by the
// index; what uid deleted for themselves is left out of the hits.
//
// It runs in a goroutine of its own, holding one of the node's search
// slots: a search can take tens of milliseconds, and the socket worker
// that called it serves other connections' frames meanwhile.
func (s *Service) searchMessages(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.Search) error {
	uid, conv := sess.UserID, r.ConversationId // r is not ours once this returns
	q, limit, err := s.searchQuery(r)
	if err != nil {
		return err
	}
	take, err := s.searchAdmit()
	if err != nil {
		return err
	}
	go func() {
		release, err := take(ctx)
		if err != nil {
			s.replyErr(c, id, err)
			return
		}
		defer release()
		ctx, cancel := context.WithTimeout(ctx, searchTimeout)
		defer cancel()
		defer context.AfterFunc(s.searchLife, cancel)() // Stop ends searches
		out, err := s.userSearch(ctx, uid, conv, q, limit)
		if err != nil {
			s.replyErr(c, id, err)
			return
		}
		c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_SearchResults{SearchResults: out}})
	}()
	return nil
}

// userSearch runs q for uid: where uid reads (conv, or every conversation),
// leaving out what uid cleared or deleted for themselves.
func (s *Service) userSearch(ctx context.Context, uid, conv string, q search.Query, limit int) (*pb.SearchResults, error) {
	var err error
	if q.Ranges, err = s.searchRanges(ctx, uid, conv); err != nil {
		return nil, err
	}
	q.UserID = uid
	floors := map[string]uint64{} // per conversation: the seq uid cleared up to
	return s.runSearch(ctx, q, limit, func(h search.Hit) (bool, error) {
		return s.searchVisible(ctx, uid, h, floors)
	})
}

// AdminSearch searches every conversation (or the one r names) for the
// admin API: what anyone sent there, sender-only messages included;
// recalled messages are gone for the operator too.
func (s *Service) AdminSearch(ctx context.Context, r *pb.Search) (*pb.SearchResults, error) {
	q, limit, err := s.searchQuery(r)
	if err != nil {
		return nil, err
	}
	take, err := s.searchAdmit()
	if err != nil {
		return nil, err
	}
	release, err := take(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	q.Operator = true
	if r.ConversationId != "" {
		q.Ranges = []search.Range{{ConversationID: r.ConversationId, From: 1}}
	}
	return s.runSearch(ctx, q, limit, nil)
}

// searchQuery checks a Search and turns it into the index's query (without
// where to look) and the page size.
func (s *Service) searchQuery(r *pb.Search) (search.Query, int, error) {
	if s.cfg.Search == nil {
		return search.Query{}, 0, errUnavail
	}
	if r.Query == "" || len(r.Query) > maxSearchQuery || !utf8.ValidString(r.Query) || r.Limit > search.MaxLimit ||
		len(r.ConversationId) > maxConversationID || len(r.From) > maxConversationID || len(r.ContentType) > maxContentType ||
		(r.Since != 0 && r.Until != 0 && r.Since > r.Until) {
		return search.Query{}, 0, errBadRequest
	}
	limit := int(r.Limit)
	if limit == 0 {
		limit = defaultSearchLimit
	}
	q := search.Query{
		Text: r.Query, Phrase: r.Phrase,
		From: r.From, ContentType: r.ContentType, HasAttachment: r.HasAttachment,
		Since: r.Since, Until: r.Until,
	}
	if b := r.Before; b != nil {
		q.Before = &search.Cursor{Time: b.ServerTime, ConversationID: b.ConversationId, Seq: b.Seq}
	}
	return q, limit, nil
}

// searchAdmit admits a search: to a free slot, or to the queue before the
// slots (TOO_MANY_REQUESTS when the queue is full, UNAVAILABLE when the
// service is stopping). It does not wait: take, called where the search
// runs, waits for the slot (at most searchQueueWait) and returns its
// release; it must be called once.
func (s *Service) searchAdmit() (take func(context.Context) (release func(), err error), err error) {
	if s.searchLife.Err() != nil {
		return nil, errUnavail
	}
	release := func() { s.searchSlots.Release(1) }
	if s.searchSlots.TryAcquire(1) {
		return func(context.Context) (func(), error) { return release, nil }, nil
	}
	if s.searchQueued.Add(1) > searchQueueMax {
		s.searchQueued.Add(-1)
		s.stats.searchesRefused.Add(1)
		return nil, errTooMany // retry shortly
	}
	s.stats.searchesQueued.Add(1)
	wait := s.searchWait
	return func(ctx context.Context) (func(), error) {
		defer s.searchQueued.Add(-1)
		ctx, cancel := context.WithTimeout(ctx, wait)
		defer cancel()
		defer context.AfterFunc(s.searchLife, cancel)() // Stop ends the wait
		if err := s.searchSlots.Acquire(ctx, 1); err != nil {
			if s.searchLife.Err() != nil {
				return nil, errUnavail
			}
			s.stats.searchesRefused.Add(1)
			return nil, errTooMany
		}
		return release, nil
	}, nil
}

// runSearch asks the index for up to limit hits of q that visible (nil:
// all) lets through, asking again while hits are left out, at most
// searchRounds times.
func (s *Service) runSearch(ctx context.Context, q search.Query, limit int, visible func(search.Hit) (bool, error)) (*pb.SearchResults, error) {
	out := &pb.SearchResults{}
	for round := 0; round < searchRounds && len(out.Hits) < limit; round++ {
		q.Limit = limit - len(out.Hits)
		res, err := s.cfg.Search.Search(ctx, q)
		if errors.Is(err, search.ErrBadQuery) {
			return nil, errBadRequest
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("search failed", "err", err)
			}
			return nil, errUnavail
		}
		for _, h := range res.Hits {
			ok := true
			if visible != nil {
				if ok, err = visible(h); err != nil {
					return nil, err
				}
			}
			if ok {
				out.Hits = append(out.Hits, hitProto(h))
			}
		}
		if res.Next == nil {
			out.Next = nil
			break
		}
		q.Before = res.Next
		out.Next = &pb.SearchCursor{ServerTime: res.Next.Time, ConversationId: res.Next.ConversationID, Seq: res.Next.Seq}
	}
	s.stats.searches.Add(1)
	return out, nil
}

// searchRanges is where uid may find messages: every conversation they are
// (or were) in, each from the seq after which they read it up to where they
// left, or only conv when one is asked for (PERMISSION_DENIED when uid does
// not read it, whether or not it exists).
func (s *Service) searchRanges(ctx context.Context, uid, conv string) ([]search.Range, error) {
	convs := []string{conv}
	if conv == "" {
		var err error
		if convs, err = s.store.Conversations(ctx, uid); err != nil {
			return nil, storeErr(err)
		}
	}
	ranges := make([]search.Range, 0, len(convs))
	for _, id := range convs {
		since, upTo, err := s.readRange(ctx, uid, id)
		if errors.Is(err, errDenied) {
			if conv != "" {
				return nil, errDenied
			}
			continue // no longer readable (a kind this build does not know)
		}
		if err != nil {
			return nil, err
		}
		// A 1:1 conversation's messages list both sides (search.DocOf, from
		// the message's from and to): the index may find all of uid's at
		// once.
		ranges = append(ranges, search.Range{ConversationID: id, From: since + 1, To: upTo, Member: !isGroup(id)})
	}
	return ranges, nil
}

// searchVisible reports whether hit h is still one uid may see: not in the
// part of its conversation uid cleared, and not deleted by uid for
// themselves. The index knows neither (they are uid's alone).
func (s *Service) searchVisible(ctx context.Context, uid string, h search.Hit, floors map[string]uint64) (bool, error) {
	floor, ok := floors[h.ConversationID]
	if !ok {
		var err error
		if floor, err = s.clearedSeq(ctx, uid, h.ConversationID); err != nil {
			return false, err
		}
		floors[h.ConversationID] = floor
	}
	if h.Seq <= floor {
		return false, nil
	}
	hidden, err := s.store.HiddenMessages(ctx, uid, h.ConversationID, h.Seq, h.Seq)
	if err != nil {
		return false, storeErr(err)
	}
	if gone, err := s.disappeared(ctx, h.ConversationID, h.Seq); err != nil || gone {
		return false, err
	}
	return len(hidden) == 0, nil
}

func hitProto(h search.Hit) *pb.SearchHit {
	out := &pb.SearchHit{ConversationId: h.ConversationID, Seq: h.Seq, From: h.From, ServerTime: h.Time, Snippet: h.Snippet}
	for _, r := range h.Highlights {
		out.Highlights = append(out.Highlights, &pb.TextRange{Start: uint32(r[0]), End: uint32(r[1])})
	}
	return out
}

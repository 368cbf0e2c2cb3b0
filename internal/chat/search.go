package chat

import (
	"context"
	"errors"
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
	// searchSlotCount bounds the searches a node runs at once; past it a
	// search is refused with TOO_MANY_REQUESTS (temporary), so searches
	// cannot take the cores sends need.
	searchSlotCount = 8
	// searchRounds bounds the index calls of one request: hits the user
	// deleted for themselves are left out after the index answers, so a
	// page may take more than one call to fill.
	searchRounds = 4
)

// searchMessages answers a Search: the conversations uid reads (or the one
// asked for), each narrowed to the seqs uid may read there, searched by the
// index; what uid deleted for themselves is left out of the hits.
func (s *Service) searchMessages(ctx context.Context, c Replier, sess *session.Session, id uint64, r *pb.Search) error {
	if s.cfg.Search == nil {
		return errUnavail
	}
	uid := sess.UserID
	if r.Query == "" || len(r.Query) > maxSearchQuery || !utf8.ValidString(r.Query) || r.Limit > search.MaxLimit ||
		len(r.ConversationId) > maxConversationID || len(r.From) > maxConversationID || len(r.ContentType) > maxContentType ||
		(r.Since != 0 && r.Until != 0 && r.Since > r.Until) {
		return errBadRequest
	}
	if !s.searchSlots.TryAcquire(1) {
		s.stats.searchesRefused.Add(1)
		return errTooMany // every search slot of this node is busy: retry shortly
	}
	defer s.searchSlots.Release(1)

	ranges, err := s.searchRanges(ctx, uid, r.ConversationId)
	if err != nil {
		return err
	}
	limit := int(r.Limit)
	if limit == 0 {
		limit = defaultSearchLimit
	}
	q := search.Query{
		Text: r.Query, Phrase: r.Phrase, UserID: uid, Ranges: ranges,
		From: r.From, ContentType: r.ContentType, HasAttachment: r.HasAttachment,
		Since: r.Since, Until: r.Until,
	}
	if b := r.Before; b != nil {
		q.Before = &search.Cursor{Time: b.ServerTime, ConversationID: b.ConversationId, Seq: b.Seq}
	}
	out := &pb.SearchResults{}
	floors := map[string]uint64{} // per conversation: the seq uid cleared up to
	for round := 0; round < searchRounds && len(out.Hits) < limit; round++ {
		q.Limit = limit - len(out.Hits)
		res, err := s.cfg.Search.Search(ctx, q)
		if errors.Is(err, search.ErrBadQuery) {
			return errBadRequest
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("search failed", "err", err)
			}
			return errUnavail
		}
		for _, h := range res.Hits {
			ok, err := s.searchVisible(ctx, uid, h, floors)
			if err != nil {
				return err
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
	c.SendFrame(&pb.ServerFrame{Id: id, Body: &pb.ServerFrame_SearchResults{SearchResults: out}})
	return nil
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
		ranges = append(ranges, search.Range{ConversationID: id, From: since + 1, To: upTo})
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
	return len(hidden) == 0, nil
}

func hitProto(h search.Hit) *pb.SearchHit {
	out := &pb.SearchHit{ConversationId: h.ConversationID, Seq: h.Seq, From: h.From, ServerTime: h.Time, Snippet: h.Snippet}
	for _, r := range h.Highlights {
		out.Highlights = append(out.Highlights, &pb.TextRange{Start: uint32(r[0]), End: uint32(r[1])})
	}
	return out
}

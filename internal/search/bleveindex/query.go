package bleveindex

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/blevesearch/bleve/v2"
	"github.com/blevesearch/bleve/v2/analysis"
	bsearch "github.com/blevesearch/bleve/v2/search"
	"github.com/blevesearch/bleve/v2/search/query"
	bindex "github.com/blevesearch/bleve_index_api"
	"golang.org/x/text/unicode/norm"

	"github.com/parleyim/parley/internal/search"
)

// How a Search restricts itself to the query's Ranges, and bounds its work.
//
// The user's member conversations (Range.Member: their 1:1 conversations,
// whose documents list them in the member field) are one term, the user's
// member term, when there are at least minMemberRanges of them: one
// dictionary lookup per index segment however many 1:1 conversations the
// user has, where a term per conversation cost a lookup per conversation
// per segment. The other ranges (groups) each add a term of their
// conversation; Bleve ORs the terms' posting bitmaps (no scoring is asked
// for). Up to maxExactRanges ranges with seq bounds are each (conversation
// AND seq range); past that their conversations are plain terms too. The
// member term also finds the user's 1:1 conversations that are not in the
// Ranges: every hit is checked against the ranges (conversation, seq
// bounds, Hidden seqs) before it is returned, so the index never returns
// what the query does not allow.
//
// The date filters and paging need no query clause: hits come newest first
// by the sort key, which begins with the time, so Until and Before are
// where the sorted hits start (Bleve's SearchAfter) and Since is where
// reading them stops.
//
// Bleve sorts all the documents that match (text, visibility, filters) to
// find the newest; the checked hits are read from it in pages of
// 2×Limit+1, and one Search reads at most maxExamined of them: when that
// runs out before Limit+1 hits passed the checks (a user who hid many of
// the matches, or many bounded ranges), the page ends early with Next at
// the last hit read, and the next call goes on from there.
const (
	maxExactRanges  = 64
	maxExamined     = 1000
	minMemberRanges = 4
)

// newSortOrder is the order of hits. A new one for each request: Bleve's
// SortField keeps per-search state (it is written while hits are collected),
// so concurrent searches must not share one.
func newSortOrder() bsearch.SortOrder {
	return bsearch.SortOrder{&bsearch.SortField{Field: fKey, Type: bsearch.SortFieldAsString, Desc: true}}
}

// sortValues is a cursor as Bleve's SearchAfter takes it.
func sortValues(c search.Cursor) []string { return []string{sortKey(c)} }

// Search implements search.Index.
func (x *Index) Search(ctx context.Context, q search.Query) (_ search.Result, err error) {
	if err := x.enter(); err != nil {
		return search.Result{}, err
	}
	defer x.mu.RUnlock()
	defer recoverInto(&err)
	if len(q.Text) > search.MaxQueryBytes {
		return search.Result{}, search.ErrBadQuery
	}
	limit := q.Limit
	if limit <= 0 || limit > search.MaxLimit {
		limit = search.MaxLimit
	}
	everywhere := q.Operator && len(q.Ranges) == 0
	if len(q.Ranges) == 0 && !everywhere {
		return search.Result{}, nil
	}
	textQ, words, err := x.textQuery(q.Text, q.Phrase)
	if err != nil || textQ == nil {
		return search.Result{}, err
	}

	vis := newVisibility(q.Ranges)
	clauses := []query.Query{textQ}
	if !everywhere {
		member := ""
		if !q.Operator {
			member = q.UserID
		}
		clauses = append(clauses, vis.query(member))
	}
	if !q.Operator {
		senderOnly := []query.Query{term(fVis, visAll)}
		if q.UserID != "" {
			senderOnly = append(senderOnly, term(fFrom, q.UserID))
		}
		clauses = append(clauses, bleve.NewDisjunctionQuery(senderOnly...))
	}
	if q.From != "" {
		clauses = append(clauses, term(fFrom, q.From))
	}
	if q.ContentType != "" {
		clauses = append(clauses, term(fCType, q.ContentType))
	}
	if q.HasAttachment {
		b := bleve.NewBoolFieldQuery(true)
		b.SetField(fAtt)
		clauses = append(clauses, b)
	}
	until := q.Until
	if q.Before != nil && (until == 0 || q.Before.Time < until) {
		until = q.Before.Time
	}
	all := bleve.NewConjunctionQuery(clauses...)

	// Where the sorted hits start: after the cursor, or after the last key
	// of Until's time.
	var after []string
	switch {
	case q.Before != nil && q.Before.Time <= until:
		after = sortValues(*q.Before)
	case until != 0:
		after = []string{timeKey(until)}
	}
	var res search.Result
	examined := 0
	fetch := 2*limit + 1
	for {
		req := bleve.NewSearchRequestOptions(all, fetch, 0, false)
		req.Score = "none"
		req.SortByCustom(newSortOrder())
		req.SearchAfter = after
		sr, err := x.idx.SearchInContext(ctx, req)
		if err != nil {
			return search.Result{}, fmt.Errorf("bleveindex: %w", err)
		}
		for _, h := range sr.Hits {
			examined++
			hit, ok := hitOf(h)
			if ok && q.Since != 0 && hit.Time < q.Since {
				return x.withSnippets(res, words) // older ones are older still
			}
			if ok && (everywhere || vis.allows(hit.ConversationID, hit.Seq)) {
				res.Hits = append(res.Hits, hit)
				if len(res.Hits) > limit {
					res.Hits = res.Hits[:limit]
					c := res.Hits[limit-1].Cursor()
					res.Next = &c
					return x.withSnippets(res, words)
				}
			}
			if examined >= maxExamined {
				c := hit.Cursor()
				res.Next = &c
				return x.withSnippets(res, words)
			}
		}
		if len(sr.Hits) < fetch {
			return x.withSnippets(res, words)
		}
		last, _ := hitOf(sr.Hits[len(sr.Hits)-1])
		after = sortValues(last.Cursor())
	}
}

// hitOf reads a Bleve hit's id and sort key.
func hitOf(h *bsearch.DocumentMatch) (search.Hit, bool) {
	conv, seq, ok := parseDocID(h.ID)
	if !ok || len(h.Sort) != 1 {
		return search.Hit{}, false
	}
	t, from, ok := keyFields(h.Sort[0])
	if !ok {
		return search.Hit{}, false
	}
	return search.Hit{ConversationID: conv, Seq: seq, From: from, Time: t}, true
}

// withSnippets fills in the hits' snippets from their stored text; a hit
// whose document is gone since (recalled meanwhile) is dropped.
func (x *Index) withSnippets(res search.Result, words map[string]bool) (search.Result, error) {
	kept := res.Hits[:0]
	for _, h := range res.Hits {
		doc, err := x.idx.Document(docID(h.ConversationID, h.Seq))
		if err != nil {
			return search.Result{}, fmt.Errorf("bleveindex: %w", err)
		}
		if doc == nil {
			continue
		}
		var text []byte
		doc.VisitFields(func(f bindex.Field) {
			if f.Name() == fText {
				text = f.Value()
			}
		})
		h.Snippet, h.Highlights = search.Snippet(string(text), words)
		kept = append(kept, h)
	}
	res.Hits = kept
	return res, nil
}

func term(field, value string) query.Query {
	t := bleve.NewTermQuery(value)
	t.SetField(field)
	return t
}

// numberRange is min <= field <= max, each bound only when set.
func numberRange(field string, min, max int64, hasMin, hasMax bool) query.Query {
	var lo, hi *float64
	if hasMin {
		f := float64(min)
		lo = &f
	}
	if hasMax {
		f := float64(max)
		hi = &f
	}
	yes := true
	r := bleve.NewNumericRangeInclusiveQuery(lo, hi, &yes, &yes)
	r.SetField(field)
	return r
}

// textQuery turns the query text into a Bleve query (nil: no word in it)
// and the set of terms to highlight.
//
// Words: every word must match; a run of an n-gram script must match as
// a whole, so its bigrams form a phrase. Phrase: every term at its
// position, gaps (the last character of a run has no bigram) matching
// anything.
func (x *Index) textQuery(text string, phrase bool) (query.Query, map[string]bool, error) {
	toks := x.query.Analyze([]byte(norm.NFC.String(text)))
	if len(toks) == 0 {
		return nil, nil, nil
	}
	words := make(map[string]bool)
	for _, t := range toks {
		words[string(t.Term)] = true
	}
	if len(words) > search.MaxQueryTerms {
		return nil, nil, search.ErrBadQuery
	}
	if phrase {
		return phraseOf(toks), words, nil
	}
	var parts []query.Query
	seen := make(map[string]bool)
	for i := 0; i < len(toks); {
		j := i + 1
		if toks[i].Type == typeBigram {
			for j < len(toks) && toks[j].Type == typeBigram &&
				toks[j].Position == toks[j-1].Position+1 && toks[j].Start < toks[j-1].End {
				j++
			}
		}
		key := ""
		for _, t := range toks[i:j] {
			key += string(t.Term) + "\x00"
		}
		if !seen[key] {
			seen[key] = true
			parts = append(parts, phraseOf(toks[i:j]))
		}
		i = j
	}
	if len(parts) == 1 {
		return parts[0], words, nil
	}
	return bleve.NewConjunctionQuery(parts...), words, nil
}

// phraseOf is the tokens at their relative positions (a single term when
// there is one token).
func phraseOf(toks analysis.TokenStream) query.Query {
	if len(toks) == 1 {
		return term(fText, string(toks[0].Term))
	}
	first, last := math.MaxInt, 0
	for _, t := range toks {
		first, last = min(first, t.Position), max(last, t.Position)
	}
	terms := make([][]string, last-first+1)
	for _, t := range toks {
		p := t.Position - first
		if !slices.Contains(terms[p], string(t.Term)) {
			terms[p] = append(terms[p], string(t.Term))
		}
	}
	return query.NewMultiPhraseQuery(terms, fText)
}

// visibility is the query's ranges by conversation.
type visibility map[string][]search.Range

func newVisibility(ranges []search.Range) visibility {
	v := make(visibility, len(ranges))
	for _, r := range ranges {
		r.Hidden = slices.Clone(r.Hidden)
		slices.Sort(r.Hidden)
		v[r.ConversationID] = append(v[r.ConversationID], r)
	}
	return v
}

// memberConv: the conversation's ranges all say it is a member one.
func memberConv(rs []search.Range) bool {
	return !slices.ContainsFunc(rs, func(r search.Range) bool { return !r.Member })
}

func whole(r search.Range) bool { return r.From <= 1 && r.To == 0 }

// query restricts a search to the ranges' conversations, and to their seq
// bounds when there are few bounded ranges. member, when not "", is the
// user whose member ranges one member term may stand for.
func (v visibility) query(member string) query.Query {
	byMember := false
	if member != "" {
		n := 0
		for _, rs := range v {
			if memberConv(rs) {
				n++
			}
		}
		byMember = n >= minMemberRanges
	}
	bounded := 0
	for _, rs := range v {
		for _, r := range rs {
			if !whole(r) && !(byMember && memberConv(rs)) {
				bounded++
			}
		}
	}
	exact := bounded <= maxExactRanges
	var clauses []query.Query
	if byMember {
		clauses = append(clauses, term(fMember, member))
	}
	for conv, rs := range v {
		if byMember && memberConv(rs) {
			continue
		}
		if !exact || slices.ContainsFunc(rs, whole) {
			clauses = append(clauses, term(fConv, conv))
			continue
		}
		for _, r := range rs {
			to := int64(r.To)
			seqs := numberRange(fSeq, int64(r.From), to, true, r.To != 0)
			// Documents with members have no seq: their bounds are
			// checked on the hits.
			clauses = append(clauses, bleve.NewConjunctionQuery(term(fConv, conv),
				bleve.NewDisjunctionQuery(seqs, term(fMember, memberAny))))
		}
	}
	return bleve.NewDisjunctionQuery(clauses...)
}

// allows: seq of conv is in one of its ranges and not hidden there.
func (v visibility) allows(conv string, seq uint64) bool {
	for _, r := range v[conv] {
		if seq < r.From || (r.To != 0 && seq > r.To) {
			continue
		}
		if _, hidden := slices.BinarySearch(r.Hidden, seq); !hidden {
			return true
		}
	}
	return false
}

// Package searchtest is the conformance suite every search.Index passes:
// visibility by ranges, sender-only documents, edits and deletes, filters,
// newest-first paging, the language table, phrases, snippets and limits.
package searchtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parleyim/parley/internal/search"
)

// Harness is one empty index under test.
type Harness struct {
	Index search.Index
	// Apply makes changes visible to Index.Search. nil: Index.Apply with
	// increasing positions.
	Apply func(t *testing.T, changes []search.Change)
}

// Run runs the suite; newHarness returns an empty index (closed by the
// suite when the test ends).
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	s := func(name string, f func(t *testing.T, h *suite)) {
		t.Run(name, func(t *testing.T) {
			hn := newHarness(t)
			h := &suite{Harness: hn}
			t.Cleanup(func() { _ = hn.Index.Close() })
			f(t, h)
		})
	}
	s("Visibility", testVisibility)
	s("ManyRanges", testManyRanges)
	s("MemberRanges", testMemberRanges)
	s("SenderOnly", testSenderOnly)
	s("Operator", testOperator)
	s("EditReplacesText", testEdit)
	s("Delete", testDelete)
	s("Filters", testFilters)
	s("Paging", testPaging)
	s("Languages", testLanguages)
	s("PhraseAndWords", testPhrase)
	s("Snippets", testSnippets)
	s("Limits", testLimits)
}

type suite struct {
	Harness
	pos uint64
}

func (h *suite) apply(t *testing.T, changes ...search.Change) {
	t.Helper()
	if h.Harness.Apply != nil {
		h.Harness.Apply(t, changes)
		return
	}
	h.pos++
	if err := h.Index.Apply(context.Background(), changes, h.pos); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func (h *suite) put(t *testing.T, docs ...search.Doc) {
	t.Helper()
	var cs []search.Change
	for i := range docs {
		cs = append(cs, search.Change{Put: &docs[i]})
	}
	h.apply(t, cs...)
}

func (h *suite) search(t *testing.T, q search.Query) search.Result {
	t.Helper()
	r, err := h.Index.Search(context.Background(), q)
	if err != nil {
		t.Fatalf("Search(%+v): %v", q, err)
	}
	return r
}

// ids renders hits as "conv/seq".
func ids(hits []search.Hit) []string {
	out := make([]string, 0, len(hits))
	for _, h := range hits {
		out = append(out, fmt.Sprintf("%s/%d", h.ConversationID, h.Seq))
	}
	return out
}

func all(convs ...string) []search.Range {
	var rs []search.Range
	for _, c := range convs {
		rs = append(rs, search.Range{ConversationID: c, From: 1})
	}
	return rs
}

func (h *suite) expect(t *testing.T, q search.Query, want ...string) {
	t.Helper()
	got := ids(h.search(t, q).Hits)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("query %q ranges %v: hits %v, want %v", q.Text, q.Ranges, got, want)
	}
}

func doc(conv string, seq uint64, text string) search.Doc {
	return search.Doc{ConversationID: conv, Seq: seq, From: "u1", Text: text, Time: int64(1000 + seq)}
}

func testVisibility(t *testing.T, h *suite) {
	for _, c := range []string{"d:a:b", "g:1", "g:2"} {
		for seq := uint64(1); seq <= 8; seq++ {
			h.put(t, doc(c, seq, fmt.Sprintf("apple number %d", seq)))
		}
	}
	h.expect(t, search.Query{Text: "apple", Ranges: nil})
	h.expect(t, search.Query{Text: "apple", Ranges: []search.Range{
		{ConversationID: "d:a:b", From: 6},
		{ConversationID: "g:1", From: 3, To: 4},
		{ConversationID: "g:1", From: 8, To: 8, Hidden: []uint64{8}},
		{ConversationID: "g:3", From: 1}, // no documents
	}}, "d:a:b/6", "d:a:b/7", "d:a:b/8", "g:1/3", "g:1/4")
	h.expect(t, search.Query{Text: "apple", Ranges: []search.Range{
		{ConversationID: "g:2", From: 1, Hidden: []uint64{2, 3, 4, 5, 6, 7}},
	}}, "g:2/1", "g:2/8")
	// A range over a seq with no document, and a conversation id that
	// prefixes another's, find nothing.
	h.expect(t, search.Query{Text: "apple", Ranges: []search.Range{{ConversationID: "g", From: 1}, {ConversationID: "g:1", From: 9}}})
}

func testManyRanges(t *testing.T, h *suite) {
	var docs []search.Doc
	for i := range 300 {
		docs = append(docs, doc(fmt.Sprintf("g:%03d", i), 1, "shared words here"), doc(fmt.Sprintf("g:%03d", i), 2, "shared words again"))
	}
	h.put(t, docs...)
	// 300 bounded ranges: each conversation's seq 2 only, every third
	// conversation left out, and seq 2 of g:000 hidden.
	var rs []search.Range
	var want []string
	for i := range 300 {
		if i%3 == 0 && i > 0 {
			continue
		}
		r := search.Range{ConversationID: fmt.Sprintf("g:%03d", i), From: 2, To: 2}
		if i == 0 {
			r.Hidden = []uint64{2}
		} else {
			want = append(want, fmt.Sprintf("g:%03d/2", i))
		}
		rs = append(rs, r)
	}
	var got []string
	q := search.Query{Text: "shared", Ranges: rs, Limit: 100}
	for range 100 {
		r := h.search(t, q)
		got = append(got, ids(r.Hits)...)
		if r.Next == nil {
			break
		}
		q.Before = r.Next
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("300 bounded ranges: %d hits, want %d (first got %v)", len(got), len(want), got[:min(5, len(got))])
	}
}

// testMemberRanges: 1:1 conversations whose documents list their two
// sides (Doc.Members) and whose ranges say so (Range.Member) are found
// exactly as other ranges are: only those in the Ranges, within their
// bounds, not what the user hid, whatever the index makes of Member.
func testMemberRanges(t *testing.T, h *suite) {
	direct := func(a, b string, seq uint64, text string) search.Doc {
		d := doc("p:"+a+":"+b, seq, text)
		d.From, d.Members = a, []string{a, b}
		return d
	}
	var docs []search.Doc
	for _, peer := range []string{"v1", "v2", "v3", "v4", "v5", "v6"} {
		for seq := uint64(1); seq <= 3; seq++ {
			docs = append(docs, direct("u", peer, seq, "kiwi and melon"))
		}
	}
	docs = append(docs, direct("v1", "v2", 1, "kiwi between others"),
		doc("g:1", 1, "kiwi in a group"), doc("g:1", 2, "kiwi later in a group"))
	h.put(t, docs...)
	member := func(peer string, from, to uint64, hidden ...uint64) search.Range {
		return search.Range{ConversationID: "p:u:" + peer, From: from, To: to, Hidden: hidden, Member: true}
	}
	rs := []search.Range{
		member("v1", 1, 0), member("v2", 1, 0), member("v3", 1, 0, 2),
		member("v4", 3, 0), // from a retention floor on
		// v5's conversation is not in the ranges (no longer readable)
		member("v6", 1, 2),
		{ConversationID: "g:1", From: 2},
	}
	want := []string{"p:u:v1/1", "p:u:v1/2", "p:u:v1/3", "p:u:v2/1", "p:u:v2/2", "p:u:v2/3",
		"p:u:v3/1", "p:u:v3/3", "p:u:v4/3", "p:u:v6/1", "p:u:v6/2", "g:1/2"}
	h.expect(t, search.Query{Text: "kiwi", UserID: "u", Ranges: rs, Limit: 100}, want...)
	// The same ranges not marked Member, and one bounded 1:1 range alone.
	plain := slices.Clone(rs)
	for i := range plain {
		plain[i].Member = false
	}
	h.expect(t, search.Query{Text: "kiwi", UserID: "u", Ranges: plain, Limit: 100}, want...)
	h.expect(t, search.Query{Text: "kiwi", UserID: "u", Ranges: []search.Range{member("v4", 2, 2)}}, "p:u:v4/2")
	// Paged two at a time, newest first, it is the same set.
	var got []string
	q := search.Query{Text: "kiwi", UserID: "u", Ranges: rs, Limit: 2}
	for range 20 {
		r := h.search(t, q)
		got = append(got, ids(r.Hits)...)
		if r.Next == nil {
			break
		}
		q.Before = r.Next
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("paged: %v, want %v", got, want)
	}
}

func testSenderOnly(t *testing.T, h *suite) {
	shadow := doc("g:1", 2, "buy cheap watches")
	shadow.From, shadow.SenderOnly = "spammer", true
	normal := doc("g:1", 1, "cheap flights")
	h.put(t, normal, shadow)
	h.expect(t, search.Query{Text: "cheap", UserID: "reader", Ranges: all("g:1")}, "g:1/1")
	h.expect(t, search.Query{Text: "cheap", UserID: "spammer", Ranges: all("g:1")}, "g:1/1", "g:1/2")
	h.expect(t, search.Query{Text: "cheap", Ranges: all("g:1")}, "g:1/1")
}

// The operator's search (the admin API's) finds sender-only messages, in
// every conversation when it names none, and still applies the filters.
func testOperator(t *testing.T, h *suite) {
	shadow := doc("g:2", 1, "cheap watches here")
	shadow.From, shadow.SenderOnly = "spammer", true
	h.put(t, doc("g:1", 1, "cheap flights"), doc("d:a:b", 4, "cheap tickets"), shadow)
	h.expect(t, search.Query{Text: "cheap", Operator: true}, "g:2/1", "d:a:b/4", "g:1/1")
	h.expect(t, search.Query{Text: "cheap", Operator: true, From: "spammer"}, "g:2/1")
	h.expect(t, search.Query{Text: "cheap", Operator: true, Ranges: all("g:2")}, "g:2/1")
	h.expect(t, search.Query{Text: "cheap"}) // a user's search with no ranges: nothing
}

func testEdit(t *testing.T, h *suite) {
	h.put(t, doc("g:1", 1, "meet at the old harbour"))
	edited := doc("g:1", 1, "meet at the new station")
	h.put(t, edited)
	h.expect(t, search.Query{Text: "harbour", Ranges: all("g:1")})
	h.expect(t, search.Query{Text: "station", Ranges: all("g:1")}, "g:1/1")
	h.expect(t, search.Query{Text: "meet", Ranges: all("g:1")}, "g:1/1") // one document, not two
}

func testDelete(t *testing.T, h *suite) {
	h.put(t, doc("g:1", 1, "secret plan"), doc("g:1", 2, "public plan"))
	h.apply(t, search.Change{ConversationID: "g:1", Seq: 1}, search.Change{ConversationID: "g:1", Seq: 99})
	h.expect(t, search.Query{Text: "plan", Ranges: all("g:1")}, "g:1/2")
	h.expect(t, search.Query{Text: "secret", Ranges: all("g:1")})
}

func testFilters(t *testing.T, h *suite) {
	a := doc("g:1", 1, "report attached")
	a.From, a.ContentType, a.HasAttachment, a.Time = "alice", "text/markdown", true, 5000
	b := doc("g:1", 2, "report coming")
	b.From, b.Time = "bob", 6000
	c := doc("g:1", 3, "report done")
	c.From, c.ContentType, c.Time = "alice", "app/card", 7000
	h.put(t, a, b, c)
	q := func(f func(*search.Query)) search.Query {
		q := search.Query{Text: "report", Ranges: all("g:1")}
		f(&q)
		return q
	}
	h.expect(t, q(func(q *search.Query) { q.From = "alice" }), "g:1/1", "g:1/3")
	h.expect(t, q(func(q *search.Query) { q.ContentType = "text/markdown" }), "g:1/1")
	h.expect(t, q(func(q *search.Query) { q.HasAttachment = true }), "g:1/1")
	h.expect(t, q(func(q *search.Query) { q.Since = 6000 }), "g:1/2", "g:1/3")
	h.expect(t, q(func(q *search.Query) { q.Until = 6000 }), "g:1/1", "g:1/2")
	h.expect(t, q(func(q *search.Query) { q.Since, q.Until = 6000, 6000 }), "g:1/2")
	h.expect(t, q(func(q *search.Query) { q.From, q.Since = "alice", 5001 }), "g:1/3")
}

// testPaging: pages of every size walk all hits newest first (time, then
// conversation, then seq, descending), each once; many share a time.
func testPaging(t *testing.T, h *suite) {
	var docs []search.Doc
	var want []search.Cursor
	convs := []string{"d:a:b", "g:1", "g:2"}
	for i := range 180 {
		c := convs[i%3]
		d := doc(c, uint64(i/3+1), "paging test message")
		d.Time = int64(1000 + i/7) // runs of 7 with one time
		docs = append(docs, d)
		want = append(want, search.Cursor{Time: d.Time, ConversationID: c, Seq: d.Seq})
	}
	h.put(t, docs...)
	docs = append(docs, doc("g:9", 1, "paging elsewhere")) // not in the ranges
	h.put(t, docs[len(docs)-1])
	slices.SortFunc(want, func(a, b search.Cursor) int {
		if b.Less(a) {
			return -1
		}
		if a.Less(b) {
			return 1
		}
		return 0
	})
	for _, limit := range []int{1, 7, 50, 100} {
		q := search.Query{Text: "paging", Ranges: all(convs...), Limit: limit}
		var got []search.Cursor
		for pages := 0; ; pages++ {
			if pages > len(want)+1 {
				t.Fatalf("limit %d: paging does not end", limit)
			}
			r := h.search(t, q)
			if len(r.Hits) > limit {
				t.Fatalf("limit %d: page of %d hits", limit, len(r.Hits))
			}
			for _, hit := range r.Hits {
				got = append(got, hit.Cursor())
			}
			if r.Next == nil {
				break
			}
			q.Before = r.Next
		}
		if !slices.Equal(got, want) {
			t.Fatalf("limit %d: %d hits in order %v..., want %d in order %v...", limit, len(got), got[:min(len(got), 4)], len(want), want[:4])
		}
	}
}

// langCase: a document and queries that must (or must not) find it.
type langCase struct {
	text  string
	finds []string
	not   []string
}

// Languages is the language table: case and accents fold in alphabets;
// scripts without spaces are found by substring.
var Languages = []langCase{
	{"Meet me at the Café de Flore", []string{"cafe", "CAFÉ", "café", "flore"}, []string{"caff"}},
	{"Ärger im Büro wegen der Hauptstraße", []string{"arger", "ÄRGER", "buro", "hauptstrasse", "Hauptstraße"}, []string{"haupt"}},
	{"Встретимся у метро Пушкинская", []string{"пушкинская", "МЕТРО", "Встретимся"}, []string{"москва"}},
	{"Ёлка стоит в парке", []string{"елка", "ёлка", "ПАРКЕ"}, nil},
	{"Καλημέρα από την Αθήνα", []string{"αθηνα", "ΚΑΛΗΜΕΡΑ", "Αθήνα"}, []string{"σπάρτη"}},
	{"مرحبا بكم في القاهرة", []string{"القاهرة", "القَاهِرَة", "مرحبا"}, []string{"بيروت"}},
	{"我们明天在北京西站见面", []string{"北京", "西站", "京西", "北京西站", "见"}, []string{"上海", "京东"}},
	{"東京タワーに行きました", []string{"タワー", "東京", "行き", "京タ", "東京タワー"}, []string{"大阪", "タワ東"}},
	{"내일 서울역에서 만나요", []string{"서울역", "서울", "만나요", "역에서"}, []string{"부산"}},
	{"พรุ่งนี้ไปตลาดน้ำ", []string{"ตลาด", "ตลาดน้ำ", "ไปตลาด"}, []string{"ทะเล"}},
	{"Party tonight 🎉🎉 at Bob's place", []string{"party", "TONIGHT", "place"}, []string{"🎉"}},
	{"Order #12345 shipped to 221B Baker Street", []string{"12345", "baker street", "221b"}, []string{"12346"}},
}

func testLanguages(t *testing.T, h *suite) {
	for i, c := range Languages {
		h.put(t, doc("g:1", uint64(i+1), c.text))
	}
	for i, c := range Languages {
		id := fmt.Sprintf("g:1/%d", i+1)
		for _, q := range c.finds {
			if got := ids(h.search(t, search.Query{Text: q, Ranges: all("g:1")}).Hits); !slices.Contains(got, id) {
				t.Errorf("%q does not find %q (hits %v)", q, c.text, got)
			}
		}
		for _, q := range c.not {
			if got := ids(h.search(t, search.Query{Text: q, Ranges: all("g:1")}).Hits); slices.Contains(got, id) {
				t.Errorf("%q finds %q", q, c.text)
			}
		}
	}
	// Queries without a word match nothing, and are no error.
	for _, q := range []string{"", "   ", "🎉🎉", "!!!"} {
		h.expect(t, search.Query{Text: q, Ranges: all("g:1")})
	}
}

func testPhrase(t *testing.T, h *suite) {
	h.put(t, doc("g:1", 1, "the quick brown fox"), doc("g:1", 2, "the brown quick fox"),
		doc("g:1", 3, "我们明天在北京西站见面"), doc("g:1", 4, "北京的西站"))
	r := all("g:1")
	h.expect(t, search.Query{Text: "quick brown", Ranges: r}, "g:1/1", "g:1/2")
	h.expect(t, search.Query{Text: "quick brown", Phrase: true, Ranges: r}, "g:1/1")
	h.expect(t, search.Query{Text: "QUICK, Brown!", Phrase: true, Ranges: r}, "g:1/1")
	h.expect(t, search.Query{Text: "brown fox", Phrase: true, Ranges: r}, "g:1/1")
	h.expect(t, search.Query{Text: "the fox", Phrase: true, Ranges: r})
	h.expect(t, search.Query{Text: "北京 西站", Ranges: r}, "g:1/3", "g:1/4")
	h.expect(t, search.Query{Text: "北京西站", Ranges: r}, "g:1/3")
	h.expect(t, search.Query{Text: "北京西站", Phrase: true, Ranges: r}, "g:1/3")
	// In a phrase, runs next to each other may be one run of the text or
	// two; a run between other words must be a whole run, the first may
	// end one and the last begin one.
	h.put(t, doc("g:1", 5, "东北京，西站口"), doc("g:1", 6, "the brown 北京烤鸭 fox"))
	h.expect(t, search.Query{Text: "北京 西站", Phrase: true, Ranges: r}, "g:1/3", "g:1/5")
	h.expect(t, search.Query{Text: "brown 北京", Phrase: true, Ranges: r}, "g:1/6")
	h.expect(t, search.Query{Text: "brown 烤鸭", Phrase: true, Ranges: r})
	h.expect(t, search.Query{Text: "brown 北京烤鸭 fox", Phrase: true, Ranges: r}, "g:1/6")
	h.expect(t, search.Query{Text: "brown 北京 fox", Phrase: true, Ranges: r})
	h.expect(t, search.Query{Text: "烤鸭 fox", Phrase: true, Ranges: r}, "g:1/6")
}

func testSnippets(t *testing.T, h *suite) {
	long := strings.Repeat("ünïcödé filler ", 40) + "the TARGET word " + strings.Repeat("续写文字 ", 60)
	h.put(t, doc("g:1", 1, long), doc("g:1", 2, "short Target"))
	check := func(q, wantMark string, seq uint64) {
		t.Helper()
		res := h.search(t, search.Query{Text: q, Ranges: all("g:1")})
		var hit *search.Hit
		for i := range res.Hits {
			if res.Hits[i].Seq == seq {
				hit = &res.Hits[i]
			}
		}
		if hit == nil {
			t.Fatalf("%q: no hit for seq %d", q, seq)
		}
		s := hit.Snippet
		if len(s) > search.SnippetBytes || !utf8.ValidString(s) || s == "" {
			t.Fatalf("%q: snippet of %d bytes, valid UTF-8 %v: %q", q, len(s), utf8.ValidString(s), s)
		}
		if len(hit.Highlights) == 0 {
			t.Fatalf("%q: snippet %q without highlights", q, s)
		}
		end := 0
		for _, hl := range hit.Highlights {
			if hl[0] < end || hl[1] <= hl[0] || hl[1] > len(s) {
				t.Fatalf("%q: highlights %v in a snippet of %d bytes", q, hit.Highlights, len(s))
			}
			end = hl[1]
			if got := s[hl[0]:hl[1]]; !strings.EqualFold(got, wantMark) {
				t.Fatalf("%q: highlight %q, want %q, in %q", q, got, wantMark, s)
			}
		}
	}
	check("target", "TARGET", 1)
	check("target", "Target", 2)
	check("续写", "续写", 1)
	if got := h.search(t, search.Query{Text: "short", Ranges: all("g:1")}).Hits; len(got) != 1 || got[0].Snippet != "short Target" {
		t.Fatalf("a short text's snippet: %+v, want the whole text", got)
	}
}

func testLimits(t *testing.T, h *suite) {
	var docs []search.Doc
	for i := range 150 {
		docs = append(docs, doc("g:1", uint64(i+1), "limit test"))
	}
	h.put(t, docs...)
	for _, limit := range []int{0, -1, 101, 1000} {
		r := h.search(t, search.Query{Text: "limit", Ranges: all("g:1"), Limit: limit})
		if len(r.Hits) != search.MaxLimit || r.Next == nil {
			t.Fatalf("Limit %d: %d hits, next %v; want %d and a next page", limit, len(r.Hits), r.Next, search.MaxLimit)
		}
	}
	for _, q := range []string{strings.Repeat("a", search.MaxQueryBytes+1), manyWords(search.MaxQueryTerms + 1)} {
		if _, err := h.Index.Search(context.Background(), search.Query{Text: q, Ranges: all("g:1")}); !errors.Is(err, search.ErrBadQuery) {
			t.Fatalf("a query of %d bytes: %v, want search.ErrBadQuery", len(q), err)
		}
	}
}

func manyWords(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "w%d ", i)
	}
	return b.String()
}

package pgstore

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/parleyim/parley/internal/search"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Message search on PostgreSQL, with the results of the embedded index
// (both pass internal/search/searchtest).
//
// A searchable message's row holds search_norm, its text as
// search.Normalized cuts and folds it: " w1 w2 run w3 ", words and whole
// runs of scripts written without spaces, each between single spaces. A
// query is cut the same way (search.Units) and becomes LIKE patterns
// served by the trigram index messages_search:
//
//	word             search_norm LIKE '% word %'
//	run (CJK, Thai)  search_norm LIKE '%run%'   (a substring of a run)
//	phrase of words  search_norm LIKE '% w1 w2 w3 %'
//	phrase with runs search_norm ~ ' w1 [^ ]*run1 ?run2 w3 ' (runs next
//	                 to each other may stand in one run or two), plus each
//	                 unit's LIKE, which the index serves better
//
// The rows are restricted to the query's ranges (an unnest of arrays
// joined on the conversation and the seq bounds, hidden seqs left out),
// to SenderOnly rows of the asking user, and to the filters; sorted newest
// first (server_time, conversation_id, seq descending) from the cursor;
// Limit+1 rows are read so Next is known. One search is bounded by
// searchTimeout: a search that would run longer (a very common word over a
// huge history) fails rather than hold a connection.

// searchTimeout bounds one Search (below the store's QueryTimeout when that
// is shorter).
const searchTimeout = 3 * time.Second

// searchRow is what a message's row holds for search; all NULL when it
// has nothing to search.
type searchRow struct {
	norm, ctype     pgtype.Text
	time            pgtype.Int8
	att, senderOnly pgtype.Bool
}

// searchRowOf is m's search fields (search.DocOf decides what is
// searchable).
func searchRowOf(m *pb.Message) searchRow {
	d := search.DocOf(m)
	if d == nil {
		return searchRow{}
	}
	n := search.Normalized(d.Text)
	if n == "" {
		return searchRow{}
	}
	r := searchRow{
		norm:       pgtype.Text{String: n, Valid: true},
		time:       pgtype.Int8{Int64: d.Time, Valid: true},
		att:        pgtype.Bool{Bool: d.HasAttachment, Valid: true},
		senderOnly: pgtype.Bool{Bool: d.SenderOnly, Valid: true},
	}
	// PostgreSQL text cannot hold NUL: such a content type is left out
	// (the message stays searchable, not by that filter).
	if !strings.ContainsRune(d.ContentType, 0) {
		r.ctype = pgtype.Text{String: d.ContentType, Valid: true}
	}
	return r
}

// searchCols are the search fields of a batch of rows, as insertMessages
// takes them.
type searchCols struct {
	norm, ctype     []pgtype.Text
	time            []pgtype.Int8
	att, senderOnly []pgtype.Bool
}

func (c *searchCols) add(r searchRow) {
	c.norm, c.ctype, c.time = append(c.norm, r.norm), append(c.ctype, r.ctype), append(c.time, r.time)
	c.att, c.senderOnly = append(c.att, r.att), append(c.senderOnly, r.senderOnly)
}

func (c *searchCols) args() []any {
	return []any{c.norm, c.time, c.ctype, c.att, c.senderOnly}
}

// Search answers q (search.Index's Search): ErrBadQuery for a query past
// search.MaxQueryBytes or MaxQueryTerms, ErrUnavailable when the database
// cannot answer (or not within searchTimeout).
func (s *Store) Search(ctx context.Context, q search.Query) (search.Result, error) {
	words, err := search.QueryTerms(q.Text)
	if err != nil {
		return search.Result{}, err
	}
	if (len(q.Ranges) == 0 && !q.Operator) || len(words) == 0 {
		return search.Result{}, nil
	}
	ctx, done, err := s.enter(ctx)
	if err != nil {
		return search.Result{}, err
	}
	defer done()
	ctx, cancel := context.WithTimeout(ctx, searchTimeout)
	defer cancel()

	limit := q.Limit
	if limit <= 0 || limit > search.MaxLimit {
		limit = search.MaxLimit
	}
	sql, args := s.searchSQL(q, search.Units(q.Text), limit+1)
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return search.Result{}, mapErr("search", err)
	}
	var res search.Result
	var conv, from string
	var seq, at int64
	var body []byte
	var crc int32
	read := 0
	var last search.Cursor // of the last row read
	_, err = pgx.ForEachRow(rows, []any{&conv, &seq, &from, &at, &body, &crc}, func() error {
		if read++; read > limit {
			res.Next = &last // there is more
			return nil
		}
		last = search.Cursor{Time: at, ConversationID: conv, Seq: uint64(seq)}
		m, err := s.decode(conv, seq, body, crc)
		if errors.Is(err, store.ErrCorrupt) {
			return nil // logged by decode; never served, not a failed search
		} else if err != nil {
			return err
		}
		d := search.DocOf(m)
		if d == nil {
			return nil
		}
		h := search.Hit{ConversationID: conv, Seq: uint64(seq), From: from, Time: at}
		h.Snippet, h.Highlights = search.Snippet(d.Text, words)
		res.Hits = append(res.Hits, h)
		return nil
	})
	if err != nil {
		return search.Result{}, mapErr("search", err)
	}
	return res, nil
}

// searchSQL builds the statement of q: units are q.Text's (not empty),
// fetch the rows to read.
func (s *Store) searchSQL(q search.Query, units []search.Unit, fetch int) (string, []any) {
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	n := len(q.Ranges)
	convs, los, his := make([]string, n), make([]int64, n), make([]int64, n)
	var hiddenAt, hiddenSeqs []int64
	for i, r := range q.Ranges {
		convs[i], los[i], his[i] = r.ConversationID, clampSeq(r.From), math.MaxInt64
		if r.To != 0 {
			his[i] = clampSeq(r.To)
		}
		for _, h := range r.Hidden {
			hiddenAt, hiddenSeqs = append(hiddenAt, int64(i+1)), append(hiddenSeqs, clampSeq(h))
		}
	}
	var b strings.Builder
	b.WriteString(`SELECT m.conversation_id, m.seq, m.sender, m.server_time, m.body, m.crc FROM ` + s.q.schema + `.messages m
		WHERE m.search_norm IS NOT NULL`)
	if len(q.Ranges) > 0 {
		s.searchRangesSQL(&b, arg, convs, los, his, hiddenAt, hiddenSeqs)
	}
	if !q.Operator {
		b.WriteString(` AND (NOT m.sender_only OR m.sender = ` + arg(q.UserID) + `)`)
	}
	for _, p := range textPatterns(units, q.Phrase) {
		op := " LIKE "
		if p.regex {
			op = " ~ "
		}
		b.WriteString(" AND m.search_norm" + op + arg(p.pattern))
	}
	if q.From != "" {
		b.WriteString(` AND m.sender = ` + arg(q.From))
	}
	if q.ContentType != "" {
		b.WriteString(` AND m.content_type = ` + arg(q.ContentType))
	}
	if q.HasAttachment {
		b.WriteString(` AND m.has_attachment`)
	}
	if q.Since != 0 {
		b.WriteString(` AND m.server_time >= ` + arg(q.Since))
	}
	if q.Until != 0 {
		b.WriteString(` AND m.server_time <= ` + arg(q.Until))
	}
	if c := q.Before; c != nil {
		b.WriteString(` AND (m.server_time, m.conversation_id, m.seq) < (` + arg(c.Time) + `::int8, ` +
			arg(c.ConversationID) + `::text COLLATE "C", ` + arg(clampSeq(c.Seq)) + `::int8)`)
	}
	b.WriteString(` ORDER BY m.server_time DESC, m.conversation_id DESC, m.seq DESC LIMIT ` + arg(fetch))
	return b.String(), args
}

// searchRangesSQL adds the condition that a row is in one of its
// conversation's ranges and not hidden there: the conversations as an
// array (the primary key finds their rows), then a correlated EXISTS over
// the arrays, which PostgreSQL runs as a hash semi-join: per row, only its
// conversation's ranges are looked at.
func (s *Store) searchRangesSQL(b *strings.Builder, arg func(any) string, convs []string, los, his, hiddenAt, hiddenSeqs []int64) {
	convsArg := arg(convs)
	b.WriteString(` AND m.conversation_id = ANY(` + convsArg + `::text[])`)
	b.WriteString(` AND EXISTS (SELECT 1 FROM unnest(` + convsArg + `::text[], ` + arg(los) + `::int8[], ` + arg(his) + `::int8[]) WITH ORDINALITY AS r(c, lo, hi, i)
		WHERE r.c = m.conversation_id AND m.seq BETWEEN r.lo AND r.hi`)
	if len(hiddenAt) > 0 {
		b.WriteString(` AND NOT EXISTS (SELECT 1 FROM unnest(` + arg(hiddenAt) + `::int8[], ` + arg(hiddenSeqs) + `::int8[]) AS h(i, s)
			WHERE h.i = r.i AND h.s = m.seq)`)
	}
	b.WriteString(`)`)
}

// textPattern is one condition on search_norm: a LIKE pattern, or a
// regular expression.
type textPattern struct {
	pattern string
	regex   bool
}

// textPatterns are the conditions that find units: each word as a word and
// each run as a substring of a run (in any order), or, for a phrase, all of
// them one after the other.
func textPatterns(units []search.Unit, phrase bool) []textPattern {
	var out []textPattern
	seen := make(map[search.Unit]bool, len(units))
	for _, u := range units {
		if seen[u] {
			continue
		}
		seen[u] = true
		if u.Run {
			out = append(out, textPattern{pattern: "%" + likeEscape(u.Term) + "%"})
		} else {
			out = append(out, textPattern{pattern: "% " + likeEscape(u.Term) + " %"})
		}
	}
	if !phrase || len(units) < 2 {
		return out
	}
	hasRun := false
	for _, u := range units {
		hasRun = hasRun || u.Run
	}
	if !hasRun {
		var b strings.Builder
		b.WriteString("% ")
		for _, u := range units {
			b.WriteString(likeEscape(u.Term) + " ")
		}
		b.WriteString("%")
		return append(out, textPattern{pattern: b.String()})
	}
	// A phrase is its units at consecutive positions, as the index has
	// them: a run in the middle is a whole run of the text; the first may
	// end one, the last may begin one; two runs in a row may be one run
	// of the text or two.
	var b strings.Builder
	b.WriteString(" ")
	for i, u := range units {
		if i == 0 && u.Run {
			b.WriteString("[^ ]*")
		}
		b.WriteString(regexEscape(u.Term))
		switch {
		case i == len(units)-1:
			if !u.Run {
				b.WriteString(" ")
			}
		case u.Run && units[i+1].Run:
			b.WriteString(" ?")
		default:
			b.WriteString(" ")
		}
	}
	return append(out, textPattern{pattern: b.String(), regex: true})
}

// likeEscape escapes LIKE's wildcards and its escape character.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// regexEscape makes every ASCII punctuation character literal in a
// PostgreSQL regular expression (a backslash before a non-alphanumeric
// character is that character).
func regexEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x80 && !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

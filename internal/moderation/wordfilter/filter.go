package wordfilter

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	ac "github.com/petar-dambovaliev/aho-corasick"
)

// Bounds on what New accepts. They keep the compiled filter's memory and
// build time bounded (see the package doc for the measured figures).
const (
	// MaxLists is the most lists one filter holds.
	MaxLists = 256
	// MaxEntries is the most entries, over all lists, one filter holds.
	MaxEntries = 100_000
	// MaxEntryBytes is the longest entry, in bytes of UTF-8 as given.
	MaxEntryBytes = 256
	// MaxPatternBytes bounds the distinct normalized entries, in bytes,
	// summed over the filter: the matcher's size follows it. 2 MiB is an
	// average of 20 bytes over MaxEntries.
	MaxPatternBytes = 2 << 20
	// MaxNameBytes is the longest list name.
	MaxNameBytes = 128
)

// Action is what a list's match does to a message.
type Action uint8

const (
	// None is the zero Action: in a Result, nothing matched. A List may not
	// have it.
	None Action = iota
	// Mask replaces each matched rune of the text with '*'.
	Mask
	// Reject refuses the message. It wins over Mask.
	Reject
)

func (a Action) String() string {
	switch a {
	case None:
		return "none"
	case Mask:
		return "mask"
	case Reject:
		return "reject"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// List is one list of words or phrases and what a match of any of them does.
type List struct {
	// Name identifies the list in a Result (for logs); at most
	// MaxNameBytes, may be empty.
	Name string
	// Action is Mask or Reject.
	Action Action
	// Words are the entries: words or phrases, each valid UTF-8, at most
	// MaxEntryBytes, and not empty once normalized. They are normalized
	// like the text and matched as substrings of it.
	Words []string
	// Leet also undoes digit and symbol substitutions, in the entries and
	// in the text: 0→o, 1→i, 3→e, 4→a, 5→s, 7→t, @→a, $→s; and since 1
	// stands for l as well, l→i. Default off: "l33t" reads "ieet".
	Leet bool
	// IgnoreSeparators skips blanks, punctuation and symbols in the text,
	// so "f.u.c.k" and "f u c k" match "fuck" (and the entry's own
	// separators are dropped: "kill you" matches "killyou"). A match that
	// skipped a separator must also start and end on a word boundary, as
	// with WholeWords, so "it's hit" does not match "shit". Default off.
	IgnoreSeparators bool
	// WholeWords accepts a match only if it starts and ends on a word
	// boundary: "ass" no longer matches in "class" (the Scunthorpe
	// problem), but then "asses" must be listed too. It applies only to
	// letters of scripts written with spaces (Latin, Cyrillic, Greek,
	// Arabic, ...); in Chinese, Japanese, Thai and Korean text a match is
	// a substring match whatever this says. Default off: substrings
	// everywhere, which catches compounds ("fuckface") and CJK.
	WholeWords bool
}

// Error is why New refused its lists. Entry is -1 when the problem is the
// list itself, List is -1 when it is about all lists.
type Error struct {
	List, Entry int
	Reason      string
}

func (e *Error) Error() string {
	switch {
	case e.List < 0:
		return "wordfilter: " + e.Reason
	case e.Entry < 0:
		return fmt.Sprintf("wordfilter: list %d: %s", e.List, e.Reason)
	}
	return fmt.Sprintf("wordfilter: list %d, entry %d: %s", e.List, e.Entry, e.Reason)
}

// Result is what Check found.
type Result struct {
	// Action is None (nothing matched), Mask or Reject.
	Action Action
	// List and Pattern name the match that decided Action, for logs: the
	// list's name and the entry as given. With several matches, the first
	// the matcher reported (the same for the same text and filter).
	List, Pattern string
	// Masked is the text with every Mask match's runes replaced by '*',
	// one per rune; everything else byte for byte as in the text. Set only
	// when Action is Mask.
	Masked string
	// Overflow says the text held more candidate matches than Check
	// examines (256 + about one per byte): it is refused (Action Reject,
	// no List) rather than passed half-masked.
	Overflow bool
}

// Filter matches text against compiled lists. It is immutable once built
// and safe for concurrent use; its only inner state is a pool of scratch
// buffers. To change lists, build a new Filter and swap it in (Holder).
type Filter struct {
	matcher  ac.AhoCorasick
	lists    []list
	variants []plan // the variants some list uses, in a fixed order
	// owners[ownerAt[p]:ownerAt[p+1]] are the entries that normalize to
	// pattern p (the same words may sit in several lists).
	ownerAt []uint32
	owners  []owner
	entries int
	pool    sync.Pool // *scratch
}

type list struct {
	name       string
	action     Action
	wholeWords bool
	variant    variant
	words      []string
}

type owner struct {
	list  uint16
	entry uint32
}

type plan struct {
	v     variant
	table [utf8.RuneSelf]byte
}

// segment is where one variant's normalized text sits in the haystack.
type segment struct{ start, end int }

type span struct{ start, end int }

// scratch is one Check's working memory, pooled: a Check that matches
// nothing allocates only inside the matcher.
type scratch struct {
	hay   []byte   // the text normalized once per variant, 0xFF between
	pos   []uint32 // per hay byte: original offset | gapBit
	segs  [numVariants]segment
	spans []span
}

// maxPooledBytes keeps a rare huge text's buffers out of the pool.
const maxPooledBytes = 1 << 20

// New validates and compiles lists. Lists with no words are allowed, and so
// is no list: that filter matches nothing.
func New(lists []List) (*Filter, error) {
	if len(lists) > MaxLists {
		return nil, &Error{List: -1, Entry: -1, Reason: fmt.Sprintf("%d lists, more than %d", len(lists), MaxLists)}
	}
	total := 0
	for i := range lists {
		total += len(lists[i].Words)
	}
	if total > MaxEntries {
		return nil, &Error{List: -1, Entry: -1, Reason: fmt.Sprintf("%d entries, more than %d", total, MaxEntries)}
	}

	f := &Filter{lists: make([]list, len(lists)), entries: total}
	var used [numVariants]bool
	var tables [numVariants]*[utf8.RuneSelf]byte
	type entry struct {
		pattern uint32
		owner   owner
	}
	ents := make([]entry, 0, total)
	index := make(map[string]uint32, total)
	var patterns []string
	patternBytes := 0
	var n normalizer

	for li := range lists {
		l := &lists[li]
		if l.Action != Mask && l.Action != Reject {
			return nil, &Error{List: li, Entry: -1, Reason: fmt.Sprintf("action %v: want mask or reject", l.Action)}
		}
		if len(l.Name) > MaxNameBytes || !utf8.ValidString(l.Name) {
			return nil, &Error{List: li, Entry: -1, Reason: fmt.Sprintf("name longer than %d bytes or not UTF-8", MaxNameBytes)}
		}
		v := variantOf(l)
		if tables[v] == nil {
			t := asciiTable(v)
			tables[v] = &t
		}
		used[v] = true
		// Copied: the caller may reuse its slice, and a Filter never changes.
		f.lists[li] = list{name: l.Name, action: l.Action, wholeWords: l.WholeWords, variant: v, words: slices.Clone(l.Words)}
		for wi, w := range l.Words {
			if len(w) > MaxEntryBytes {
				return nil, &Error{List: li, Entry: wi, Reason: fmt.Sprintf("%d bytes, more than %d", len(w), MaxEntryBytes)}
			}
			if !utf8.ValidString(w) {
				return nil, &Error{List: li, Entry: wi, Reason: "not valid UTF-8"}
			}
			n = normalizer{hay: n.hay[:0], pos: n.pos[:0], table: tables[v], skipSep: v&variantSkipSep != 0}
			n.text(w)
			p := trimSpace(n.hay)
			if len(p) == 0 {
				return nil, &Error{List: li, Entry: wi, Reason: fmt.Sprintf("%q is empty once normalized", w)}
			}
			id, ok := index[string(p)]
			if !ok {
				if patternBytes += len(p); patternBytes > MaxPatternBytes {
					return nil, &Error{List: -1, Entry: -1, Reason: fmt.Sprintf("normalized entries over %d bytes", MaxPatternBytes)}
				}
				id = uint32(len(patterns))
				s := string(p)
				index[s] = id
				patterns = append(patterns, s)
			}
			ents = append(ents, entry{id, owner{uint16(li), uint32(wi)}})
		}
	}
	for v := range variant(numVariants) {
		if used[v] {
			f.variants = append(f.variants, plan{v: v, table: *tables[v]})
		}
	}
	if len(patterns) == 0 {
		return f, nil
	}

	slices.SortStableFunc(ents, func(a, b entry) int { return cmp.Compare(a.pattern, b.pattern) })
	f.ownerAt = make([]uint32, len(patterns)+1)
	f.owners = make([]owner, len(ents))
	for i, e := range ents {
		f.owners[i] = e.owner
		f.ownerAt[e.pattern+1] = uint32(i + 1)
	}
	// Standard semantics: the overlapping iterator reports every match,
	// which whole-word tests and the masked union need (leftmost kinds
	// would hide a valid match behind a rejected one).
	b := ac.NewAhoCorasickBuilder(ac.Opts{MatchKind: ac.StandardMatch})
	f.matcher = b.Build(patterns)
	f.pool.New = func() any { return new(scratch) }
	return f, nil
}

// Len is how many entries the filter holds, over all its lists.
func (f *Filter) Len() int {
	if f == nil {
		return 0
	}
	return f.entries
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && b[0] == ' ' {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] == ' ' {
		b = b[:len(b)-1]
	}
	return b
}

// Check matches text against the filter's lists. A nil Filter matches
// nothing, so a Holder not yet stored to lets everything through.
func (f *Filter) Check(text string) Result {
	if f == nil || len(f.owners) == 0 {
		return Result{}
	}
	if len(text) > maxTextBytes { // 2 GiB: refused, never matched in part
		return Result{Action: Reject, Overflow: true}
	}
	s := f.pool.Get().(*scratch)
	s.hay, s.pos, s.spans = s.hay[:0], s.pos[:0], s.spans[:0]
	for i := range f.variants {
		p := &f.variants[i]
		n := normalizer{hay: s.hay, pos: s.pos, table: &p.table, skipSep: p.v&variantSkipSep != 0}
		start := len(n.hay)
		n.text(text)
		s.segs[i] = segment{start, len(n.hay)}
		// 0xFF never occurs in UTF-8: no match spans two variants.
		s.hay, s.pos = append(n.hay, 0xFF), append(n.pos, 0)
	}
	r := f.scan(text, s)
	if cap(s.hay) <= maxPooledBytes && cap(s.spans) <= maxPooledBytes/16 {
		f.pool.Put(s)
	}
	return r
}

func (f *Filter) scan(text string, s *scratch) Result {
	var res Result
	budget := 256 + len(s.hay)
	it := f.matcher.IterOverlappingByte(s.hay)
	for m := it.Next(); m != nil; m = it.Next() {
		if budget--; budget < 0 {
			return Result{Action: Reject, Overflow: true}
		}
		st, en := m.Start(), m.End()
		vi := 0
		for vi < len(f.variants)-1 && st >= s.segs[vi+1].start {
			vi++
		}
		seg, v := s.segs[vi], f.variants[vi].v
		p := m.Pattern()
		masked := false
		for _, o := range f.owners[f.ownerAt[p]:f.ownerAt[p+1]] {
			l := &f.lists[o.list]
			if l.variant != v || !accept(l, s, seg, st, en) {
				continue
			}
			if l.action == Reject {
				return Result{Action: Reject, List: l.name, Pattern: l.words[o.entry]}
			}
			if res.Action == None {
				res = Result{Action: Mask, List: l.name, Pattern: l.words[o.entry]}
			}
			if !masked {
				masked = true
				s.spans = append(s.spans, origSpan(text, s, st, en))
			}
		}
	}
	if res.Action == Mask {
		res.Masked = maskSpans(text, s.spans)
	}
	return res
}

// origSpan is the original text's bytes behind hay[st:en]: from the rune
// that gave its first byte to the end of the rune that gave its last, and
// on over the combining marks after it, which belong to that letter
// (otherwise "é" written e + U+0301 would mask to "*" + U+0301).
func origSpan(text string, s *scratch, st, en int) span {
	first, last := int(s.pos[st]&offMask), int(s.pos[en-1]&offMask)
	_, size := utf8.DecodeRuneInString(text[last:])
	end := last + size
	for end < len(text) {
		r, size := utf8.DecodeRuneInString(text[end:])
		if !unicode.In(r, unicode.Mn, unicode.Me) {
			break
		}
		end += size
	}
	return span{first, end}
}

// accept applies the word-boundary tests to a match at hay[st:en] of a
// list's pattern: always with WholeWords, and when the match skipped a
// separator (IgnoreSeparators) so that it cannot be glued together from the
// ends of two words.
func accept(l *list, s *scratch, seg segment, st, en int) bool {
	need := l.wholeWords
	if !need && l.variant&variantSkipSep != 0 {
		for k := st + 1; k < en; k++ {
			if s.pos[k]&gapBit != 0 {
				need = true
				break
			}
		}
	}
	if !need {
		return true
	}
	return startsWord(s, seg, st) && endsWord(s, seg, st, en)
}

func startsWord(s *scratch, seg segment, st int) bool {
	if st == seg.start || s.pos[st]&gapBit != 0 {
		return true
	}
	prev, _ := utf8.DecodeLastRune(s.hay[seg.start:st])
	first, _ := utf8.DecodeRune(s.hay[st:])
	return !isWordRune(prev) || !isWordRune(first)
}

func endsWord(s *scratch, seg segment, st, en int) bool {
	if en == seg.end || s.pos[en]&gapBit != 0 {
		return true
	}
	last, _ := utf8.DecodeLastRune(s.hay[st:en])
	next, _ := utf8.DecodeRune(s.hay[en:seg.end])
	return !isWordRune(last) || !isWordRune(next)
}

// maskSpans replaces every rune inside the union of spans with '*'. Spans
// start and end on the rune boundaries the normalizer decoded, and '*' is
// one byte, so the output has the text's rune count and is never longer.
func maskSpans(text string, spans []span) string {
	slices.SortFunc(spans, func(a, b span) int { return cmp.Compare(a.start, b.start) })
	var b strings.Builder
	b.Grow(len(text))
	done := 0
	for _, sp := range spans {
		if sp.end <= done {
			continue
		}
		i := max(sp.start, done)
		b.WriteString(text[done:i])
		for i < sp.end {
			_, size := utf8.DecodeRuneInString(text[i:])
			b.WriteByte('*')
			i += size
		}
		done = sp.end
	}
	b.WriteString(text[done:])
	return b.String()
}

package search

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/segment"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Language analysis, shared by every Index so that all of them cut and fold
// text alike. One pipeline serves every script:
//
//  1. words: Unicode word segmentation (UAX #29, Bleve's segment library),
//     plus runs of Thai, Lao, Khmer and Myanmar letters, which UAX #29
//     leaves out (they are split by dictionaries, which we do not have);
//     words are also cut at apostrophes (l'Hôtel is l, hôtel);
//  2. runs: text in scripts written without spaces between words (Han,
//     Hiragana, Katakana, Hangul, Thai, Lao, Khmer, Myanmar) forms runs of
//     adjacent characters, found by substring: Analyze cuts a run into
//     overlapping character bigrams plus each character alone (a query:
//     into the bigrams only, a single character itself), which must stand
//     at consecutive positions;
//  3. folding: compatibility decomposition (NFKD: full-width letters,
//     ligatures), accents removed where they are accents (Latin, Greek,
//     Arabic and Hebrew marks; Cyrillic's except the breve of й and ў and
//     the diaeresis of ї, which make other letters, so ё folds to е but й
//     stays й), full Unicode case folding (ß is ss, final ς is σ), and
//     NFC again (Hangul and kana with voicing marks recomposed).
//
// Callers pass text in NFC (norm.NFC), so offsets are those of the text
// as normalized; folding changes only the terms.

// TokenKind tells a word from the n-grams of a run.
type TokenKind uint8

const (
	KindWord    TokenKind = iota // a word (not in a run)
	KindBigram                   // two adjacent characters of a run
	KindUnigram                  // one character of a run
)

// Token is one term of analyzed text.
type Token struct {
	// Term is folded; it may share memory with the analyzed text.
	Term []byte
	// Start and End are the term's byte offsets in the text.
	Start, End int
	// Position counts from 1: a word takes one, a run of n characters n
	// (its i-th bigram and i-th character at the i-th).
	Position int
	Kind     TokenKind
}

// Analyze cuts text (NFC) into terms: as indexed (query false), or as a
// query looks them up (query true: runs as bigrams only).
func Analyze(text []byte, query bool) []Token { return AnalyzeCached(text, query, nil) }

// AnalyzeCached is Analyze with the foldings of non-ASCII terms taken from
// and kept in cache (nil: none). Terms may then share memory with the
// cache: callers must not change them.
func AnalyzeCached(text []byte, query bool, cache *FoldCache) []Token {
	ps := pieces(text)
	out := make([]Token, 0, len(ps))
	f := folder{cache: cache}
	pos := 1
	for _, p := range ps {
		if !p.run {
			out = append(out, Token{Term: f.fold(text[p.start:p.end]), Start: p.start, End: p.end, Position: pos, Kind: KindWord})
			pos++
			continue
		}
		chars := runChars(text, p)
		n := len(chars)
		for i := range n {
			if i+1 < n {
				out = append(out, Token{Term: f.fold(text[chars[i][0]:chars[i+1][1]]),
					Start: chars[i][0], End: chars[i+1][1], Position: pos + i, Kind: KindBigram})
			}
			if !query || n == 1 {
				out = append(out, Token{Term: f.fold(text[chars[i][0]:chars[i][1]]),
					Start: chars[i][0], End: chars[i][1], Position: pos + i, Kind: KindUnigram})
			}
		}
		pos += n
	}
	return out
}

// Unit is a word or a whole run of text, folded.
type Unit struct {
	Term string
	Run  bool
}

// Units cuts text into its words and runs, in order, folded (each run
// character by character, as its n-grams are). A unit never holds a space:
// the rare compatibility character that decomposes into several words
// (ﷺ) keeps them joined by U+00A0, which folding never leaves otherwise.
func Units(text string) []Unit {
	b := []byte(norm.NFC.String(text))
	ps := pieces(b)
	out := make([]Unit, 0, len(ps))
	var f folder
	var sb strings.Builder
	for _, p := range ps {
		sb.Reset()
		if p.run {
			for _, c := range runChars(b, p) {
				sb.Write(f.fold(b[c[0]:c[1]]))
			}
		} else {
			sb.Write(f.fold(b[p.start:p.end]))
		}
		out = append(out, Unit{Term: strings.ReplaceAll(sb.String(), " ", "\u00a0"), Run: p.run})
	}
	return out
}

// Normalized is text's units joined by single spaces, with a space at both
// ends (" w1 w2 run w3 "; "" when it has none): a word is found with
// " word ", a run with the run alone, a phrase of words with
// " w1 w2 ". PostgreSQL stores it and matches queries against it with LIKE.
func Normalized(text string) string {
	us := Units(text)
	if len(us) == 0 {
		return ""
	}
	n := 1
	for _, u := range us {
		n += len(u.Term) + 1
	}
	var sb strings.Builder
	sb.Grow(n)
	sb.WriteByte(' ')
	for _, u := range us {
		sb.WriteString(u.Term)
		sb.WriteByte(' ')
	}
	return sb.String()
}

// piece is a word or a run in text, before folding.
type piece struct {
	start, end int
	run        bool
}

// pieces cuts text into words (UAX #29, cut at apostrophes) and runs of
// n-gram characters. A word that mixes a run with other letters ("ソフト2")
// is split; characters of a run adjacent in the text form one run, across
// the segmenter's words (it cuts Han ideographs one by one).
func pieces(text []byte) []piece {
	var out []piece
	run := -1 // index in out of the run that may still grow, -1: none
	addWord := func(start, end int) {
		for i := start; i < end; {
			r, w := utf8.DecodeRune(text[i:])
			j := i + w
			if isNgramRune(r) {
				if run >= 0 && out[run].end == i {
					out[run].end = j
				} else {
					out = append(out, piece{start: i, end: j, run: true})
					run = len(out) - 1
				}
				i = j
				continue
			}
			run = -1
			for j < end {
				r2, w2 := utf8.DecodeRune(text[j:])
				if isNgramRune(r2) {
					break
				}
				j += w2
			}
			out = append(out, piece{start: i, end: j})
			i = j
		}
	}
	seg := segment.NewWordSegmenterDirect(text)
	start := 0
	saStart := -1 // start of the current South-East Asian run, -1: none
	flushSA := func(end int) {
		if saStart >= 0 && end > saStart {
			addWord(saStart, end)
		}
		saStart = -1
	}
	for seg.Segment() {
		b := seg.Bytes()
		end := start + len(b)
		if seg.Type() == segment.None && isSouthEastAsian(b) {
			if saStart < 0 {
				saStart = start
			}
			start = end
			continue
		}
		flushSA(start)
		if seg.Type() != segment.None {
			// UAX #29 keeps "l'Hôtel" and "dell'arte" one word, so
			// "hôtel" would not find them: cut at apostrophes. Queries
			// are cut the same way, so "don't" still finds "don't".
			for s := start; s < end; {
				i, n := apostrophe(text[s:end])
				if i < 0 {
					addWord(s, end)
					break
				}
				if i > 0 {
					addWord(s, s+i)
				}
				s += i + n
			}
		}
		start = end
	}
	flushSA(start)
	return out
}

// runChars returns the byte ranges of a run's characters.
func runChars(text []byte, p piece) [][2]int {
	out := make([][2]int, 0, (p.end-p.start)/3)
	for i := p.start; i < p.end; {
		_, w := utf8.DecodeRune(text[i:])
		out = append(out, [2]int{i, i + w})
		i += w
	}
	return out
}

// apostrophe returns the offset and length of the first apostrophe (' or
// ’) in b, or -1.
func apostrophe(b []byte) (int, int) {
	i, j := bytes.IndexByte(b, '\''), bytes.Index(b, []byte("’"))
	switch {
	case i < 0 && j < 0:
		return -1, 0
	case j < 0 || (i >= 0 && i < j):
		return i, 1
	default:
		return j, len("’")
	}
}

// isSouthEastAsian: b starts with a Thai, Lao, Khmer or Myanmar character
// (letters and their combining vowels and tone marks alike).
func isSouthEastAsian(b []byte) bool {
	r, _ := utf8.DecodeRune(b)
	return unicode.In(r, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar)
}

// isNgramRune: r belongs to a script written without spaces between words.
func isNgramRune(r rune) bool {
	switch r {
	case 'ー', 'ｰ', '々', '〆': // kana length marks and kanji repeat marks are Common
		return true
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul,
		unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar)
}

// folder folds terms; its case folder is made on the first non-ASCII term
// (it is stateful: one per analysis).
type folder struct {
	c     cases.Caser
	made  bool
	cache *FoldCache // nil: none
}

// fold returns term folded: an ASCII term lowercased (term itself when
// it has no capital), any other by foldTerm.
func (f *folder) fold(term []byte) []byte {
	if ascii, lower := asciiLower(term); ascii {
		return lower
	}
	if f.cache != nil {
		return f.cache.fold(term, f)
	}
	return f.foldNew(term)
}

// foldNew folds a non-ASCII term with foldTerm.
func (f *folder) foldNew(term []byte) []byte {
	if !f.made {
		f.c, f.made = cases.Fold(), true
	}
	return foldTerm(&f.c, term)
}

// asciiLower lowercases an all-ASCII term (in a copy); ascii is false for
// any other term.
func asciiLower(b []byte) (ascii bool, out []byte) {
	upper := false
	for _, ch := range b {
		if ch >= utf8.RuneSelf {
			return false, nil
		}
		if 'A' <= ch && ch <= 'Z' {
			upper = true
		}
	}
	if !upper {
		return true, b
	}
	out = make([]byte, len(b))
	for i, ch := range b {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		out[i] = ch
	}
	return true, out
}

// letterFold is the folding of letters that carry an accent without
// decomposing ("" for any other rune).
func letterFold(r rune) string {
	switch r {
	case 'ł', 'Ł':
		return "l"
	case 'ø', 'Ø':
		return "o"
	case 'đ', 'Đ':
		return "d"
	case 'æ', 'Æ':
		return "ae"
	case 'œ', 'Œ':
		return "oe"
	}
	return ""
}

// foldTerm is the folding of one non-ASCII term.
func foldTerm(c *cases.Caser, term []byte) []byte {
	d := norm.NFKD.Bytes(term)
	kept := make([]byte, 0, len(d))
	var base rune
	for i := 0; i < len(d); {
		r, w := utf8.DecodeRune(d[i:])
		i += w
		if unicode.Is(unicode.Mn, r) {
			if stripMark(base, r) {
				continue
			}
		} else {
			base = r
			if f := letterFold(r); f != "" {
				kept = append(kept, f...)
				continue
			}
		}
		kept = utf8.AppendRune(kept, r)
	}
	c.Reset()
	return norm.NFC.Bytes(c.Bytes(kept))
}

// stripMark: the combining mark is an accent on base, to be ignored.
func stripMark(base, mark rune) bool {
	switch {
	case unicode.In(base, unicode.Latin, unicode.Greek, unicode.Arabic, unicode.Hebrew):
		return true
	case unicode.Is(unicode.Cyrillic, base):
		if mark == '\u0306' { // breve: й, ў are letters of their own
			return false
		}
		return !(mark == '\u0308' && (base == 'і' || base == 'І')) // ї is a letter; ё folds to е
	}
	return false // elsewhere (Thai vowels, Devanagari signs, kana voicing) marks are letters
}

package bleveindex

import (
	"bytes"
	"unicode"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	"github.com/blevesearch/segment"
	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Language analysis. One pipeline serves every script:
//
//  1. words: Unicode word segmentation (UAX #29, Bleve's segment library),
//     plus runs of Thai, Lao, Khmer and Myanmar letters, which UAX #29
//     leaves out (they are split by dictionaries, which we do not have);
//  2. n-grams: text in scripts written without spaces between words (Han,
//     Hiragana, Katakana, Hangul, Thai, Lao, Khmer, Myanmar) is indexed as
//     overlapping character bigrams plus each character alone, so any run
//     of one or more characters is found inside a longer one; a query is
//     cut into the bigrams only (a single character: itself), which
//     must stand at consecutive positions;
//  3. folding: compatibility decomposition (NFKD: full-width letters,
//     ligatures), accents removed where they are accents (Latin, Greek,
//     Arabic and Hebrew marks; Cyrillic's except the breve of й and ў and
//     the diaeresis of ї, which make other letters, so ё folds to е but й
//     stays й), full Unicode case folding (ß is ss, final ς is σ), and
//     NFC again (Hangul and kana with voicing marks recomposed).
//
// Bigrams run on the text as written (NFC), so their byte offsets are the
// text's, for highlights; folding changes only the indexed terms.
//
// The analyzers are plain values handed to each document field and used
// to cut queries: nothing is registered in Bleve's package-level registry.

// Token types of n-gram runs, so a query can tell a run from a word.
const (
	typeBigram  = analysis.Double
	typeUnigram = analysis.Single
)

// newAnalyzer returns the analyzer of indexed text (query false) or of
// query text (query true).
func newAnalyzer(query bool) analysis.Analyzer {
	return &analysis.DefaultAnalyzer{
		Tokenizer:    wordTokenizer{},
		TokenFilters: []analysis.TokenFilter{ngramFilter{query: query}, foldFilter{}},
	}
}

// wordTokenizer is Bleve's unicode tokenizer plus runs of South-East Asian
// scripts.
type wordTokenizer struct{}

func (wordTokenizer) Tokenize(input []byte) analysis.TokenStream {
	var out analysis.TokenStream
	seg := segment.NewWordSegmenterDirect(input)
	start := 0
	saStart := -1 // start of the current South-East Asian run, -1: none
	flushSA := func(end int) {
		if saStart >= 0 && end > saStart {
			out = append(out, &analysis.Token{Term: input[saStart:end], Start: saStart, End: end,
				Position: len(out) + 1, Type: analysis.Ideographic})
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
			typ := analysis.AlphaNumeric
			switch seg.Type() {
			case segment.Ideo, segment.Kana:
				typ = analysis.Ideographic
			case segment.Number:
				typ = analysis.Numeric
			}
			out = appendWordParts(out, b, start, typ)
		}
		start = end
	}
	flushSA(start)
	return out
}

// appendWordParts appends word b (at offset start) as one token per part
// between apostrophes: UAX #29 keeps "l'Hôtel" and "dell'arte" one word,
// so "hôtel" would not find them. Queries are cut the same way, so "don't"
// still finds "don't" (its parts, in order).
func appendWordParts(out analysis.TokenStream, b []byte, start int, typ analysis.TokenType) analysis.TokenStream {
	for len(b) > 0 {
		i, n := apostrophe(b)
		if i < 0 {
			break
		}
		if i > 0 {
			out = append(out, &analysis.Token{Term: b[:i], Start: start, End: start + i, Position: len(out) + 1, Type: typ})
		}
		b, start = b[i+n:], start+i+n
	}
	if len(b) > 0 {
		out = append(out, &analysis.Token{Term: b, Start: start, End: start + len(b), Position: len(out) + 1, Type: typ})
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

// ngramFilter cuts n-gram-script runs into bigrams (and, when indexing,
// unigrams) and numbers positions so that a run of n characters takes n
// positions, its i-th bigram (and i-th character) at the i-th.
type ngramFilter struct{ query bool }

// runChar is one character of a run: its bytes and offsets in the text.
type runChar struct {
	term       []byte
	start, end int
}

func (f ngramFilter) Filter(in analysis.TokenStream) analysis.TokenStream {
	out := make(analysis.TokenStream, 0, len(in))
	pos := 1
	var run []runChar // the current run
	flush := func() {
		if len(run) == 0 {
			return
		}
		n := len(run)
		for i := 0; i < n; i++ {
			if i+1 < n {
				a, b := run[i].term, run[i+1].term
				term := append(append(make([]byte, 0, len(a)+len(b)), a...), b...)
				out = append(out, &analysis.Token{Term: term,
					Start: run[i].start, End: run[i+1].end, Position: pos + i, Type: typeBigram})
			}
			if !f.query || n == 1 {
				out = append(out, &analysis.Token{Term: run[i].term,
					Start: run[i].start, End: run[i].end, Position: pos + i, Type: typeUnigram})
			}
		}
		pos += n
		run = run[:0]
	}
	for _, t := range in {
		// A token may mix a run with other letters ("ソフト2"): split it.
		i := 0
		for i < len(t.Term) {
			r, w := utf8.DecodeRune(t.Term[i:])
			j := i + w
			if isNgramRune(r) {
				abs := t.Start + i
				if len(run) > 0 && run[len(run)-1].end != abs {
					flush() // not adjacent in the text: another run
				}
				run = append(run, runChar{t.Term[i:j], abs, t.Start + j})
				i = j
				continue
			}
			flush()
			for j < len(t.Term) {
				r2, w2 := utf8.DecodeRune(t.Term[j:])
				if isNgramRune(r2) {
					break
				}
				j += w2
			}
			out = append(out, &analysis.Token{Term: t.Term[i:j], Start: t.Start + i, End: t.Start + j,
				Position: pos, Type: t.Type, KeyWord: t.KeyWord})
			pos++
			i = j
		}
	}
	flush()
	return out
}

// foldFilter folds case, compatibility forms and accents of each term.
type foldFilter struct{}

func (foldFilter) Filter(in analysis.TokenStream) analysis.TokenStream {
	var c cases.Caser // stateful: one per stream
	made := false
	for _, t := range in {
		if ascii, lower := asciiLower(t.Term); ascii {
			t.Term = lower
			continue
		}
		if !made {
			c, made = cases.Fold(), true
		}
		t.Term = fold(&c, t.Term)
	}
	return in
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

// letterFolds are letters that carry an accent without decomposing.
var letterFolds = map[rune]string{
	'ł': "l", 'Ł': "l", 'ø': "o", 'Ø': "o", 'đ': "d", 'Đ': "d", 'æ': "ae", 'Æ': "ae", 'œ': "oe", 'Œ': "oe",
}

// fold is the folding of one non-ASCII term.
func fold(c *cases.Caser, term []byte) []byte {
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
			if f, ok := letterFolds[r]; ok {
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

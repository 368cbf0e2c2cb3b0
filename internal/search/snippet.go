package search

import (
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// snippetLead is the share of a snippet's bytes given to the text before
// its first match (the rest follows it).
const snippetLead = 3

// QueryTerms returns the terms of a query's text (as Analyze cuts a
// query), for Snippet; nil when it has no word. ErrBadQuery: the text is
// longer than MaxQueryBytes or has more than MaxQueryTerms terms.
func QueryTerms(text string) (map[string]bool, error) {
	if len(text) > MaxQueryBytes {
		return nil, ErrBadQuery
	}
	toks := Analyze([]byte(norm.NFC.String(text)), true)
	if len(toks) == 0 {
		return nil, nil
	}
	words := make(map[string]bool, len(toks))
	for _, t := range toks {
		words[string(t.Term)] = true
	}
	if len(words) > MaxQueryTerms {
		return nil, ErrBadQuery
	}
	return words, nil
}

// Snippet cuts at most SnippetBytes of text (put in NFC, and so returned)
// around the first of words (QueryTerms) and returns the byte ranges of the
// words' occurrences in it. The text is analyzed as it is indexed: a word's
// occurrences are the tokens with its term, so a query is marked where an
// index matched it (bigrams overlap: their ranges are merged). Text
// without a match gives its start.
func Snippet(text string, words map[string]bool) (string, [][2]int) {
	text = norm.NFC.String(text)
	var marks [][2]int
	for _, t := range Analyze([]byte(text), false) {
		if !words[string(t.Term)] {
			continue
		}
		if n := len(marks); n > 0 && t.Start <= marks[n-1][1] {
			marks[n-1][1] = max(marks[n-1][1], t.End)
			continue
		}
		marks = append(marks, [2]int{t.Start, t.End})
	}
	const size = SnippetBytes
	start := 0
	if len(marks) > 0 && len(text) > size {
		first := marks[0]
		start = max(0, first[0]-(size-min(size, first[1]-first[0]))/snippetLead)
		start = min(start, len(text)-size) // a match near the end: use the whole window
	}
	for start > 0 && start < len(text) && !utf8.RuneStart(text[start]) {
		start++
	}
	end := min(len(text), start+size)
	for end < len(text) && end > start && !utf8.RuneStart(text[end]) {
		end--
	}
	var hl [][2]int
	for _, m := range marks {
		s, e := max(m[0], start), min(m[1], end)
		if s < e {
			hl = append(hl, [2]int{s - start, e - start})
		}
	}
	return text[start:end], hl
}

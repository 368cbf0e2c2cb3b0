package bleveindex

import (
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"

	"github.com/parleyim/parley/internal/search"
)

// snippetLead is the share of a snippet's bytes given to the text before
// its first match (the rest follows it).
const snippetLead = 3

// snippet cuts at most search.SnippetBytes of text around the first word
// of words (terms as the query analyzer made them) and returns the byte
// ranges of the words' occurrences in it. The text is analyzed again with
// the index analyzer: a word's occurrences are the tokens with its term,
// so a query matches where the index matched it (bigrams overlap: their
// ranges are merged). Text without a match gives its start.
func snippet(a analysis.Analyzer, text string, words map[string]bool) (string, [][2]int) {
	var marks [][2]int
	for _, t := range a.Analyze([]byte(text)) {
		if !words[string(t.Term)] {
			continue
		}
		if n := len(marks); n > 0 && t.Start <= marks[n-1][1] {
			marks[n-1][1] = max(marks[n-1][1], t.End)
			continue
		}
		marks = append(marks, [2]int{t.Start, t.End})
	}
	const size = search.SnippetBytes
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

package bleveindex

import (
	"github.com/blevesearch/bleve/v2/analysis"

	"github.com/parleyim/parley/internal/search"
)

// Language analysis is search.Analyze, shared with every other index; this
// adapts it to Bleve. The analyzers are plain values handed to each
// document field and used to cut queries: nothing is registered in Bleve's
// package-level registry.

// Token types of n-gram runs, so a query can tell a run from a word.
const (
	typeBigram  = analysis.Double
	typeUnigram = analysis.Single
)

// analyzer is search.Analyze as a Bleve analyzer: of indexed text (query
// false) or of query text (query true).
// Both of an index's analyzers share one fold cache.
type analyzer struct {
	query bool
	cache *search.FoldCache
}

func newAnalyzer(query bool, cache *search.FoldCache) analysis.Analyzer {
	return analyzer{query: query, cache: cache}
}

func (a analyzer) Analyze(input []byte) analysis.TokenStream {
	toks := search.AnalyzeCached(input, a.query, a.cache)
	slab := make([]analysis.Token, len(toks)) // one allocation for the stream's tokens
	out := make(analysis.TokenStream, len(toks))
	for i, t := range toks {
		typ := analysis.AlphaNumeric
		switch t.Kind {
		case search.KindBigram:
			typ = typeBigram
		case search.KindUnigram:
			typ = typeUnigram
		}
		slab[i] = analysis.Token{Term: t.Term, Start: t.Start, End: t.End, Position: t.Position, Type: typ}
		out[i] = &slab[i]
	}
	return out
}

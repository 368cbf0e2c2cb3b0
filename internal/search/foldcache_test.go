package search

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// TestFoldCache: analysis with the cache gives the terms analysis without it
// gives, from many goroutines at once, and the cache stays within its bytes
// however many distinct terms go through it.
func TestFoldCache(t *testing.T) {
	c := NewFoldCache(64 << 10)
	texts := []string{"Café ÄRGER Straße", "Καλημέρα ΆΣΟΣ", "Ёлка йога Їжак", "東京タワー", "ไปตลาด", "ＡＢＣ ﬁne", "l'Hôtel dell’arte"}
	render := func(toks []Token) string {
		var b strings.Builder
		for _, tk := range toks {
			fmt.Fprintf(&b, "%s@%d:%d-%d ", tk.Term, tk.Position, tk.Start, tk.End)
		}
		return b.String()
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				text := texts[(i+g)%len(texts)]
				for _, q := range []bool{false, true} {
					want := render(Analyze([]byte(text), q))
					if got := render(AnalyzeCached([]byte(text), q, c)); got != want {
						t.Errorf("%q cached: %s, want %s", text, got, want)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	if c.Len() == 0 {
		t.Fatal("nothing cached")
	}
	for i := range 20000 {
		AnalyzeCached([]byte(fmt.Sprintf("Grüße%dé", i)), false, c)
	}
	if b := c.Bytes(); b > 64<<10 {
		t.Fatalf("cache holds %d bytes, bound %d", b, 64<<10)
	}
	// Still right after its shards were emptied.
	if got, want := render(AnalyzeCached([]byte("Grüße7é"), false, c)), render(Analyze([]byte("Grüße7é"), false)); got != want {
		t.Fatalf("after filling: %s, want %s", got, want)
	}
}

package wordfilter

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	ac "github.com/petar-dambovaliev/aho-corasick"
)

// normalize is the text's normalized form under v, for tests.
func normalize(text string, v variant) (string, []uint32) {
	t := asciiTable(v)
	n := normalizer{table: &t, skipSep: v&variantSkipSep != 0}
	n.text(text)
	return string(n.hay), n.pos
}

func TestNormalize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		v    variant
		want string
	}{
		{"Hello, World!", 0, "hello, world!"},
		{"a  \t\n b", 0, "a b"},
		{"Straße STRAẞE", 0, "strasse strasse"},
		{"Ünïcödé café", 0, "unicode cafe"},
		{"cafe\u0301", 0, "cafe"},
		{"ＦＵＬＬ　ｗｉｄｔｈ１２３", 0, "full width123"},
		{"ﾊﾝｶｸ ｶﾞ", 0, "はんかく か\u3099"},
		{"カタカナ ガ", 0, "かたかな か\u3099"},
		{"ﬁne ①", 0, "fine 1"},
		{"İstanbul ıi", 0, "istanbul ii"},
		{"Привет ЁЖ", 0, "пpивeт eж"},
		{"ΣΟΦΊΑ σοφός", 0, "σoφia σoφoσ"},
		{"zero\u200bwidth\u00adsoft\ufeff", 0, "zerowidthsoft"},
		{"한국어 漢字", 0, "한국어 漢字"},
		{"كَتَبَ كـتـب", 0, "كتب كتب"},
		{"\xff\xfe", 0, "\ufffd\ufffd"},
		{"h3ll0 w0r1d @$5", variantLeet, "heiio worid ass"},
		{"f.u-c k!", variantSkipSep, "fuck"},
		{"it's don’t", variantSkipSep, "itsdont"},
		{"5.h.1.7", variantLeet | variantSkipSep, "shit"},
		{"a\xffb", variantSkipSep, "ab"},
	} {
		got, pos := normalize(tc.in, tc.v)
		if got != tc.want {
			t.Errorf("normalize(%q, %d) = %q, want %q", tc.in, tc.v, got, tc.want)
		}
		if len(pos) != len(got) {
			t.Errorf("normalize(%q): %d offsets for %d bytes", tc.in, len(pos), len(got))
		}
	}
}

func TestNormalizeOffsetsAndGaps(t *testing.T) {
	got, pos := normalize("Ab ñ.c", variantSkipSep)
	if got != "abnc" {
		t.Fatalf("got %q", got)
	}
	want := []uint32{0, 1, 3 | gapBit, 6 | gapBit}
	if !slices.Equal(pos, want) {
		t.Fatalf("offsets %x, want %x", pos, want)
	}
	// A rune that expands keeps its offset on every byte it gives.
	got, pos = normalize("xß", 0)
	if got != "xss" || !slices.Equal(pos, []uint32{0, 1, 1}) {
		t.Fatalf("got %q %v", got, pos)
	}
}

// TestMatcherReportsEveryOccurrence checks the matching library as the
// filter uses it: the overlapping iterator must report every occurrence of
// every pattern, nested and overlapping ones included, for small pattern
// sets (where the library uses a prefilter) and larger ones.
func TestMatcherReportsEveryOccurrence(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for round := range 300 {
		npat := 1 + r.IntN(3)
		if round%2 == 1 {
			npat = 20 + r.IntN(200)
		}
		alphabet := "abc"
		if round%3 == 0 {
			alphabet = "abcdéя"
		}
		rand := func(n int) string {
			rs := []rune(alphabet)
			var b strings.Builder
			for range n {
				b.WriteRune(rs[r.IntN(len(rs))])
			}
			return b.String()
		}
		seen := map[string]bool{}
		var pats []string
		for len(pats) < npat {
			p := rand(1 + r.IntN(5))
			if !seen[p] {
				seen[p] = true
				pats = append(pats, p)
			}
		}
		text := rand(r.IntN(80))
		b := ac.NewAhoCorasickBuilder(ac.Opts{MatchKind: ac.StandardMatch})
		m := b.Build(pats)
		var got []string
		it := m.IterOverlappingByte([]byte(text))
		for x := it.Next(); x != nil; x = it.Next() {
			got = append(got, fmt.Sprintf("%d@%d", x.Pattern(), x.Start()))
		}
		var want []string
		for i, p := range pats {
			for at := 0; at+len(p) <= len(text); at++ {
				if text[at:at+len(p)] == p {
					want = append(want, fmt.Sprintf("%d@%d", i, at))
				}
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("patterns %q in %q: got %v, want %v", pats, text, got, want)
		}
	}
}

// FuzzNormalize: any bytes normalize without panic, to valid UTF-8 with
// one in-range offset per byte that points at a rune start, and again to
// the same result.
func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"", "Hello", "ｆｕｃｋ", "ﾊﾞｶ", "Straße", "e\u0301", "\xff\xfe", "한국", "ﷺ", "f.u.c.k", "it's"} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(3))
	}
	f.Fuzz(func(t *testing.T, text string, v uint8) {
		vr := variant(v % numVariants)
		got, pos := normalize(text, vr)
		if !utf8.ValidString(got) || strings.IndexByte(got, 0xFF) >= 0 {
			t.Fatalf("normalize(%q) = %q: not UTF-8", text, got)
		}
		if len(pos) != len(got) {
			t.Fatalf("%d offsets for %d bytes", len(pos), len(got))
		}
		starts := runeStarts(text)
		for i, p := range pos {
			if p&gapBit != 0 && vr&variantSkipSep == 0 {
				t.Fatalf("gap at %d without IgnoreSeparators", i)
			}
			off := int(p & offMask)
			if off >= len(text) {
				t.Fatalf("offset %d past the text (%d bytes)", off, len(text))
			}
			if i > 0 && off < int(pos[i-1]&offMask) {
				t.Fatalf("offsets go back at %d: %v", i, pos)
			}
			if !starts[off] {
				t.Fatalf("offset %d is inside a rune of %q", off, text)
			}
		}
		if again, _ := normalize(text, vr); again != got {
			t.Fatalf("normalize is not deterministic: %q then %q", got, again)
		}
	})
}

// runeStarts marks the offsets where utf8 decoding of text steps.
func runeStarts(text string) []bool {
	starts := make([]bool, len(text))
	for i := 0; i < len(text); {
		starts[i] = true
		_, size := utf8.DecodeRuneInString(text[i:])
		i += size
	}
	return starts
}

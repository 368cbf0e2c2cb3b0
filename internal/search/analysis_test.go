package search

import (
	"testing"
)

// TestNormalized: the form PostgreSQL stores: folded words and whole runs,
// one space between, a space at both ends.
func TestNormalized(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"", ""},
		{"  !!! 🎉 ", ""},
		{"Café ÄRGER, Straße!", " cafe arger strasse "},
		{"l'Hôtel dell’arte don't", " l hotel dell arte don t "},
		{"我们明天在北京西站见面", " 我们明天在北京西站见面 "},
		{"東京タワーに行きました ソフト2", " 東京タワーに行きました ソフト 2 "},
		{"北京，西站", " 北京 西站 "},
		{"abc北京def", " abc 北京 def "},
		{"ไปตลาด ทะเล", " ไปตลาด ทะเล "},
		{"ＡＢＣ ﬁne 50%_off", " abc fine 50 _off "},
		{"ﷺ", " صلى\u00a0الله\u00a0عليه\u00a0وسلم "},
	} {
		if got := Normalized(c.text); got != c.want {
			t.Errorf("Normalized(%q) = %q, want %q", c.text, got, c.want)
		}
	}
}

// TestUnitsFoldLikeTerms: a run's folding is that of its characters, as
// its unigrams are folded, so stored runs and query bigrams agree.
func TestUnitsFoldLikeTerms(t *testing.T) {
	text := "ＡＢＣガギ東京ｶﾀｶﾅ"
	var unigrams string
	for _, tok := range Analyze([]byte(text), false) {
		if tok.Kind == KindUnigram {
			unigrams += string(tok.Term)
		}
	}
	us := Units(text)
	if len(us) != 2 || us[0].Term != "abc" || !us[1].Run || us[1].Term != unigrams {
		t.Fatalf("Units(%q) = %+v; unigrams %q", text, us, unigrams)
	}
}

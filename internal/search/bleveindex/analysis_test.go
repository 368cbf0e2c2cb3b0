package bleveindex

import (
	"fmt"
	"strings"
	"testing"

	"github.com/parleyim/parley/internal/search"
)

// terms renders an analysis as "term@position" items.
func terms(query bool, text string) string {
	var parts []string
	for _, t := range newAnalyzer(query, search.NewFoldCache(0)).Analyze([]byte(text)) {
		parts = append(parts, fmt.Sprintf("%s@%d", t.Term, t.Position))
	}
	return strings.Join(parts, " ")
}

func TestAnalysis(t *testing.T) {
	for _, c := range []struct {
		text  string
		query bool
		want  string
	}{
		{"Café ÄRGER Straße", false, "cafe@1 arger@2 strasse@3"},
		{"Καλημέρα ΆΣΟΣ", false, "καλημερα@1 ασοσ@2"},
		{"Ёлка йога Їжак", false, "елка@1 йога@2 їжак@3"},
		{"أَهْلًا", false, "اهلا@1"},
		{"ＡＢＣ ﬁne", false, "abc@1 fine@2"},
		{"東京タワー", false, "東京@1 東@1 京タ@2 京@2 タワ@3 タ@3 ワー@4 ワ@4 ー@5"},
		{"東京タワー", true, "東京@1 京タ@2 タワ@3 ワー@4"},
		{"京", true, "京@1"},
		{"서울에서 만나요", true, "서울@1 울에@2 에서@3 만나@5 나요@6"},
		{"ไปตลาด", true, "ไป@1 ปต@2 ตล@3 ลา@4 าด@5"},
		{"hi 👋 there", false, "hi@1 there@2"},
		{"がぎ", false, "がぎ@1 が@1 ぎ@2"},
		{"l'Hôtel dell’arte don't", false, "l@1 hotel@2 dell@3 arte@4 don@5 t@6"},
	} {
		if got := terms(c.query, c.text); got != c.want {
			t.Errorf("%q (query %v):\n got %s\nwant %s", c.text, c.query, got, c.want)
		}
	}
}

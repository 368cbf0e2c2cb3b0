package wordfilter

import (
	"math/rand/v2"
	"strings"
)

// genWords makes n distinct entries, the same for the same seed, in the mix
// a multilingual deployment's lists might have: 60 % Latin-script words (a
// tenth with accents, a tenth two-word phrases), 12 % Cyrillic, 3 % Greek,
// 15 % Chinese, 5 % Japanese kana, 3 % Korean, 2 % Arabic.
func genWords(n int, seed uint64) []string {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	pick := func(s string) string {
		rs := []rune(s)
		return string(rs[r.IntN(len(rs))])
	}
	from := func(alphabet string, min, max int) string {
		var b strings.Builder
		for range min + r.IntN(max-min+1) {
			b.WriteString(pick(alphabet))
		}
		return b.String()
	}
	latin := func() string {
		var b strings.Builder
		for b.Len() < 5+r.IntN(6) {
			b.WriteString(pick("bcdfghjklmnprstvwxzq"))
			b.WriteString(pick("aeiouy"))
			if r.IntN(3) == 0 {
				b.WriteString(pick("bcdfgklmnprstxz"))
			}
		}
		w := b.String()
		if r.IntN(10) == 0 {
			w = strings.Replace(w, pick("aeiou"), pick("éèüöäàç"), 1)
		}
		return w
	}
	cjk := func(lo, hi rune, min, max int) string {
		var b strings.Builder
		for range min + r.IntN(max-min+1) {
			b.WriteRune(lo + rune(r.IntN(int(hi-lo))))
		}
		return b.String()
	}
	seen := make(map[string]bool, n)
	words := make([]string, 0, n)
	for len(words) < n {
		var w string
		switch k := r.IntN(100); {
		case k < 54:
			w = latin()
		case k < 60:
			w = latin() + " " + latin()
		case k < 72:
			w = from("абвгдеёжзийклмнопрстуфхцчшщъыьэюя", 4, 9)
		case k < 75:
			w = from("αβγδεζηθικλμνξοπρστυφχψω", 4, 9)
		case k < 90:
			w = cjk(0x4E00, 0x7000, 2, 4)
		case k < 95:
			w = cjk(0x3041, 0x3094, 2, 5)
		case k < 98:
			w = cjk(0xAC00, 0xC800, 2, 3)
		default:
			w = from("ابتثجحخدذرزسشصضطظعغفقكلمنهوي", 3, 6)
		}
		if !seen[w] {
			seen[w] = true
			words = append(words, w)
		}
	}
	return words
}

// Chat messages (of about 200 bytes but msgShort) that match nothing in genWords(10_000, 1)
// (TestBenchMessages holds that).
var (
	msgEnglish = "hey! are we still on for dinner tomorrow? I booked the table at 7:30 " +
		"but can move it if your train is late again 😅 also bring the charger you borrowed, " +
		"mine died twice today. see you"
	msgChinese = "明天下午三点在老地方见面吧，我把资料都准备好了，你记得带上电脑。" +
		"如果路上堵车就给我打电话，我们可以晚一点开始，不着急。"
	msgShort  = "ok, see you at 7! bring the charger pls"
	msgMasked = "hey! are we still on for dinner tomorrow? I booked the table at 7:30 " +
		"but can move it if your train is late again 😅 also bring the darn charger you " +
		"borrowed, mine died twice today. see you"
)

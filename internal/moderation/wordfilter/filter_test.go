package wordfilter

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func mustNew(t testing.TB, lists ...List) *Filter {
	t.Helper()
	f, err := New(lists)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func reject(words ...string) List { return List{Name: "reject", Action: Reject, Words: words} }
func mask(words ...string) List   { return List{Name: "mask", Action: Mask, Words: words} }

func TestCheck(t *testing.T) {
	leet := func(l List) List { l.Leet = true; return l }
	seps := func(l List) List { l.IgnoreSeparators = true; return l }
	whole := func(l List) List { l.WholeWords = true; return l }

	for _, tc := range []struct {
		name   string
		lists  []List
		text   string
		action Action
		masked string // with Mask
	}{
		// English
		{"en match", []List{reject("fuck")}, "what the fuck", Reject, ""},
		{"en case", []List{reject("fuck")}, "What The FUCK", Reject, ""},
		{"en no match", []List{reject("fuck")}, "what the duck", None, ""},
		{"en mask", []List{mask("shit")}, "oh Shit, no", Mask, "oh ****, no"},
		{"en phrase", []List{reject("kill yourself")}, "just KILL   yourself", Reject, ""},
		{"en phrase newline", []List{reject("kill yourself")}, "kill\n\tyourself", Reject, ""},
		{"en phrase glued", []List{reject("kill yourself")}, "killyourself", None, ""},
		{"entry blanks collapse", []List{reject("  kill   yourself ")}, "kill yourself", Reject, ""},

		// German, French: accents folded, ß is ss
		{"de ß", []List{mask("scheiße")}, "So eine SCHEISSE, echt.", Mask, "So eine ********, echt."},
		{"de capital ẞ", []List{mask("scheisse")}, "SCHEIẞE!", Mask, "*******!"},
		{"de umlaut dropped", []List{reject("fuck")}, "fück dich", Reject, ""},
		{"de umlaut combining", []List{reject("fuck")}, "fu\u0308ck dich", Reject, ""},
		{"de umlaut in entry", []List{mask("arschlöcher")}, "ihr ARSCHLOCHER", Mask, "ihr ***********"},
		{"fr accent", []List{mask("enculé")}, "espèce d'ENCULE", Mask, "espèce d'******"},
		{"fr combining mark masked with its letter", []List{mask("encule")}, "un encule\u0301 !", Mask, "un ******* !"},

		// Cyrillic, Greek
		{"ru", []List{reject("сука")}, "ты СУКА", Reject, ""},
		{"ru mask", []List{mask("хуй")}, "иди на хуй!", Mask, "иди на ***!"},
		{"ru ё is е", []List{mask("ёбаный")}, "ЕБАНЫЙ стыд", Mask, "****** стыд"},
		{"ru written with Latin look-alikes", []List{reject("сука")}, "ty cyкa", Reject, ""},
		{"ru unrelated", []List{reject("сука")}, "сумка", None, ""},
		{"el", []List{mask("μαλάκα")}, "Είσαι ΜΑΛΑΚΑΣ", Mask, "Είσαι ******Σ"},
		{"el final sigma", []List{mask("μαλακας")}, "μαλάκας", Mask, "*******"},

		// CJK: substrings, with or without WholeWords
		{"zh", []List{reject("操你妈")}, "我操你妈的", Reject, ""},
		{"zh mask", []List{mask("傻逼")}, "你是傻逼吗", Mask, "你是**吗"},
		{"zh whole words still substring", []List{whole(mask("傻逼"))}, "你是傻逼吗", Mask, "你是**吗"},
		{"ja katakana matches hiragana", []List{mask("ばか")}, "お前はバカだ", Mask, "お前は**だ"},
		{"ja half-width katakana", []List{mask("ばか")}, "お前はﾊﾞｶだ", Mask, "お前は***だ"},
		{"ja voicing mark kept", []List{mask("ばか")}, "はかない", None, ""},
		{"ja kanji", []List{mask("馬鹿")}, "この馬鹿野郎", Mask, "この**野郎"},
		{"ko", []List{whole(mask("씨발"))}, "아 씨발놈아", Mask, "아 **놈아"},
		{"ko syllable not matched inside another", []List{mask("가")}, "각", None, ""},
		{"ar harakat", []List{mask("كلب")}, "يا كَلْب", Mask, "يا *****"},
		{"ar tatweel", []List{mask("كلب")}, "يا كـلـب", Mask, "يا *****"},

		// confusables and leet
		{"cyrillic с in latin word", []List{reject("fuck")}, "fuсk", Reject, ""},
		{"greek ο in latin word", []List{reject("porn")}, "pοrn", Reject, ""},
		{"full-width", []List{reject("fuck")}, "ｆｕｃｋ", Reject, ""},
		{"full-width mask", []List{mask("fuck")}, "a ＦＵＣＫ b", Mask, "a **** b"},
		{"styled letters", []List{reject("fuck")}, "𝐟𝐮𝐜𝐤", Reject, ""},
		{"zero width space", []List{reject("fuck")}, "fu\u200bck", Reject, ""},
		{"leet", []List{leet(reject("shit"))}, "sh1t", Reject, ""},
		{"leet more", []List{leet(reject("shit"))}, "5h17", Reject, ""},
		{"leet symbols", []List{leet(reject("ass"))}, "@$$", Reject, ""},
		{"leet 1 is l", []List{leet(reject("hell"))}, "he11", Reject, ""},
		{"leet off", []List{reject("shit")}, "sh1t", None, ""},
		{"leet in entry", []List{leet(reject("sh1t"))}, "shit", Reject, ""},

		// separators
		{"sep dots", []List{seps(reject("fuck"))}, "f.u.c.k you", Reject, ""},
		{"sep spaces", []List{seps(reject("fuck"))}, "f u c k", Reject, ""},
		{"sep mask", []List{seps(mask("fuck"))}, "a f-u-c-k!", Mask, "a *******!"},
		{"sep emoji", []List{seps(reject("fuck"))}, "f🍆u🍆c🍆k", Reject, ""},
		{"sep across words refused", []List{seps(reject("shit"))}, "it's hit", None, ""},
		{"sep across words refused 2", []List{seps(reject("shit"))}, "this hit", None, ""},
		{"sep apostrophe inside a word", []List{seps(reject("fuck"))}, "f'u'c'k", Reject, ""},
		{"sep whole word pieces", []List{seps(reject("shit"))}, "sh it", Reject, ""},
		{"sep inside a word still substring", []List{seps(reject("ass"))}, "class", Reject, ""},
		{"sep off", []List{reject("fuck")}, "f.u.c.k", None, ""},
		{"sep entry", []List{seps(reject("kill you"))}, "killyou", Reject, ""},
		{"sep leet", []List{leet(seps(reject("shit")))}, "5.h.1.7", Reject, ""},
		{"sep cjk", []List{seps(reject("操你妈"))}, "好操 你.妈", Reject, ""},

		// masking keeps the rest byte for byte
		{"mask emoji around", []List{mask("fuck")}, "👍🏽 fuck 👨‍👩‍👧 é", Mask, "👍🏽 **** 👨‍👩‍👧 é"},
		{"mask glued to emoji", []List{mask("fuck")}, "👨‍👩‍👧fuck👍🏽", Mask, "👨‍👩‍👧****👍🏽"},
		{"mask combining before", []List{mask("fuck")}, "e\u0301fuck", Mask, "e\u0301****"},
		{"mask several", []List{mask("darn", "heck")}, "darn it, heck, DARN", Mask, "**** it, ****, ****"},
		{"mask overlapping union", []List{mask("abc", "bcd")}, "xabcdx", Mask, "x****x"},
		{"mask nested", []List{mask("ass", "asshole")}, "you asshole", Mask, "you *******"},
		{"mask same word twice in lists", []List{mask("darn"), mask("darn")}, "darn", Mask, "****"},

		// Reject beats Mask
		{"reject after mask", []List{mask("darn"), reject("heck")}, "darn heck", Reject, ""},
		{"reject before mask", []List{mask("darn"), reject("heck")}, "heck darn", Reject, ""},
		{"same word mask and reject", []List{mask("heck"), reject("heck")}, "heck", Reject, ""},

		// invalid UTF-8: bytes kept, read as U+FFFD
		{"invalid splits a word", []List{reject("fuck")}, "fu\xffck", None, ""},
		{"invalid is a separator", []List{seps(reject("fuck"))}, "fu\xffck", Reject, ""},
		{"invalid kept around mask", []List{mask("fuck")}, "\xff fuck \xfe\xe4\xbd", Mask, "\xff **** \xfe\xe4\xbd"},
		{"invalid masked inside", []List{seps(mask("fuck"))}, "fu\xffck", Mask, "*****"},

		// Scunthorpe
		{"scunthorpe substring", []List{mask("ass")}, "first class", Mask, "first cl***"},
		{"scunthorpe whole words", []List{whole(mask("ass"))}, "first class", None, ""},
		{"whole words match", []List{whole(mask("ass"))}, "ASS-hat, you ass!", Mask, "***-hat, you ***!"},
		{"whole words digits are word", []List{whole(mask("ass"))}, "ass123", None, ""},
		{"whole words leet", []List{whole(leet(mask("ass")))}, "cl@ss and @ss", Mask, "cl@ss and ***"},
		{"whole words russian", []List{whole(mask("хуй"))}, "страхуй, хуй", Mask, "страхуй, ***"},

		{"empty text", []List{reject("fuck")}, "", None, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := mustNew(t, tc.lists...)
			got := f.Check(tc.text)
			if got.Action != tc.action {
				t.Fatalf("Check(%q) = %+v, want action %v", tc.text, got, tc.action)
			}
			if tc.action == Mask && got.Masked != tc.masked {
				t.Fatalf("Check(%q).Masked = %q, want %q", tc.text, got.Masked, tc.masked)
			}
			if tc.action != Mask && got.Masked != "" {
				t.Fatalf("Check(%q).Masked = %q with action %v", tc.text, got.Masked, got.Action)
			}
			if got.Action == Mask && utf8.RuneCountInString(got.Masked) != utf8.RuneCountInString(tc.text) {
				t.Fatalf("masked %q has another rune count than %q", got.Masked, tc.text)
			}
			if again := f.Check(tc.text); again != got {
				t.Fatalf("second Check = %+v, first %+v", again, got)
			}
		})
	}
}

func TestResultNamesListAndEntry(t *testing.T) {
	f := mustNew(t,
		List{Name: "soft", Action: Mask, Words: []string{"darn"}},
		List{Name: "hard", Action: Reject, Words: []string{"x", "Heck"}},
	)
	got := f.Check("darn HECK")
	want := Result{Action: Reject, List: "hard", Pattern: "Heck"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	got = f.Check("darn it")
	want = Result{Action: Mask, List: "soft", Pattern: "darn", Masked: "**** it"}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if got := f.Check("fine"); got != (Result{}) {
		t.Fatalf("got %+v, want the zero Result", got)
	}
}

func TestEmptyFilters(t *testing.T) {
	var nilFilter *Filter
	for name, f := range map[string]*Filter{
		"nil":          nilFilter,
		"no lists":     mustNew(t),
		"no words":     mustNew(t, List{Name: "a", Action: Reject}),
		"empty slices": mustNew(t, List{Action: Mask, Words: []string{}}),
	} {
		if got := f.Check("fuck anything"); got != (Result{}) {
			t.Errorf("%s: got %+v", name, got)
		}
	}
	var h Holder
	if got := h.Load().Check("x"); got != (Result{}) {
		t.Errorf("empty Holder: got %+v", got)
	}
}

func TestNewRefuses(t *testing.T) {
	long := strings.Repeat("a", MaxEntryBytes+1)
	tooMany := make([]string, MaxEntries+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprint("w", i)
	}
	for _, tc := range []struct {
		name         string
		lists        []List
		list, entry  int
		reasonSubstr string
	}{
		{"no action", []List{{Words: []string{"a"}}}, 0, -1, "action"},
		{"bad action", []List{{Action: 7, Words: []string{"a"}}}, 0, -1, "action"},
		{"long name", []List{{Name: strings.Repeat("n", MaxNameBytes+1), Action: Mask}}, 0, -1, "name"},
		{"long entry", []List{mask("ok"), mask("fine", long)}, 1, 1, "bytes"},
		{"invalid UTF-8", []List{mask("a\xff")}, 0, 0, "UTF-8"},
		{"empty entry", []List{mask("")}, 0, 0, "empty"},
		{"blank entry", []List{mask(" \t ")}, 0, 0, "empty"},
		{"only marks", []List{mask("\u0301\u200b")}, 0, 0, "empty"},
		{"only separators", []List{{Action: Mask, IgnoreSeparators: true, Words: []string{"..."}}}, 0, 0, "empty"},
		{"too many entries", []List{mask(tooMany[:10]...), mask(tooMany[10:]...)}, -1, -1, "entries"},
		{"too many lists", make([]List, MaxLists+1), -1, -1, "lists"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := New(tc.lists)
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("New = %v, %v; want an *Error", f, err)
			}
			if e.List != tc.list || e.Entry != tc.entry || !strings.Contains(e.Reason, tc.reasonSubstr) {
				t.Fatalf("error %+v (%v), want list %d entry %d reason with %q", e, err, tc.list, tc.entry, tc.reasonSubstr)
			}
		})
	}
}

func TestPatternBytesBound(t *testing.T) {
	words := make([]string, 0, MaxPatternBytes/MaxEntryBytes+1)
	for i := range cap(words) {
		words = append(words, fmt.Sprintf("%0*d", MaxEntryBytes, i))
	}
	_, err := New([]List{mask(words...)})
	var e *Error
	if !errors.As(err, &e) || e.List != -1 || !strings.Contains(e.Reason, "normalized") {
		t.Fatalf("New = %v; want the MaxPatternBytes error", err)
	}
}

// TestFilterIsACopy: a Filter never changes, even if the caller reuses the
// slices it was built from.
func TestFilterIsACopy(t *testing.T) {
	words := []string{"darn"}
	lists := []List{mask(words...)}
	f := mustNew(t, lists...)
	words[0] = "changed"
	lists[0].Action = Reject
	if got := f.Check("darn"); got.Action != Mask || got.Pattern != "darn" {
		t.Fatalf("got %+v", got)
	}
}

// TestOverflowRefuses: a text crafted to make the matcher report a match at
// nearly every byte for every nested entry is refused, not examined forever.
func TestOverflowRefuses(t *testing.T) {
	var words []string
	for i := 1; i <= 64; i++ {
		words = append(words, strings.Repeat("a", i))
	}
	f := mustNew(t, mask(words...))
	got := f.Check(strings.Repeat("a", 10_000))
	if got.Action != Reject || !got.Overflow || got.List != "" {
		t.Fatalf("got %+v", got)
	}
	// A text with a few matches is masked as usual.
	if got := f.Check("a b"); got.Action != Mask || got.Masked != "* b" || got.Overflow {
		t.Fatalf("got %+v", got)
	}
}

func TestLargeList(t *testing.T) {
	words := genWords(MaxEntries, 1)
	words[len(words)/2] = "needle"
	f := mustNew(t, List{Name: "big", Action: Mask, Words: words})
	if f.Len() != MaxEntries {
		t.Fatalf("Len = %d", f.Len())
	}
	got := f.Check("find the NEEDLE here")
	if got.Action != Mask || got.Pattern != "needle" || !strings.Contains(got.Masked, "******") {
		t.Fatalf("got %+v", got)
	}
}

func TestConcurrentCheckAndSwap(t *testing.T) {
	var h Holder
	h.Store(mustNew(t, mask("darn")))
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 500 {
				r := h.Load().Check(fmt.Sprintf("%d darn %d heck", g, i))
				if r.Action == None {
					t.Errorf("no match for filter %p", h.Load())
					return
				}
			}
		})
	}
	for i := range 50 {
		if i%2 == 0 {
			h.Store(mustNew(t, reject("heck")))
		} else {
			h.Store(mustNew(t, mask("darn")))
		}
	}
	wg.Wait()
}

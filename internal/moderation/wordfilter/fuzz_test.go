package wordfilter

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzCheck builds a filter from a piece of the text itself and checks it:
// no panic; normalization is the same for entries and text and works rune
// by rune, so the piece must be found (as a Mask match, or Reject if the
// fuzzer says so); the masked text keeps the text's rune count; and Check
// is deterministic. A second, fixed filter with every option runs on the
// same text for the panics and invariants.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{
		"what the fuck", "ｆｕｃｋ", "お前はﾊﾞｶだ", "scheiße", "e\u0301fuck", "\xff fuck \xfe",
		"👨‍👩‍👧fuck👍🏽", "f.u.c.k", "сука", "你是傻逼吗", "كَلْب", "a\u0301\u0302b",
	} {
		f.Add(s, uint8(0), uint8(4), false)
	}
	fixed, err := New([]List{
		{Name: "r", Action: Reject, Words: []string{"fuck", "操你妈", "сука"}},
		{Name: "m", Action: Mask, Words: []string{"shit", "ass", "ばか", "darn it"}, WholeWords: true},
		{Name: "l", Action: Mask, Words: []string{"bitch", "ass"}, Leet: true, IgnoreSeparators: true},
		{Name: "s", Action: Mask, Words: []string{"crap"}, IgnoreSeparators: true},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, text string, at, n uint8, rej bool) {
		checkInvariants(t, fixed, text)

		// The entry: up to n bytes of text from byte at, on rune bounds.
		start := min(int(at), len(text))
		for start > 0 && start < len(text) && !utf8.RuneStart(text[start]) {
			start--
		}
		end := min(start+int(n), len(text))
		for end < len(text) && !utf8.RuneStart(text[end]) {
			end++
		}
		entry := text[start:end]
		if !utf8.ValidString(entry) || len(entry) > MaxEntryBytes {
			return
		}
		action := Mask
		if rej {
			action = Reject
		}
		flt, err := New([]List{{Name: "x", Action: action, Words: []string{entry}}})
		if err != nil {
			if strings.Contains(err.Error(), "empty once normalized") {
				return
			}
			t.Fatalf("New(%q): %v", entry, err)
		}
		got := checkInvariants(t, flt, text)
		if got.Action != action || got.Pattern != entry {
			t.Fatalf("entry %q (a piece of the text) not found in %q: %+v", entry, text, got)
		}
	})
}

func checkInvariants(t *testing.T, f *Filter, text string) Result {
	t.Helper()
	got := f.Check(text)
	if again := f.Check(text); again != got {
		t.Fatalf("Check(%q) not deterministic: %+v then %+v", text, got, again)
	}
	switch got.Action {
	case Mask:
		if utf8.RuneCountInString(got.Masked) != utf8.RuneCountInString(text) {
			t.Fatalf("Check(%q).Masked = %q: rune count %d, want %d", text, got.Masked,
				utf8.RuneCountInString(got.Masked), utf8.RuneCountInString(text))
		}
		if len(got.Masked) > len(text) || !strings.Contains(got.Masked, "*") {
			t.Fatalf("Check(%q).Masked = %q", text, got.Masked)
		}
	case None, Reject:
		if got.Masked != "" {
			t.Fatalf("Check(%q) = %+v: Masked set", text, got)
		}
	default:
		t.Fatalf("Check(%q): action %v", text, got.Action)
	}
	return got
}

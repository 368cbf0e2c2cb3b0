package notify

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestPreview: a text preview is valid UTF-8, at most previewRunes runes,
// never cuts a rune in two, and an opaque (non-UTF-8) payload gets none.
func TestPreview(t *testing.T) {
	long := strings.Repeat("你好", 400) // 3 bytes a rune: cut mid-rune at 480 bytes
	cases := []struct {
		in   []byte
		want string
	}{
		{[]byte("hello\n  world"), "hello world"},
		{[]byte{0xff, 0xfe, 'a'}, ""},
		{[]byte(""), ""},
	}
	for _, c := range cases {
		if got := preview(c.in); got != c.want {
			t.Errorf("preview(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	got := preview([]byte(long)[:4*previewRunes])
	if !utf8.ValidString(got) || utf8.RuneCountInString(got) != previewRunes || !strings.HasSuffix(got, "…") {
		t.Errorf("long preview: %d runes, valid %v: %q", utf8.RuneCountInString(got), utf8.ValidString(got), got)
	}
}

func TestTemplateExpand(t *testing.T) {
	f := fields{sender: "alice", group: "team {text}", text: "hi {sender}"}
	for tpl, want := range map[string]string{
		"{sender} in {group}":       "alice in team {text}", // values are not expanded again
		"{text}":                    "hi {sender}",
		"{count} new from {sender}": "1 new from alice",
		"{unknown} {sender":         "{unknown} {sender",
		"plain":                     "plain",
		"{":                         "{",
		"":                          "",
	} {
		if got := f.expand(tpl); got != want {
			t.Errorf("expand(%q) = %q, want %q", tpl, got, want)
		}
	}
}

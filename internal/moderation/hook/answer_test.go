package hook

import (
	"testing"
	"unicode/utf8"
)

// FuzzParseAnswer: any bytes an app answers either fail as malformed or
// give a decision within the documented rules; never a panic.
func FuzzParseAnswer(f *testing.F) {
	for _, s := range []string{
		`{"action":"allow"}`,
		`{"action":"reject","code":"spam","reason":"no links"}`,
		`{"action":"replace","content_type":"text","text":"x"}`,
		`{"action":"replace","payload":"AAEC/w=="}`,
		`{"action":"replace","text":"a","payload":"YQ=="}`,
		`{"action":"reject","code":"hook_x"}`,
		`null`, `[]`, `{"action":1}`, "\xff",
	} {
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, body []byte, groupChange bool) {
		ev := textEvent("m", "current")
		if groupChange {
			ev = Event{Type: EventGroupChange, Sender: "alice"}
		}
		d, err := parseAnswer(body, &ev)
		if err != nil {
			return
		}
		switch d.Action {
		case Allow:
		case Reject:
			if !validCode(d.Code) || len(d.Code) >= 5 && d.Code[:5] == "hook_" || len(d.Reason) > maxReasonBytes || !utf8.ValidString(d.Reason) {
				t.Fatalf("reject out of the rules: %+v from %q", d, body)
			}
		case Replace:
			if groupChange || d.ContentType == "" || len(d.ContentType) > maxContentTypeBytes {
				t.Fatalf("replace out of the rules: %+v from %q", d, body)
			}
		default:
			t.Fatalf("action %v from %q", d.Action, body)
		}
	})
}

func TestIdempotencyKey(t *testing.T) {
	for _, c := range []struct{ sender, id, want string }{
		{"alice", "", ""},
		{"alice", "m-1._~", "alice:m-1._~"},
		{"a@b.c", "x:y", "a%40b.c:x%3Ay"},
		{"alice", "é \x00\n%", "alice:%C3%A9%20%00%0A%25"},
	} {
		ev := Event{Sender: c.sender, ClientMsgID: c.id}
		if got := idempotencyKey(&ev); got != c.want || got != wantKey(c.sender, c.id) {
			t.Errorf("idempotencyKey(%q, %q) = %q, want %q", c.sender, c.id, got, c.want)
		}
	}
}

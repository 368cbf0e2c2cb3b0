package pushhttp

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/parleyim/parley/internal/notify/provider"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                               0,
		"0":                              0,
		"120":                            2 * time.Minute,
		" 5 ":                            5 * time.Second,
		"-3":                             0,
		"1.5":                            0,
		"soon":                           0,
		"99999999999999999999999":        MaxRetryAfter,
		"86401":                          MaxRetryAfter,
		"Sun, 01 Mar 2026 12:01:30 GMT":  90 * time.Second,
		"Sun, 01 Mar 2026 11:59:00 GMT":  0,
		"Sunday, 01-Mar-26 12:00:10 GMT": 10 * time.Second,
		"Tue, 01 Mar 2067 12:00:00 GMT":  MaxRetryAfter,
	} {
		h := http.Header{}
		if v != "" {
			h.Set("Retry-After", v)
		}
		if got := RetryAfter(h, now); got != want {
			t.Errorf("Retry-After %q: %v, want %v", v, got, want)
		}
	}
}

func TestFit(t *testing.T) {
	enc := func(n *provider.Notification) ([]byte, error) { return json.Marshal(n) }
	n := &provider.Notification{Title: strings.Repeat("T", 300), Body: strings.Repeat("ü<", 1000)}
	b, err := Fit(n, 1000, enc)
	if err != nil || len(b) > 1000 || len(b) < 900 {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	var m provider.Notification
	_ = json.Unmarshal(b, &m)
	if m.Title != n.Title || !strings.HasSuffix(m.Body, "…") || !utf8.ValidString(m.Body) {
		t.Errorf("title kept %v, body %q", m.Title == n.Title, m.Body)
	}
	if n.Body != strings.Repeat("ü<", 1000) {
		t.Error("Fit changed its argument")
	}
	// The title goes too when the body is not enough.
	b, err = Fit(n, 250, enc)
	if err != nil || len(b) > 250 {
		t.Fatalf("%d bytes, %v", len(b), err)
	}
	_ = json.Unmarshal(b, &m)
	if m.Body != "" || !strings.HasSuffix(m.Title, "…") {
		t.Errorf("%s", b)
	}
	// Nothing to shorten.
	if _, err := Fit(&provider.Notification{ConversationID: strings.Repeat("c", 500)}, 250, enc); err != ErrTooLarge {
		t.Errorf("err %v", err)
	}
}

func TestValidCollapseID(t *testing.T) {
	for s, want := range map[string]bool{
		"": true, "abc-DEF_123": true, strings.Repeat("a", 32): true,
		strings.Repeat("a", 33): false, "a b": false, "a/b": false, "é": false, "a=": false,
	} {
		if ValidCollapseID(s) != want {
			t.Errorf("%q: %v", s, !want)
		}
	}
}

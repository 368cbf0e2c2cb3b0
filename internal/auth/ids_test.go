package auth

import (
	"strings"
	"testing"
)

func TestNormalizeUsername(t *testing.T) {
	for in, want := range map[string]string{
		"alice": "alice", "Alice": "alice", "ALICE": "alice", "Bob.Smith@Example-1_x": "bob.smith@example-1_x",
	} {
		if got, ok := NormalizeUsername(in); !ok || got != want {
			t.Errorf("NormalizeUsername(%q) = %q %v, want %q", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "a:b", "ålice", "ａlice", strings.Repeat("a", 65)} {
		if got, ok := NormalizeUsername(bad); ok {
			t.Errorf("NormalizeUsername(%q) = %q, want refused", bad, got)
		}
	}
	// On the id alphabet the profile is ASCII lower-casing: the stores
	// index accounts from before the normalized form with strings.ToLower.
	for c := 0; c < 128; c++ {
		s := "x" + string(rune(c)) + "y"
		if !ValidUserID(s) {
			continue
		}
		if got, _ := NormalizeUsername(s); got != strings.ToLower(s) {
			t.Errorf("NormalizeUsername(%q) = %q, want %q", s, got, strings.ToLower(s))
		}
	}
}

func TestValidNewUsername(t *testing.T) {
	for _, ok := range []string{"alice", "Alice", "a", "a.b", "bob_smith", "x-1", "a@b.c", "9lives"} {
		if !ValidNewUsername(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "alice.", "alice@", ".alice", "@", "-", "_x", "x_", "a..b", "a.@b", "a:b", "ALICE "} {
		if ValidNewUsername(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

package auth

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestPasswordHashing(t *testing.T) {
	h, err := HashPassword("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$") || strings.Contains(h, "correct horse") {
		t.Fatalf("unexpected encoding %q", h)
	}
	if err := CheckPassword(h, "correct horse"); err != nil {
		t.Fatalf("right password refused: %v", err)
	}
	if err := CheckPassword(h, "correct horsE"); err != ErrPasswordMismatch {
		t.Fatalf("wrong password: %v", err)
	}
	h2, _ := HashPassword("correct horse")
	if h2 == h {
		t.Fatal("two hashes of one password are equal: the salt is not random")
	}
	parts := strings.Split(h, "$")
	for name, bad := range map[string]string{
		"empty":       "",
		"bcrypt-like": "$2a$10$abcdefghijklmnopqrstuv",
		"huge memory": strings.Join([]string{"", "argon2id", "v=19", "m=4194304,t=1,p=1", parts[4], parts[5]}, "$"),
		"zero time":   strings.Join([]string{"", "argon2id", "v=19", "m=19456,t=0,p=1", parts[4], parts[5]}, "$"),
		"bad salt":    strings.Join([]string{"", "argon2id", "v=19", parts[3], "!!", parts[5]}, "$"),
		"old version": strings.Join([]string{"", "argon2id", "v=16", parts[3], parts[4], parts[5]}, "$"),
	} {
		if err := CheckPassword(bad, "correct horse"); err != ErrPasswordMismatch {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestTokensRoundTrip(t *testing.T) {
	key := []byte(strings.Repeat("k", 32))
	app := []byte(strings.Repeat("a", 32))
	tk, err := NewTokens(key, app, "app", "parley")
	if err != nil {
		t.Fatal(err)
	}
	tok, c, err := tk.Issue("alice", 3, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	got, err := tk.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if got.UserID != "alice" || got.Epoch != 3 || got.TokenID != c.TokenID || len(c.TokenID) != 32 || !got.ExpiresAt.Equal(c.ExpiresAt) {
		t.Fatalf("claims %+v, issued %+v", got, c)
	}
	other, _ := NewTokens([]byte(strings.Repeat("x", 32)), app, "app", "parley")
	if _, err := other.Verify(tok); err != ErrInvalidToken {
		t.Fatalf("token verified under another key: %v", err)
	}
	expired, _, _ := tk.Issue("alice", 0, -time.Hour)
	if _, err := tk.Verify(expired); err != ErrInvalidToken {
		t.Fatalf("expired token: %v", err)
	}
	if _, err := NewTokens([]byte("short"), nil, "app", "parley"); err == nil {
		t.Fatal("a short key was accepted")
	}
	if _, err := NewTokens(key, nil, "parley", "parley"); err == nil {
		t.Fatal("the app issuer may not be parley's own")
	}
}

func TestValidIDs(t *testing.T) {
	for _, ok := range []string{"a", "alice", "A.b-c_d@e", strings.Repeat("x", 64)} {
		if !ValidUserID(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"", "a:b", "a b", "a/b", "é", strings.Repeat("x", 65), "a\x00"} {
		if ValidUserID(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
	if ValidDeviceField("a@b") || !ValidDeviceField("web-1.2_x") {
		t.Error("device field rules")
	}
}

// A token verified once is remembered, but only until it expires, and the
// memory of verified tokens stays bounded.
func TestTokensVerifiedCache(t *testing.T) {
	tk, err := NewTokens([]byte(strings.Repeat("k", 32)), nil, "app", "parley")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tk.now = func() time.Time { return now }
	tok, c, err := tk.Issue("alice", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second Verify is answered from memory
		if got, err := tk.Verify(tok); err != nil || got != c {
			t.Fatalf("Verify: %+v %v, issued %+v", got, err, c)
		}
	}
	if len(tk.verified) != 1 {
		t.Fatalf("%d tokens remembered, want 1", len(tk.verified))
	}
	// Tampering changes the token, so it is never a remembered one. The
	// character changed is in the signature's middle: every bit of it counts.
	mid := len(tok) - 10
	flipped := byte('A')
	if tok[mid] == 'A' {
		flipped = 'B'
	}
	if _, err := tk.Verify(tok[:mid] + string(flipped) + tok[mid+1:]); err != ErrInvalidToken {
		t.Fatalf("tampered token: %v", err)
	}
	now = c.ExpiresAt.Add(leeway + time.Second)
	if _, err := tk.Verify(tok); err != ErrInvalidToken {
		t.Fatalf("a remembered token verified after it expired: %v", err)
	}
	now = time.Now()
	for i := range verifiedCap + 10 {
		tok, _, err := tk.Issue("u"+strconv.Itoa(i), 0, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tk.Verify(tok); err != nil {
			t.Fatal(err)
		}
	}
	if len(tk.verified) > verifiedCap {
		t.Fatalf("%d tokens remembered, cap %d", len(tk.verified), verifiedCap)
	}
}

// A signature is one spelling only: its last base64url character carries 4
// bits of the HMAC and 2 unused bits, and a token with those unused bits set
// is refused, not read as the same token (a lenient decoder would accept
// four spellings of every token).
func TestTokensOneSpelling(t *testing.T) {
	tk, err := NewTokens([]byte(strings.Repeat("k", 32)), nil, "app", "parley")
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := tk.Issue("alice", 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, tok[len(tok)-1])
	if last < 0 || last&3 != 0 {
		t.Fatalf("token %q does not end in a canonical base64url character", tok)
	}
	for pad := 1; pad < 4; pad++ {
		other := tok[:len(tok)-1] + string(alphabet[last|pad])
		if _, err := tk.Verify(other); err != ErrInvalidToken {
			t.Errorf("token with unused bits %d accepted: %v", pad, err)
		}
	}
	if _, err := tk.Verify(tok); err != nil {
		t.Fatalf("the token itself: %v", err)
	}
}

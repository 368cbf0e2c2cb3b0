package auth

import (
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// exp, iat and nbf must be JSON numbers; numeric strings are refused.
func TestDateClaimsMustBeNumbers(t *testing.T) {
	app := []byte(strings.Repeat("a", 32))
	tk, err := NewTokens([]byte(strings.Repeat("k", 32)), app, "app", "parley")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sign := func(k string, v any) string {
		c := jwt.MapClaims{"iss": "app", "aud": "parley", "sub": "alice", "exp": now.Add(time.Hour).Unix(), "iat": now.Unix()}
		if k != "" {
			c[k] = v
		}
		s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(app)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if c, err := tk.Verify(sign("", nil)); err != nil || c.UserID != "alice" {
		t.Fatalf("numeric dates: %+v, %v", c, err)
	}
	if _, err := tk.Verify(sign("nbf", now.Add(-time.Minute).Unix())); err != nil {
		t.Fatalf("numeric nbf: %v", err)
	}
	for _, k := range []string{"exp", "iat", "nbf"} {
		if _, err := tk.Verify(sign(k, "1900000000")); err != ErrInvalidToken {
			t.Errorf("%s as a string: %v, want ErrInvalidToken", k, err)
		}
	}
}

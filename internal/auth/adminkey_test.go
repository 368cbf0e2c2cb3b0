package auth

import "testing"

func TestParseAdminKey(t *testing.T) {
	for _, c := range []struct{ entry, name, secret string }{
		{"ops:0123456789abcdef0123", "ops", "0123456789abcdef0123"},
		{"moderator-2:s3cret:with:colons", "moderator-2", "s3cret:with:colons"},
		{"Ops:0123456789abcdef", "key-", "Ops:0123456789abcdef"}, // upper case: not a name
		{"0123456789abcdef0123", "key-", "0123456789abcdef0123"},
	} {
		name, secret := ParseAdminKey(c.entry)
		if secret != c.secret || (c.name == "key-" && (len(name) != 12 || name[:4] != "key-")) || (c.name != "key-" && name != c.name) {
			t.Errorf("%q: %q, %q; want %q…, %q", c.entry, name, secret, c.name, c.secret)
		}
	}
	a, _ := ParseAdminKey("0123456789abcdef0123")
	b, _ := ParseAdminKey("0123456789abcdef0124")
	if a == b {
		t.Errorf("two secrets, one name %q", a)
	}
}

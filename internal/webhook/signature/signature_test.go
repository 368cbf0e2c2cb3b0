package signature

import "testing"

// The vector is Python's hmac.new(b"k", b'1763800000.{"a":1}', sha256):
// the format receivers in other languages implement.
func TestSignVector(t *testing.T) {
	const want = "dd7802e83c401b5e142ad8b8cfd82849aaaed26e9dd3d0b96bc6900404e860fb"
	body := []byte(`{"a":1}`)
	if got := Sign("k", "1763800000", body); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	if !Verify("k", "1763800000", "v1="+want, body) {
		t.Error("Verify refuses its own signature")
	}
	for _, bad := range []struct{ secret, ts, sig, body string }{
		{"x", "1763800000", "v1=" + want, `{"a":1}`},
		{"k", "1763800001", "v1=" + want, `{"a":1}`},
		{"k", "1763800000", "v1=" + want, `{"a":2}`},
		{"k", "1763800000", want, `{"a":1}`},
		{"k", "1763800000", "", `{"a":1}`},
	} {
		if Verify(bad.secret, bad.ts, bad.sig, []byte(bad.body)) {
			t.Errorf("Verify accepts %+v", bad)
		}
	}
}

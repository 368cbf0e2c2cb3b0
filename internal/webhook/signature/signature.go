// Package signature signs Parley's HTTP calls to the app (webhooks,
// moderation hooks) and checks them: X-Parley-Signature is
// "v1=" + hex(HMAC-SHA256(secret, timestamp + "." + body)), timestamp being
// X-Parley-Timestamp. It imports nothing of Parley's, so every package that
// calls the app can use it without an import cycle.
package signature

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// Sign is the hex HMAC-SHA256 of timestamp + "." + body under secret (what
// X-Parley-Signature carries after "v1=").
func Sign(secret, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp))
	m.Write([]byte{'.'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// Verify checks a request's signature header against its timestamp and
// body, in constant time. Receivers written in Go can use it.
func Verify(secret, timestamp, signatureHeader string, body []byte) bool {
	want := "v1=" + Sign(secret, timestamp, body)
	return hmac.Equal([]byte(want), []byte(signatureHeader))
}

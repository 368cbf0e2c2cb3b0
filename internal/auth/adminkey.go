package auth

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// ParseAdminKey reads an admin API key entry of the configuration: either
// "NAME:SECRET", where NAME is 1-32 bytes of a-z, 0-9, "_" and "-" (the
// name the audit log records), or a bare secret, named "key-" and the first
// 8 hex digits of its SHA-256 (stable, and not the secret).
func ParseAdminKey(entry string) (name, secret string) {
	if n, s, ok := strings.Cut(entry, ":"); ok && validKeyName(n) {
		return n, s
	}
	sum := sha256.Sum256([]byte(entry))
	return "key-" + hex.EncodeToString(sum[:4]), entry
}

func validKeyName(n string) bool {
	if len(n) == 0 || len(n) > 32 {
		return false
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

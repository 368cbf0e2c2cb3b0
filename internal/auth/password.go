// Package auth holds Parley's identity primitives: password hashing, signed
// tokens, and the secrets they need.
package auth

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// argon2id parameters: OWASP's recommended minimum (19 MiB, 2 passes), a balance
// between resistance to cracking and login cost on a 2-core server.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024 // KiB
	argonThreads = 1
	argonKeyLen  = 32
	saltLen      = 16
)

// MaxPasswordBytes bounds the work one login request can cause.
const MaxPasswordBytes = 256

// ErrPasswordMismatch means the password does not match the hash.
var ErrPasswordMismatch = errors.New("auth: password mismatch")

// HashPassword returns an encoded argon2id hash (PHC string format).
func HashPassword(password string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	b64 := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, argonMemory, argonTime, argonThreads, b64.EncodeToString(salt), b64.EncodeToString(key)), nil
}

// CheckPassword compares a password with an encoded hash in constant time.
func CheckPassword(encoded, password string) error {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return ErrPasswordMismatch
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return ErrPasswordMismatch
	}
	var mem, tm uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &tm, &threads); err != nil {
		return ErrPasswordMismatch
	}
	// Bound stored parameters so a tampered record cannot make a login allocate gigabytes.
	if mem == 0 || mem > 256*1024 || tm == 0 || tm > 10 || threads == 0 {
		return ErrPasswordMismatch
	}
	b64 := base64.RawStdEncoding
	salt, err := b64.DecodeString(parts[4])
	if err != nil {
		return ErrPasswordMismatch
	}
	want, err := b64.DecodeString(parts[5])
	if err != nil || len(want) == 0 || len(want) > 64 {
		return ErrPasswordMismatch
	}
	got := argon2.IDKey([]byte(password), salt, tm, mem, threads, uint32(len(want)))
	if subtle.ConstantTimeCompare(got, want) != 1 {
		return ErrPasswordMismatch
	}
	return nil
}

package blob

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key in bytes; S3 allows 1024, and the rest is
// left for a Prefix.
const MaxKeyLen = 512

// MaxKeyElemLen is the longest element of a key in bytes: a file name's
// limit on Linux file systems, so every key fits Local as it fits S3.
const MaxKeyElemLen = 255

// tusPrefix is the key space of tus uploads in every backend.
const tusPrefix = "uploads/"

// maxTusIDLen bounds the object part of a tus upload id (tusd makes 32 hex
// digits).
const maxTusIDLen = 128

// CheckKey returns nil if key is a valid object key, or an error wrapping
// ErrInvalidKey that says why not. A valid key is 1 to MaxKeyLen bytes of
// UTF-8 without control bytes or backslashes, made of elements separated
// by single slashes, none empty, none longer than MaxKeyElemLen, none
// starting with "." (which also rules out "." and ".."); it cannot start or
// end with a slash. Such a key read
// as a relative path always stays under the directory it is joined to.
func CheckKey(key string) error {
	bad := func(why string) error { return fmt.Errorf("%w %q: %s", ErrInvalidKey, clip(key), why) }
	switch {
	case key == "":
		return bad("empty")
	case len(key) > MaxKeyLen:
		return bad(fmt.Sprintf("longer than %d bytes", MaxKeyLen))
	case !utf8.ValidString(key):
		return bad("not UTF-8")
	}
	for i := 0; i < len(key); i++ {
		switch c := key[i]; {
		case c < 0x20 || c == 0x7f:
			return bad("control byte")
		case c == '\\':
			return bad("backslash")
		}
	}
	for elem := range strings.SplitSeq(key, "/") {
		switch {
		case elem == "":
			return bad("empty element (leading, trailing or double slash)")
		case elem[0] == '.':
			return bad("element starting with '.'")
		case len(elem) > MaxKeyElemLen:
			return bad(fmt.Sprintf("element longer than %d bytes", MaxKeyElemLen))
		}
	}
	return nil
}

// checkPutKey is CheckKey plus the rule that tusd's key space is not Put's.
func checkPutKey(key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if strings.HasPrefix(key, tusPrefix) {
		return fmt.Errorf("%w %q: %s is tus uploads' space", ErrInvalidKey, key, tusPrefix)
	}
	return nil
}

// validTusID reports whether id can be (the object part of) a tus upload
// id here: one key element of letters, digits, '-' and '_'. tusd makes hex
// ids; the check stops a client-chosen or hook-chosen id from naming other
// files.
func validTusID(id string) bool {
	if id == "" || len(id) > maxTusIDLen {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// clip shortens a key for an error message.
func clip(key string) string {
	if len(key) > 64 {
		return key[:64] + "..."
	}
	return key
}

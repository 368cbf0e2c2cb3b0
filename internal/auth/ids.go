package auth

import (
	"golang.org/x/text/secure/precis"
)

// ValidUserID reports whether s can be a user id (and username): 1-64 bytes of
// [A-Za-z0-9_.@-]. The narrow alphabet keeps ids safe in conversation ids
// ("p:alice:bob"), storage keys, subjects and logs.
func ValidUserID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !idByte(s[i]) {
			return false
		}
	}
	return true
}

func idByte(c byte) bool {
	return alnum(c) || c == '_' || c == '.' || c == '@' || c == '-'
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// ValidNewUsername reports whether s may be chosen as a new username
// (registration, accounts the admin API creates): a ValidUserID that starts
// and ends with a letter or digit and has no two of "_.@-" in a row. Names
// that differ only by trailing or doubled punctuation ("alice", "alice.",
// "alice@", "alice..x") look alike in a list; this rule leaves one of them
// possible, while case look-alikes are caught by NormalizeUsername.
// Existing ids keep working: the rule applies only when a name is created.
func ValidNewUsername(s string) bool {
	if !ValidUserID(s) || !alnum(s[0]) || !alnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		if !alnum(s[i]) && !alnum(s[i-1]) {
			return false
		}
	}
	return true
}

// NormalizeUsername returns the form usernames are unique on, and false when
// s is not a ValidUserID. It is the RFC 8265 UsernameCaseMapped profile
// (width mapping, case folding to lower case, NFC), so the rule stays right
// if the alphabet ever grows beyond ASCII; on today's alphabet it equals
// strings.ToLower, which the stores use to index accounts that existed
// before the normalized form was recorded.
func NormalizeUsername(s string) (string, bool) {
	if !ValidUserID(s) {
		return "", false
	}
	n, err := precis.UsernameCaseMapped.String(s)
	if err != nil {
		return "", false
	}
	return n, true
}

// ValidDeviceField reports whether s can be a device id or device type: 1-64
// bytes of [A-Za-z0-9_.-].
func ValidDeviceField(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
		default:
			return false
		}
	}
	return true
}

package auth

// ValidUserID reports whether s can be a user id (and username): 1-64 bytes of
// [A-Za-z0-9_.@-]. The narrow alphabet keeps ids safe in conversation ids
// ("p:alice:bob"), storage keys, subjects and logs.
func ValidUserID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '@', c == '-':
		default:
			return false
		}
	}
	return true
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

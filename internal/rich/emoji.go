package rich

import (
	"unicode"
	"unicode/utf8"
)

// Reaction limits.
const (
	// MaxEmojiBytes bounds one reaction's emoji (a long ZWJ sequence such
	// as a family with skin tones is about 35 bytes; short names like
	// ":+1:" fit too).
	MaxEmojiBytes = 32
	// MaxDistinctReactions bounds the distinct emojis on one message, so a
	// message's counts stay small however many react.
	MaxDistinctReactions = 20
)

// ValidEmoji accepts 1-MaxEmojiBytes of UTF-8 with no spaces or control
// characters. It does not check that the text is an emoji: apps use short
// names (":tada:") and custom reactions too.
func ValidEmoji(e string) bool {
	if e == "" || len(e) > MaxEmojiBytes || !utf8.ValidString(e) {
		return false
	}
	for _, r := range e {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
	}
	return true
}

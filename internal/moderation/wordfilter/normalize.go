package wordfilter

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// variant is how the text is normalized for a group of lists: the options
// that change the normalized text itself. WholeWords does not: it is a test
// on a match, so lists that differ only by it share a variant.
type variant uint8

const (
	variantLeet variant = 1 << iota
	variantSkipSep
	numVariants = 4
)

func variantOf(l *List) variant {
	var v variant
	if l.Leet {
		v |= variantLeet
	}
	if l.IgnoreSeparators {
		v |= variantSkipSep
	}
	return v
}

// A pos entry holds the byte offset in the original text of the rune that
// produced a normalized byte, so a match maps back to original runes.
// gapBit is set on the first byte of a rune that follows separators the
// variant dropped: the matcher then knows where words were split.
const (
	gapBit  = 1 << 31
	offMask = gapBit - 1
	// maxTextBytes is the longest text whose offsets fit beside gapBit.
	maxTextBytes = offMask
)

// Special values in an ASCII table: asciiSep is "a separator: drop it"
// (variants that ignore separators), asciiDrop "drop it, it is inside a
// word" (the apostrophe there: "it's hit" is two words, not three), and ' '
// "a space: collapse runs of them".
const (
	asciiSep  = 0
	asciiDrop = 1
)

// asciiTable is the whole normalization of an ASCII byte for variant v,
// so ASCII text (most chat) costs one table load per byte.
func asciiTable(v variant) (t [utf8.RuneSelf]byte) {
	for i := range t {
		c := byte(i)
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if v&variantLeet != 0 {
			c = leetASCII(c)
		}
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			t[i] = c
		case c == '\'' && v&variantSkipSep != 0:
			t[i] = asciiDrop
		case c == ' ' || c < 0x20 || c == 0x7f: // blanks and controls
			if v&variantSkipSep != 0 {
				t[i] = asciiSep
			} else {
				t[i] = ' '
			}
		default: // punctuation and symbols
			if v&variantSkipSep != 0 {
				t[i] = asciiSep
			} else {
				t[i] = c
			}
		}
	}
	return t
}

// leetASCII undoes the common digit and symbol substitutions. '1' stands for
// both i and l, so l folds to i as well (in leet lists only): "he11" and
// "hell" meet at "heii".
func leetASCII(c byte) byte {
	switch c {
	case '0':
		return 'o'
	case '1', 'l':
		return 'i'
	case '3':
		return 'e'
	case '4', '@':
		return 'a'
	case '5', '$':
		return 's'
	case '7':
		return 't'
	}
	return c
}

// normalizer appends the normalized form of a text to hay, and to pos where
// each byte came from. It lives on the caller's stack; hay and pos are the
// caller's (pooled) buffers.
type normalizer struct {
	hay     []byte
	pos     []uint32
	table   *[utf8.RuneSelf]byte
	skipSep bool
	space   bool // the last rune appended was a space: more are dropped
	gap     bool // separators were dropped since the last rune appended
}

func (n *normalizer) text(s string) {
	for i := 0; i < len(s); {
		if s[i] < utf8.RuneSelf {
			i = n.asciiRun(s, i)
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		n.nonASCII(r, s[i:i+size], uint32(i))
		i += size
	}
}

// asciiRun normalizes the ASCII bytes of s from i on and returns where they
// end. It is ascii with the buffers in locals: most chat is ASCII and this
// loop is half of a Check that matches nothing.
func (n *normalizer) asciiRun(s string, i int) int {
	hay, pos, t := n.hay, n.pos, n.table
	for ; i < len(s); i++ {
		b := s[i]
		if b >= utf8.RuneSelf {
			break
		}
		c := t[b]
		if c > ' ' && !n.gap {
			hay = append(hay, c)
			pos = append(pos, uint32(i))
			n.space = false
			continue
		}
		n.hay, n.pos = hay, pos
		n.ascii(c, uint32(i))
		hay, pos = n.hay, n.pos
	}
	n.hay, n.pos = hay, pos
	return i
}

func (n *normalizer) ascii(c byte, off uint32) {
	switch c {
	case asciiSep:
		n.gap = true
		return
	case asciiDrop:
		return
	case ' ':
		if n.space {
			return
		}
		n.space = true
	default:
		n.space = false
	}
	if n.gap {
		off |= gapBit
		n.gap = false
	}
	n.hay = append(n.hay, c)
	n.pos = append(n.pos, off)
}

func (n *normalizer) put(r rune, off uint32) {
	n.space = false
	first := off
	if n.gap {
		first |= gapBit
		n.gap = false
	}
	k := len(n.hay)
	n.hay = utf8.AppendRune(n.hay, r)
	n.pos = append(n.pos, first)
	for k++; k < len(n.hay); k++ {
		n.pos = append(n.pos, off)
	}
}

// nonASCII handles one rune of the original text: src is its bytes. Invalid
// UTF-8 arrives as RuneError with one byte and is normalized like U+FFFD,
// a symbol; the original bytes stay untouched in any masked output.
func (n *normalizer) nonASCII(r rune, src string, off uint32) {
	switch {
	case r == utf8.RuneError:
		n.fold(r, off)
	case 0x4E00 <= r && r <= 0x9FFF, 0xAC00 <= r && r <= 0xD7A3:
		// Common Han and Hangul syllables have no case, no decomposition
		// and are not confusable: skip the lookups. Hangul must not be
		// decomposed at all (below): jamo would let "가" match inside "각".
		n.put(r, off)
	default:
		// NFKD folds compatibility forms: full-width Latin to ASCII,
		// half-width katakana to full width with a separate voicing mark,
		// ligatures, circled and styled letters; and it splits accents off
		// so fold can drop them. The table gives the full decomposition of
		// one rune without allocating (nil for Hangul syllables, which we
		// want whole).
		d := norm.NFKD.PropertiesString(src).Decomposition()
		if len(d) == 0 {
			n.fold(r, off)
			return
		}
		for len(d) > 0 {
			dr, size := utf8.DecodeRune(d)
			d = d[size:]
			n.fold(dr, off)
		}
	}
}

// fold normalizes one decomposed rune: drops marks and invisible format
// characters, folds case, maps look-alikes and katakana, and sorts blanks
// and separators.
func (n *normalizer) fold(r rune, off uint32) {
	if r < utf8.RuneSelf {
		n.ascii(n.table[r], off)
		return
	}
	if r == 'ß' || r == 'ẞ' { // the one common full case folding to two letters
		n.ascii(n.table['s'], off)
		n.ascii(n.table['s'], off)
		return
	}
	if ignorable(r) {
		return
	}
	// Simple case folding; ToUpper first so that ı, ſ, ς and the like
	// meet their ordinary lower-case letter.
	r = unicode.ToLower(unicode.ToUpper(r))
	if r < utf8.RuneSelf {
		n.ascii(n.table[r], off)
		return
	}
	if c := confusable(r); c != 0 {
		n.ascii(n.table[c], off)
		return
	}
	if 0x30A1 <= r && r <= 0x30F6 || r == 0x30FD || r == 0x30FE {
		r -= 0x60 // katakana to hiragana: ばか and バカ are the same word
	}
	if unicode.IsSpace(r) {
		n.ascii(n.table[' '], off)
		return
	}
	if n.skipSep && (r == '’' || r == 'ʼ') { // apostrophes, as asciiDrop
		return
	}
	if n.skipSep && isSeparator(r) {
		n.gap = true
		return
	}
	n.put(r, off)
}

// ignorable runes are dropped from the normalized text without counting as
// separators: accents and other combining marks (kept: the kana voicing
// marks, which spell different words), invisible format characters (zero
// width space and joiners, soft hyphen, bidi controls, tags), the Arabic
// tatweel that only stretches a word, and the Hangul fillers.
func ignorable(r rune) bool {
	switch r {
	case 0x3099, 0x309A:
		return false
	case 0x0640, 0x115F, 0x1160, 0x3164, 0xFFA0:
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf)
}

// isSeparator says what IgnoreSeparators lists skip between letters:
// blanks, punctuation, symbols (emoji included) and controls.
func isSeparator(r rune) bool {
	return unicode.IsSpace(r) || unicode.IsPunct(r) || unicode.IsSymbol(r) || unicode.IsControl(r)
}

// isWordRune says whether r, a normalized rune, is part of a word for the
// whole-word test. Scripts written without spaces between words (Han, kana,
// Thai and their neighbours) have no word boundaries to test, and neither,
// by choice, has Hangul: Korean attaches particles to the word they follow.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || 'A' <= r && r <= 'Z'
	}
	if noSpaceScript(r) {
		return false
	}
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r)
}

func noSpaceScript(r rune) bool {
	switch {
	case 0x0E00 <= r && r <= 0x0FFF: // Thai, Lao, Tibetan
		return true
	case 0x1000 <= r && r <= 0x11FF: // Myanmar, Georgian (spaced, below), Hangul jamo
		return r < 0x10A0 || r >= 0x1100
	case 0x1780 <= r && r <= 0x17FF: // Khmer
		return true
	case 0x2E80 <= r && r <= 0xA4CF: // CJK radicals, kana, bopomofo, compatibility jamo, Han, Yi
		return true
	case 0xAC00 <= r && r <= 0xD7FF: // Hangul
		return true
	case 0xF900 <= r && r <= 0xFAFF, 0xFF61 <= r && r <= 0xFFDC:
		return true
	case r >= 0x20000: // Han extensions
		return true
	}
	return false
}

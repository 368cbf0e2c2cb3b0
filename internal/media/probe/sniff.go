package probe

import (
	"strings"

	"github.com/gabriel-vasile/mimetype"
)

// SniffBytes is how many leading bytes of a file Sniff looks at: mimetype's
// default read limit. A shorter head is fine for a shorter file; passing
// fewer bytes of a longer file can only make the answer less precise.
const SniffBytes = 4096

// Sniff returns the MIME type the bytes say the file is, from its first
// SniffBytes bytes (more are ignored). It never fails: unknown bytes are
// "application/octet-stream". Text carries its charset, as in
// "text/plain; charset=utf-8". The client's declared type plays no part.
//
// HTML and SVG are reported as what they are (text/html, image/svg+xml);
// a server that serves uploads inline must not serve those on its origin.
func Sniff(head []byte) string {
	if len(head) > SniffBytes {
		head = head[:SniffBytes]
	}
	return normalize(mimetype.Detect(head).String())
}

// normalize maps the few names mimetype gives that differ from what
// browsers and the allow-lists expect.
func normalize(ct string) string {
	switch essence(ct) {
	case "audio/x-m4a":
		// M4A is MPEG-4 audio; audio/mp4 is its registered name.
		return "audio/mp4"
	case "image/apng":
		// An APNG is a PNG whose default image every PNG decoder shows;
		// allow-lists and decoders treat it as one.
		return "image/png"
	}
	return ct
}

// essence is the lower-case "type/subtype" of a media type, parameters
// dropped.
func essence(ct string) string {
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	return strings.ToLower(strings.TrimSpace(ct))
}

// Allowed reports whether contentType matches one of patterns: an exact
// "type/subtype", "type/*" or "*/*". Parameters (";charset=...") and case
// are ignored on both sides. No patterns allow nothing.
//
// "image/*" admits image/svg+xml, which runs scripts when a browser opens it
// inline: list the image types one by one if uploads are served inline.
func Allowed(contentType string, patterns []string) bool {
	typ, sub, ok := strings.Cut(essence(contentType), "/")
	if !ok || typ == "" || sub == "" {
		return false
	}
	for _, p := range patterns {
		pt, ps, ok := strings.Cut(essence(p), "/")
		if !ok {
			continue
		}
		if (pt == "*" && ps == "*") || (pt == typ && (ps == "*" || ps == sub)) {
			return true
		}
	}
	return false
}

// sameType reports whether a declared type names the sniffed one, allowing
// for the aliases mimetype knows (audio/x-mp4a for audio/mp4 and the like).
func sameType(declared, sniffed string) bool {
	d, s := essence(normalize(declared)), essence(sniffed)
	if d == s {
		return true
	}
	if m := mimetype.Lookup(s); m != nil {
		return m.Is(d)
	}
	return false
}

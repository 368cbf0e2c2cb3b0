package chat

import (
	"strings"

	"github.com/parleyim/parley/internal/auth"
)

// Conversation ids name their kind by prefix. A direct (1:1) conversation is
// "p:" + the two user ids in byte order, joined by ':' (which user ids cannot
// contain), so both sides derive the same id without a lookup.
const directPrefix = "p:"

// DirectID returns the conversation id of the 1:1 conversation between a and b.
func DirectID(a, b string) string {
	if b < a {
		a, b = b, a
	}
	return directPrefix + a + ":" + b
}

// parseDirect splits a direct conversation id into its two user ids.
func parseDirect(conv string) (a, b string, ok bool) {
	rest, found := strings.CutPrefix(conv, directPrefix)
	if !found {
		return "", "", false
	}
	a, b, found = strings.Cut(rest, ":")
	if !found || !auth.ValidUserID(a) || !auth.ValidUserID(b) || b < a {
		return "", "", false
	}
	return a, b, true
}

// directPeer returns the other member of a direct conversation that uid is in.
func directPeer(conv, uid string) (peer string, ok bool) {
	a, b, ok := parseDirect(conv)
	switch {
	case !ok:
		return "", false
	case uid == a:
		return b, true
	case uid == b:
		return a, true
	}
	return "", false
}

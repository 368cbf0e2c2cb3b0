package route

import (
	"strings"
	"testing"
)

// Keys that are not valid NATS subject tokens (user ids and room names may
// hold '.') map to distinct, valid subjects.
func TestSubjectEscaping(t *testing.T) {
	r := &NATS{cfg: NATSConfig{Prefix: "parley"}}
	seen := map[string]string{}
	for _, key := range []string{"alice", "a.b", "a*b", "a>b", "~61", "g:0011", "a b"} {
		subj := r.subject(TopicUser, key)
		tok := strings.TrimPrefix(subj, "parley.u.")
		if strings.ContainsAny(tok, ".*> ") || tok == "" {
			t.Fatalf("key %q gave subject %q", key, subj)
		}
		if other, dup := seen[subj]; dup {
			t.Fatalf("keys %q and %q share subject %q", other, key, subj)
		}
		seen[subj] = key
	}
}

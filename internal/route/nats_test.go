package route

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestEnvelopeRoundTrip(t *testing.T) {
	in := &Envelope{Kind: 5, Except: "3-17", Keys: []string{"a", "", "g:00ff"}, Data: []byte{0, 1, 2, 255}}
	var out Envelope
	if err := decode(encode(in), &out); err != nil {
		t.Fatal(err)
	}
	if out.Kind != in.Kind || out.Except != in.Except || !slices.Equal(out.Keys, in.Keys) || !bytes.Equal(out.Data, in.Data) {
		t.Fatalf("round trip: %+v, want %+v", out, in)
	}
	for _, bad := range [][]byte{nil, {0}, {0, 5, 'a'}, {0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}} {
		if err := decode(bad, &out); err == nil {
			t.Fatalf("decode(%v) accepted a malformed envelope", bad)
		}
	}
}

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

func FuzzEnvelope(f *testing.F) {
	f.Add(encode(&Envelope{Kind: 1, Except: "x", Keys: []string{"k"}, Data: []byte("d")}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var env Envelope
		if decode(b, &env) == nil {
			var again Envelope
			if err := decode(encode(&env), &again); err != nil || again.Except != env.Except || !slices.Equal(again.Keys, env.Keys) {
				t.Fatalf("re-encode of a decoded envelope differs: %v", err)
			}
		}
	})
}

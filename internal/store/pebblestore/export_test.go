package pebblestore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/parleyim/parley/internal/migrate"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// TestExportRefusesUnknownNamespace: a store holding records of a
// namespace with no exporter (a kind added without one) is refused by
// name, not migrated without them.
func TestExportRefusesUnknownNamespace(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	if err := s.CreateUser(ctx, store.User{ID: "alice", NameKey: "alice", PasswordHash: "h"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Exporter().Check(ctx); err != nil {
		t.Fatalf("Check of a store with known kinds only: %v", err)
	}
	key := []byte{0x7f, 1, 'a'} // a namespace byte no kind uses
	if err := s.db.Set(key, frame(key, nil), nil); err != nil {
		t.Fatal(err)
	}
	err := s.Exporter().Check(ctx)
	if !errors.Is(err, migrate.ErrUnknownNamespace) {
		t.Fatalf("Check with an unknown namespace's record: %v, want ErrUnknownNamespace", err)
	}
}

// TestExportNamespacesCovered: every namespace the package declares (a
// "ns... byte = 'c'" constant in any of its files) is exported or declared
// derived, each once.
func TestExportNamespacesCovered(t *testing.T) {
	seen := map[byte]string{}
	for _, k := range exportKinds {
		if prev, ok := seen[k.ns]; ok {
			t.Errorf("namespace %q exported as %s and %s", k.ns, prev, k.kind)
		}
		seen[k.ns] = string(k.kind)
	}
	for ns := range derivedNamespaces {
		if prev, ok := seen[ns]; ok {
			t.Errorf("namespace %q both exported (%s) and derived", ns, prev)
		}
		seen[ns] = "derived"
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`\bns[A-Za-z]+\s+byte\s*=\s*'(.)'`)
	declared := 0
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllSubmatch(src, -1) {
			declared++
			if _, ok := seen[m[1][0]]; !ok {
				t.Errorf("namespace %q (%s) is neither exported nor derived", m[1][0], f)
			}
		}
	}
	if declared < len(seen) {
		t.Errorf("%d namespace declarations found, fewer than the %d handled: the pattern misses some", declared, len(seen))
	}
}

// TestExportBatchesBoundedByBytes: Read stops at about maxBytes, and
// reading on from each position returns every message once, in order.
func TestExportBatchesBoundedByBytes(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	for range 50 {
		mustAppend(t, s, &pb.Message{ConversationId: "c", From: "alice", Payload: make([]byte, 100)})
	}
	var after []byte
	var seqs []uint64
	batches := 0
	for {
		recs, next, err := s.Exporter().Read(ctx, "messages", after, 500)
		if err != nil {
			t.Fatal(err)
		}
		batches++
		if len(recs) > 5 {
			t.Fatalf("a batch of %d messages of ~130 bytes with maxBytes 500", len(recs))
		}
		for _, r := range recs {
			seqs = append(seqs, r.(migrate.Message).Msg.Seq)
		}
		if next == nil {
			break
		}
		after = next
	}
	if len(seqs) != 50 || batches < 10 {
		t.Fatalf("%d messages in %d batches", len(seqs), batches)
	}
	for i, seq := range seqs {
		if seq != uint64(i+1) {
			t.Fatalf("message %d has seq %d", i, seq)
		}
	}
}

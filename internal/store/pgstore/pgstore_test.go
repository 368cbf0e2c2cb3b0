package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyim/parley/internal/store"
	"github.com/parleyim/parley/internal/store/storetest"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

var quiet = slog.New(slog.DiscardHandler)

// testURL returns the database of PARLEY_TEST_PG, or skips the test.
func testURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("PARLEY_TEST_PG")
	if url == "" {
		t.Skip("PARLEY_TEST_PG is unset: PostgreSQL tests need a database URL")
	}
	return url
}

// freshSchema returns a new schema name, dropped (with everything in it)
// when the test ends, so tests and parallel CI runs never share tables.
func freshSchema(t testing.TB, url string) string {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "parley_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

func openSchema(t testing.TB, url, schema string) *Store {
	t.Helper()
	// A connection may take longer than the default 3 s to be accepted
	// while the other test packages load the machine (CI runs them at once).
	s, err := Open(context.Background(), url, Options{Schema: schema, Logger: quiet, ConnectTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("Open(schema %s): %v", schema, err)
	}
	return s
}

// openTemp opens a store on a fresh schema, closed at the end of the test.
func openTemp(t testing.TB) *Store {
	t.Helper()
	url := testURL(t)
	s := openSchema(t, url, freshSchema(t, url))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestPGConformance(t *testing.T) {
	url := testURL(t)
	storetest.Run(t, func(t *testing.T) store.Store { return openSchema(t, url, freshSchema(t, url)) })
}

func TestPGPersistence(t *testing.T) {
	url := testURL(t)
	storetest.RunPersistence(t, func(t *testing.T) func() store.Store {
		schema := freshSchema(t, url)
		return func() store.Store { return openSchema(t, url, schema) }
	})
}

func message(conv, from, to, clientID string) *pb.Message {
	return &pb.Message{ConversationId: conv, From: from, To: to, ClientMsgId: clientID, ContentType: "text", Payload: []byte("p-" + clientID)}
}

func mustAppend(t testing.TB, s *Store, msgs ...*pb.Message) []store.AppendResult {
	t.Helper()
	res, err := s.Append(context.Background(), msgs)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	return res
}

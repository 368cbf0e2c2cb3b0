package server_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyim/parley/server"
)

// pgConfig points a server at the test database in a fresh schema, dropped
// at the end; it skips (naming what is missing) without PARLEY_TEST_PG.
func pgConfig(t *testing.T) func(*server.Config) {
	t.Helper()
	url := os.Getenv("PARLEY_TEST_PG")
	if url == "" {
		t.Skip("PARLEY_TEST_PG is unset: PostgreSQL tests need a database URL")
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "srvtest_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Logf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
	})
	return func(c *server.Config) { c.PostgresURL, c.PostgresSchema = url, schema }
}

// A node on PostgreSQL: chat, a group through the admin API, then a
// restart on the same schema keeps everything.
func TestPGServerChatAndRestart(t *testing.T) {
	usePG := pgConfig(t)
	dir := t.TempDir()
	ts := startServer(t, func(c *server.Config) { usePG(c); c.DataDir = dir })
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	_, recB := ts.connect(t, "bob", "b1", "phone", transports[2])
	ctx := ctx10(t)
	var lastSeq uint64
	for i := 0; i < 20; i++ {
		ack, err := alice.SendText(ctx, "bob", "hello")
		if err != nil {
			t.Fatal(err)
		}
		if ack.Seq != uint64(i+1) {
			t.Fatalf("seq %d, want %d", ack.Seq, i+1)
		}
		lastSeq = ack.Seq
	}
	eventually(t, "bob receives 20", func() bool { return recB.count() == 20 })
	adm := adminClient(ts)
	g, err := adm.CreateGroup(ctx, groupSpec("alice", "bob"))
	if err != nil {
		t.Fatal(err)
	}
	shut, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ts.Shutdown(shut); err != nil {
		t.Fatal(err)
	}

	ts2 := startServer(t, func(c *server.Config) { usePG(c); c.DataDir = dir })
	bob := ts2.dialOnly(t, "bob", "b2", "desktop")
	page, err := bob.History(ctx, "p:alice:bob", 0, 100)
	if err != nil || len(page.Messages) != 20 || page.Messages[19].Seq != lastSeq {
		t.Fatalf("history after restart: %d messages, %v", len(page.GetMessages()), err)
	}
	if got, err := adminClient(ts2).Group(ctx, g.ConversationId); err != nil || got.MemberCount != 2 {
		t.Fatalf("group after restart: %v %v", got, err)
	}
	code, _ := adminDo(t, "GET", ts2.httpBase+"/readyz", "", nil)
	if code != 200 {
		t.Fatalf("/readyz on PostgreSQL: %d", code)
	}
}

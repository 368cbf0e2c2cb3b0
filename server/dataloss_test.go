package server_test

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyim/parley/internal/store/pebblestore"
	"github.com/parleyim/parley/server"
)

// TestLostSecretsRefuseToStart: a data directory that holds a store but
// whose secrets.json was deleted does not start (new secrets would
// invalidate every token and admin key in use) unless NewSecrets says so.
func TestLostSecretsRefuseToStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0", TCPAddr: "off", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown(ctx10(t))
	secrets := filepath.Join(dir, "secrets.json")
	first, err := os.ReadFile(secrets)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(secrets); err != nil {
		t.Fatal(err)
	}

	srv, err = server.New(cfg)
	if err == nil {
		srv.Shutdown(ctx10(t))
		t.Fatal("a store without its secrets.json started")
	}
	if !strings.Contains(err.Error(), "secrets.json") || !strings.Contains(err.Error(), "--new-secrets") {
		t.Fatalf("the refusal does not say what is missing and what to do: %v", err)
	}
	if _, err := os.Stat(secrets); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused start wrote secrets.json (%v)", err)
	}

	cfg.NewSecrets = true
	srv, err = server.New(cfg)
	if err != nil {
		t.Fatalf("with NewSecrets: %v", err)
	}
	srv.Shutdown(ctx10(t))
	again, err := os.ReadFile(secrets)
	if err != nil || string(again) == string(first) {
		t.Fatalf("NewSecrets did not generate new secrets (%v)", err)
	}

	// Every secret given by the config: nothing to generate, nothing lost.
	os.Remove(secrets)
	cfg.NewSecrets = false
	cfg.TokenKey, cfg.AppSecret, cfg.AdminAPIKeys = strings.Repeat("k", 32), testAppSecret, []string{testAPIKey}
	srv, err = server.New(cfg)
	if err != nil {
		t.Fatalf("secrets all in the config, no secrets.json: %v", err)
	}
	srv.Shutdown(ctx10(t))
}

// TestLostWALRefusesToStart: a store whose write-ahead log lost
// acknowledged messages does not start; accepted explicitly, it serves what
// survives, and a client holding seqs the store lost gets no second message
// under any of them: the next seq goes past its cursor, logged and counted.
func TestLostWALRefusesToStart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, func(c *server.Config) { c.DataDir = dir })
	alice, _ := ts.connect(t, "alice", "a1", "phone", transports[0])
	var last uint64
	var conv string
	for i := 0; i < 30; i++ {
		ack, err := alice.SendText(ctx10(t), "bob", "before")
		if err != nil {
			t.Fatal(err)
		}
		last, conv = ack.Seq, ack.ConversationId
	}
	alice.Close()
	ts.Shutdown(ctx10(t))

	logs, _ := filepath.Glob(filepath.Join(dir, "store", "*.log"))
	if len(logs) == 0 {
		t.Fatal("no WAL in the store")
	}
	for _, l := range logs {
		if err := os.Truncate(l, 0); err != nil {
			t.Fatal(err)
		}
	}
	cfg := ts.cfg
	cfg.HTTPAddr, cfg.TCPAddr = "127.0.0.1:0", "127.0.0.1:0"
	srv, err := server.New(cfg)
	if err == nil {
		srv.Shutdown(ctx10(t))
		t.Fatal("a store whose WAL lost acknowledged messages started")
	}
	if !errors.Is(err, pebblestore.ErrDataLoss) || !strings.Contains(err.Error(), "synced") {
		t.Fatalf("refusal: %v", err)
	}

	ts2 := startServer(t, func(c *server.Config) { c.DataDir = dir; c.AcceptDataLoss = true })
	bob, _ := ts2.connect(t, "bob", "b1", "phone", transports[0])
	page, err := bob.SyncMessages(ctx10(t), conv, last, 0) // bob's cursor: he had all 30
	if err != nil {
		t.Fatal(err)
	}
	if page.LastSeq >= last || len(page.Messages) != 0 {
		t.Fatalf("the loss is not visible: last seq %d, %d messages after %d", page.LastSeq, len(page.Messages), last)
	}
	alice, _ = ts2.connect(t, "alice", "a1", "phone", transports[0])
	ack, err := alice.SendText(ctx10(t), "bob", "after")
	if err != nil {
		t.Fatal(err)
	}
	if ack.Seq <= last {
		t.Fatalf("a new message got seq %d, which bob already holds (his cursor %d)", ack.Seq, last)
	}
	_, text := scrape(t, ts2, testAPIKey)
	if n := metricValue(t, text, "parley_cursor_beyond_last_total"); n != 1 {
		t.Fatalf("parley_cursor_beyond_last_total = %v, want 1", n)
	}
}

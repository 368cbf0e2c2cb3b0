package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store/pebblestore"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// storeWith makes a data directory whose store holds n messages of "c".
func storeWith(t *testing.T, n int) (string, *pebblestore.Store) {
	t.Helper()
	data := t.TempDir()
	st, err := pebblestore.Open(filepath.Join(data, "store"), pebblestore.Options{Logger: slog.New(slog.DiscardHandler), MinFreeDisk: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := st.Append(context.Background(), []*pb.Message{{ConversationId: "c", From: "ann", To: "bob", ClientMsgId: fmt.Sprint(i),
			ContentType: "text", Payload: []byte(fmt.Sprint("hello ", i))}}); err != nil {
			t.Fatal(err)
		}
	}
	return data, st
}

func lastSeq(t *testing.T, data string) uint64 {
	t.Helper()
	st, err := pebblestore.Open(filepath.Join(data, "store"), pebblestore.Options{Logger: slog.New(slog.DiscardHandler), MinFreeDisk: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := st.LastSeq(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// noPartials fails t if dir holds anything but the names given.
func onlyFiles(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("%s holds %v, want %v", dir, got, names)
	}
}

// TestBackupOffline: with the store in use the offline backup is refused
// and names --server; stopped, it is archived and restores; restore
// refuses a non-empty directory and a damaged archive.
func TestBackupOffline(t *testing.T) {
	data, st := storeWith(t, 30)
	if err := os.WriteFile(filepath.Join(data, "secrets.json"), []byte(`{"token_key":"k"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	outDir := t.TempDir()
	out := filepath.Join(outDir, "b.tar")
	if err := backupCmd([]string{"--data", data, "--out", out}); err == nil || !strings.Contains(err.Error(), "--server") {
		t.Fatalf("offline backup of a directory in use: %v, want a refusal naming --server", err)
	}
	onlyFiles(t, outDir)
	st.Close()
	if err := backupCmd([]string{"--data", data, "--out", out, "--with-secrets"}); err != nil {
		t.Fatal(err)
	}
	onlyFiles(t, outDir, "b.tar")

	restored := filepath.Join(t.TempDir(), "data")
	var msg bytes.Buffer
	if err := restore(out, restored, &msg); err != nil {
		t.Fatal(err)
	}
	if n := lastSeq(t, restored); n != 30 {
		t.Fatalf("restored store: last seq %d, want 30", n)
	}
	if b, err := os.ReadFile(filepath.Join(restored, "secrets.json")); err != nil || string(b) != `{"token_key":"k"}` {
		t.Fatalf("restored secrets.json: %q, %v", b, err)
	}
	if err := restore(out, restored, &msg); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("restore into a non-empty directory: %v", err)
	}

	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(outDir, "bad.tar")
	i := bytes.Index(b, []byte(`"token_key"`))
	if i < 0 {
		t.Fatal("no secrets.json in the archive")
	}
	b[i+1] ^= 0xff // inside secrets.json's content
	if err := os.WriteFile(bad, b, 0o600); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	if err := restore(bad, filepath.Join(parent, "data"), &msg); err == nil {
		t.Fatal("a damaged archive was restored")
	}
	onlyFiles(t, parent)
}

// TestBackupOnline: the command takes a backup through a running server,
// with the key from a file or $PARLEY_API_KEY; a wrong key and a stream cut
// short leave no archive.
func TestBackupOnline(t *testing.T) {
	data, st := storeWith(t, 12)
	st.Close()
	const key = "cli-backup-test-key-0123456789"
	srv, err := server.New(server.Config{DataDir: data, HTTPAddr: "127.0.0.1:0", TCPAddr: "off", AdminAPIKeys: []string{key},
		NewSecrets: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	}()
	url := "http://" + srv.HTTPAddr()
	outDir := t.TempDir()
	out := filepath.Join(outDir, "b.tar")

	t.Setenv("PARLEY_API_KEY", "wrong-key")
	if err := backupCmd([]string{"--server", url, "--out", out}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("backup with a wrong key: %v", err)
	}
	onlyFiles(t, outDir)
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := backupCmd([]string{"--server", url, "--api-key-file", keyFile, "--out", out}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PARLEY_API_KEY", key)
	if err := backupCmd([]string{"--server", url, "--out", out}); err != nil { // replaces the first
		t.Fatal(err)
	}
	onlyFiles(t, outDir, "b.tar")
	restored := filepath.Join(t.TempDir(), "data")
	var msg bytes.Buffer
	if err := restore(out, restored, &msg); err != nil {
		t.Fatal(err)
	}
	if n := lastSeq(t, restored); n != 12 {
		t.Fatalf("restored store: last seq %d, want 12", n)
	}
	if !strings.Contains(msg.String(), "no secrets.json") {
		t.Fatalf("restore without secrets said %q", msg.String())
	}

	// A server that sends the start of a valid archive and hangs up.
	whole, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cut := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-tar")
		w.Write(whole[:len(whole)-2000])
		panic(http.ErrAbortHandler)
	}), ErrorLog: nil}
	go cut.Serve(ln)
	defer cut.Close()
	cutOut := filepath.Join(outDir, "cut.tar")
	if err := backupCmd([]string{"--server", "http://" + ln.Addr().String(), "--out", cutOut}); err == nil || !strings.Contains(err.Error(), "not whole") {
		t.Fatalf("backup from a stream cut short: %v", err)
	}
	onlyFiles(t, outDir, "b.tar")
}

package server_test

import (
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyim/parley/server"
)

// A second server on a data directory in use is refused with an error
// that says so, not with the lock's errno text alone.
func TestDataDirInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	startServer(t, func(c *server.Config) { c.DataDir = dir })
	_, err := server.New(server.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0",
		AdminAPIKeys: []string{testAPIKey}, AppSecret: testAppSecret, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "is in use by another process") {
		t.Fatalf("a second server on %s: %v", dir, err)
	}
}

// A first start on a port that is taken fails without creating the data
// directory (and so without new secrets in it).
func TestBusyPortCreatesNoDataDir(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := filepath.Join(t.TempDir(), "fresh")
	_, err = server.New(server.Config{DataDir: dir, HTTPAddr: busy.Addr().String(), TCPAddr: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "listen http") {
		t.Fatalf("New on a busy port: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the data directory was created: %v", err)
	}
}

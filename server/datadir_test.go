package server_test

import (
	"io"
	"log/slog"
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

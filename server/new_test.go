package server_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parleyim/parley/server"
)

// A New that fails after opening storage releases it, so a corrected
// config starts on the same data directory in the same process.
func TestNewFailureReleasesStore(t *testing.T) {
	dir := t.TempDir()
	cfg := server.Config{DataDir: dir, HTTPAddr: "127.0.0.1:0", TCPAddr: "off"}
	bad := cfg
	missing := filepath.Join(dir, "missing.pem")
	bad.TLSCertFile, bad.TLSKeyFile = missing, missing // read after the store opens
	if srv, err := server.New(bad); err == nil {
		srv.Shutdown(context.Background())
		t.Fatal("a missing TLS certificate was accepted")
	} else if !strings.Contains(err.Error(), "tls") {
		t.Fatalf("failed with %v, want the TLS error", err)
	}
	srv, err := server.New(cfg)
	if err != nil {
		t.Fatalf("after a failed New, the data directory does not open again: %v", err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

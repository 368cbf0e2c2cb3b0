package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/parleyim/parley/server"
)

// Embedded is a server started inside this process on loopback ports with
// its data in a temporary directory (--embedded): a quick look without a
// deployment. Its figures share the machine, and without --procs the
// process, with the load generator.
type Embedded struct {
	Server *server.Server
	Dir    string
	APIKey string
}

// StartEmbedded starts the server; mod, when not nil, adjusts its config
// (DataDir, addresses and AdminAPIKeys are already set). Close removes it.
func StartEmbedded(mod func(*server.Config)) (*Embedded, error) {
	dir, err := os.MkdirTemp("", "parley-bench-")
	if err != nil {
		return nil, err
	}
	var b [16]byte
	rand.Read(b[:])
	key := hex.EncodeToString(b[:])
	cfg := server.Config{
		DataDir: dir, HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0",
		AdminAPIKeys: []string{key},
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if mod != nil {
		mod(&cfg)
	}
	srv, err := server.New(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := srv.Start(); err != nil {
		srv.Shutdown(context.Background())
		os.RemoveAll(dir)
		return nil, err
	}
	return &Embedded{Server: srv, Dir: dir, APIKey: key}, nil
}

// Apply points cfg at the embedded server.
func (s *Embedded) Apply(cfg *Config) {
	cfg.HTTPBase = "http://" + s.Server.HTTPAddr()
	cfg.WSAddr = "ws://" + s.Server.HTTPAddr() + "/ws"
	cfg.TCPAddr = "tcp://" + s.Server.TCPAddr()
	cfg.APIKey = s.APIKey
}

// Close shuts the server down and deletes its data.
func (s *Embedded) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.Server.Shutdown(ctx)
	os.RemoveAll(s.Dir)
	return err
}

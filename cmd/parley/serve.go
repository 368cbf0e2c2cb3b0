package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/buildinfo"
	"github.com/parleyim/parley/server"
)

func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	configPath := fs.String("config", "", "YAML config file (keys: see docs/operations.md)")
	dataDir := fs.String("data", "", "data directory (default ./data)")
	httpAddr := fs.String("http", "", "HTTP and WebSocket listen address (default 127.0.0.1:8080)")
	tcpAddr := fs.String("tcp", "", `TCP listen address (default 127.0.0.1:7070; "off" disables)`)
	public := fs.Bool("public", false, "listen on all interfaces instead of loopback (same ports)")
	logLevel := fs.String("log-level", "", "debug, info, warn or error (default: the config's log_level, else info)")
	logFormat := fs.String("log-format", "", "text or json (default: the config's log_format, else text)")
	newSecrets := fs.Bool("new-secrets", false, "start a data directory whose secrets.json is lost with new secrets (every token and admin key issued before stops working)")
	acceptLoss := fs.Bool("accept-data-loss", false, "open a store whose write-ahead logs lost synced writes with what survives (logged)")
	pprofAddr := fs.String("pprof", "", "serve Go's /debug/pprof on this address (e.g. 127.0.0.1:6060; keep it private)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	// readConfig reads the file and lays the flags over it, at start and
	// at each reload (SIGHUP, POST /v1/admin/reload): a flag keeps its
	// value over a reload, so it is never taken for a change.
	readConfig := func() (server.Config, error) {
		var cfg server.Config
		if *configPath != "" {
			var err error
			if cfg, err = loadConfig(*configPath); err != nil {
				return cfg, err
			}
		}
		set := func(dst *string, v string) {
			if v != "" {
				*dst = v
			}
		}
		set(&cfg.DataDir, *dataDir)
		set(&cfg.HTTPAddr, *httpAddr)
		set(&cfg.TCPAddr, *tcpAddr)
		set(&cfg.LogLevel, *logLevel)
		set(&cfg.LogFormat, *logFormat)
		if *public {
			cfg.HTTPAddr = anyHost(cfg.HTTPAddr, "8080")
			if cfg.TCPAddr != "off" {
				cfg.TCPAddr = anyHost(cfg.TCPAddr, "7070")
			}
		}
		return cfg, nil
	}
	cfg, err := readConfig()
	if err != nil {
		return err
	}
	cfg.NewSecrets, cfg.AcceptDataLoss = *newSecrets, *acceptLoss
	cfg.Version = buildinfo.Read(version).Version
	if *configPath != "" {
		cfg.ConfigSource = readConfig
	}
	// Before the server starts: a SIGTERM the moment it is ready (a pod
	// stopped right after its readiness probe passed) must drain it, not
	// kill it with the signal's default action.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sig)
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	log := srv.Logger()
	if *pprofAddr != "" {
		if err := servePprof(*pprofAddr, log); err != nil {
			srv.Shutdown(context.Background())
			return err
		}
	}
	if err := srv.Start(); err != nil {
		srv.Shutdown(context.Background())
		return err
	}
	data := cfg.DataDir
	if data == "" {
		data = "./data"
	}
	fmt.Printf("parley %s serving\n", cfg.Version)
	httpS, wsS, tcpS := "http", "ws", "tcp"
	if cfg.TLSCertFile != "" {
		httpS, wsS, tcpS = "https", "wss", "tls"
	}
	fmt.Printf("  HTTP API      %s://%s   (web client at /, admin page at /admin)\n", httpS, srv.HTTPAddr())
	fmt.Printf("  WebSocket     %s://%s/ws\n", wsS, srv.HTTPAddr())
	if a := srv.TCPAddr(); a != "" {
		fmt.Printf("  TCP           %s://%s\n", tcpS, a)
	}
	fmt.Printf("  data          %s\n", data)
	if len(cfg.AdminAPIKeys) > 0 {
		fmt.Println("  admin API key  as configured (admin_api_keys)")
	} else {
		fmt.Printf("  admin API key in %s (mode 0600)\n", filepath.Join(data, auth.SecretsFile))
	}

	for s := <-sig; s == syscall.SIGHUP; s = <-sig {
		// The server logs what a reload applied; a refusal or a bad file
		// is logged here, and the server goes on as it was.
		if _, err := srv.ReloadConfig(); err != nil {
			log.Error("configuration not reloaded", "err", err)
		}
	}
	log.Info("shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Shutdown(ctx)
}

// anyHost keeps addr's port (or def) and listens on every interface.
func anyHost(addr, def string) string {
	if addr == "" {
		return ":" + def
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return ":" + port
}

// servePprof exposes the Go profiler on its own listener, never on the public API.
func servePprof(addr string, log *slog.Logger) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() {
		if err := http.Serve(ln, mux); err != nil {
			log.Warn("pprof listener stopped", "err", err)
		}
	}()
	return nil
}

// loadConfig reads a YAML config file; unknown keys are an error, so a typo
// does not silently fall back to a default.
func loadConfig(path string) (server.Config, error) {
	var cfg server.Config
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && err != io.EOF {
		return cfg, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

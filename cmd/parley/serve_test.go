package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

func TestLoadConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cfg, err := loadConfig(write("ok.yaml", "data_dir: /var/lib/parley\nheartbeat: 15s\nkick_policy: device\nmax_group_members: 500\nadmin_api_keys: [\"0123456789abcdef\"]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != "/var/lib/parley" || cfg.Heartbeat != 15*time.Second || cfg.KickPolicy != "device" ||
		cfg.MaxGroupMembers != 500 || len(cfg.AdminAPIKeys) != 1 {
		t.Fatalf("loaded %+v", cfg)
	}
	if _, err := loadConfig(write("typo.yaml", "hearbeat: 15s\n")); err == nil || !strings.Contains(err.Error(), "hearbeat") {
		t.Fatalf("a misspelled key must be an error naming it, got %v", err)
	}
	if _, err := loadConfig(write("bad.yaml", "heartbeat: soon\n")); err == nil {
		t.Fatal("an unparseable duration was accepted")
	}
	if cfg, err := loadConfig(write("empty.yaml", "")); err != nil || cfg.DataDir != "" {
		t.Fatalf("an empty file: %+v %v", cfg, err)
	}
}

// buildParley builds this command as a release would (static, trimmed) into
// a temporary directory: the tests that need the real process use it.
func buildParley(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "parley")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// SIGTERM, as a container runtime or systemd sends it: the process stops
// listening, tells every client SERVER_SHUTDOWN spread over drain_window,
// logs that the stop is complete with the store closed, and exits 0 well
// within the grace the deployment files give it (terminationGracePeriodSeconds,
// TimeoutStopSec).
func TestServeDrainsOnSIGTERM(t *testing.T) {
	const window = 2 * time.Second
	const apiKey = "sigterm-test-admin-key-0123456789"
	bin := buildParley(t)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "parley.yaml")
	if err := os.WriteFile(cfg, []byte("drain_window: 2s\nadmin_api_keys: [\""+apiKey+"\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", cfg, "--data", filepath.Join(dir, "data"),
		"--http", "127.0.0.1:0", "--tcp", "off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	// The HTTP address, from the banner (the port is the kernel's choice).
	httpAddr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if f := strings.Fields(sc.Text()); len(f) >= 3 && f[0] == "HTTP" && f[1] == "API" {
				httpAddr <- strings.TrimPrefix(f[2], "http://")
			}
		}
		exited <- cmd.Wait()
	}()
	var addr string
	select {
	case addr = <-httpAddr:
	case err := <-exited:
		exited <- err
		t.Fatalf("parley serve exited before serving: %v\n%s", err, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatalf("parley serve printed no HTTP address\n%s", stderr.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := client.NewAdmin("http://"+addr, apiKey)
	const n = 10
	var mu sync.Mutex
	var closes []time.Time
	for i := range n {
		cr, err := adm.MintToken(ctx, fmt.Sprint("u", i), 0)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.Dial(ctx, client.Options{Addr: "ws://" + addr, Token: cr.Token, DeviceID: "d", DeviceType: "phone",
			OnClose: func(err error) {
				var d *client.DisconnectError
				if errors.As(err, &d) && d.Code == pb.DisconnectCode_DISCONNECT_CODE_SERVER_SHUTDOWN {
					mu.Lock()
					closes = append(closes, time.Now())
					mu.Unlock()
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// The deployment files give 30 s and more; the process's own shutdown
	// deadline is 30 s: past it, something did not drain.
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("after SIGTERM parley exited with %v, want 0\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("parley had not exited 30 s after SIGTERM\n%s", stderr.String())
	}
	if log := stderr.String(); !strings.Contains(log, "shutdown complete") || !strings.Contains(log, "store_closed=true") {
		t.Fatalf("no clean \"shutdown complete\" in the log:\n%s", log)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(closes) != n {
		t.Fatalf("%d of %d clients were told SERVER_SHUTDOWN", len(closes), n)
	}
	slices.SortFunc(closes, time.Time.Compare)
	if spread := closes[n-1].Sub(closes[0]); spread < window/2 {
		t.Fatalf("the closes spread over %v: not over the %v drain_window", spread, window)
	}
}

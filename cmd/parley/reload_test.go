package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// startParley runs the real binary (buildParley) with args; it returns
// the process, its standard output's lines and its log records (standard
// error, JSON).
func startParley(t *testing.T, args ...string) (*exec.Cmd, <-chan string, <-chan map[string]any) {
	t.Helper()
	cmd := exec.Command(buildParley(t), args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines, logs := make(chan string, 64), make(chan map[string]any, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var rec map[string]any
			if json.Unmarshal(sc.Bytes(), &rec) != nil {
				rec = map[string]any{"msg": "(not JSON) " + sc.Text()}
			}
			select {
			case logs <- rec:
			default: // nobody reads that far
			}
		}
		close(logs)
	}()
	return cmd, lines, logs
}

// expectLog waits for a record whose msg is msg.
func expectLog(t *testing.T, logs <-chan map[string]any, msg string) map[string]any {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case rec, ok := <-logs:
			if !ok {
				t.Fatalf("parley exited before logging %q", msg)
			}
			if rec["msg"] == msg {
				return rec
			}
		case <-timeout:
			t.Fatalf("parley logged no %q", msg)
		}
	}
}

// SIGHUP to `parley serve` reads the configuration file again: a rate limit
// changed in the file applies to a connection opened before, which stays
// open; a change that needs a restart is refused with a log naming the
// key, and the server goes on; SIGTERM then stops it cleanly.
func TestServeReloadsOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "parley.yaml")
	const key = "reload-test-admin-key-0123456789"
	write := func(extra string) {
		t.Helper()
		body := "data_dir: " + filepath.Join(dir, "data") + "\nhttp_addr: 127.0.0.1:0\ntcp_addr: \"off\"\n" +
			"admin_api_keys: [\"" + key + "\"]\nunknown_recipients: accept\nlog_format: json\n" + extra
		if err := os.WriteFile(cfgPath, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("user_send_rate: 1\n") // burst 2
	cmd, lines, logs := startParley(t, "serve", "--config", cfgPath)
	var base string
	for base == "" {
		line, ok := <-lines
		if !ok {
			t.Fatal("parley serve exited before it served")
		}
		if f := strings.Fields(line); len(f) >= 3 && f[0] == "HTTP" && f[1] == "API" {
			base = f[2]
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cred, err := client.MintToken(ctx, base, key, "alice", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	alice, err := client.Dial(ctx, client.Options{Addr: "ws" + strings.TrimPrefix(base, "http") + "/ws", Token: cred.Token, DeviceID: "a1", DeviceType: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	sends := func(n int) (ok, limited int) {
		for range n {
			_, err := alice.SendText(ctx, "bob", "hi")
			switch {
			case err == nil:
				ok++
			case client.IsCode(err, pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS):
				limited++
			default:
				t.Fatalf("send: %v", err)
			}
		}
		return ok, limited
	}
	if _, limited := sends(10); limited == 0 {
		t.Fatal("10 sends at once passed a limit of 1/s (burst 2)")
	}

	write("user_send_rate: -1\n")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	rec := expectLog(t, logs, "configuration reloaded")
	if !strings.Contains(rec["changed"].(string), "user_send_rate") {
		t.Fatalf("reload record %v does not name user_send_rate", rec)
	}
	if ok, _ := sends(30); ok != 30 {
		t.Fatalf("after the limit was lifted, %d of 30 sends stored", ok)
	}

	write("user_send_rate: -1\nmax_frame_bytes: 131072\n")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	rec = expectLog(t, logs, "configuration not reloaded")
	if err, _ := rec["err"].(string); !strings.Contains(err, "max_frame_bytes") {
		t.Fatalf("refusal %v does not name max_frame_bytes", rec)
	}
	if ok, _ := sends(5); ok != 5 {
		t.Fatal("the connection stopped working after a refused reload")
	}
	select {
	case <-alice.Done():
		t.Fatalf("the connection was closed: %v", alice.Err())
	default:
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	expectLog(t, logs, "shutdown complete")
	for range logs {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("parley serve after SIGTERM: %v", err)
	}
}

// `parley version` says the version first, then the commit, the Go release
// and the protocol version a client sees in AuthOk.
func TestVersionCommand(t *testing.T) {
	out, err := exec.Command(buildParley(t), "version").Output()
	if err != nil {
		t.Fatalf("parley version: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if !strings.HasPrefix(lines[0], "parley ") {
		t.Fatalf("first line %q", lines[0])
	}
	for _, want := range []string{"commit", "go        " + runtime.Version(), "protocol  " + wire.ProtocolVersion} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("parley version says %q, without %q", out, want)
		}
	}
}

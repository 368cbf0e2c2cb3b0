//go:build linux

package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
	"github.com/parleyim/parley/wire"
)

// fdChildEnv, when set to "LIMIT,RESERVE", makes the test binary a server
// process whose descriptor limit (RLIMIT_NOFILE) is LIMIT and whose
// fd_reserve is RESERVE (see runFDChild):
// the limit is process-wide, so the server under test runs alone in a child.
const fdChildEnv = "PARLEY_TEST_FD_CHILD"

const (
	fdChildLimit   = 256
	fdChildReserve = 96
)

func init() {
	if os.Getenv(fdChildEnv) != "" {
		os.Exit(runFDChild())
	}
}

// runFDChild lowers the process's descriptor limit, starts a server with
// the default max_open_files (read from that limit) and the test's
// fd_reserve, no unauthenticated caps (what is tested is the reserve
// alone), prints "READY httpAddr tcpAddr" and serves until stdin closes.
func runFDChild() int {
	var limit, reserve int
	if _, err := fmt.Sscanf(os.Getenv(fdChildEnv), "%d,%d", &limit, &reserve); err != nil {
		return 2
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 2
	}
	rl.Cur = uint64(limit)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		fmt.Fprintln(os.Stderr, "setrlimit:", err)
		return 2
	}
	dir, err := os.MkdirTemp("", "parley-fd-child")
	if err != nil {
		return 2
	}
	defer os.RemoveAll(dir)
	srv, err := server.New(server.Config{
		DataDir: dir, HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0",
		AdminAPIKeys: []string{testAPIKey}, AppSecret: testAppSecret, UnknownRecipients: "accept",
		FDReserve: reserve, MaxUnauthConns: -1, MaxUnauthConnsPerIP: -1, ConnRatePerIP: -1,
		AuthTimeout: time.Minute, NoSync: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "server.New:", err)
		return 1
	}
	if err := srv.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "Start:", err)
		return 1
	}
	fmt.Println("READY", srv.HTTPAddr(), srv.TCPAddr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	return 0
}

// startFDChild starts runFDChild in a child process.
func startFDChild(t *testing.T, limit, reserve int) (*testServer, *exec.Cmd) {
	t.Helper()
	p := startChildProc(t, 15*time.Second, fmt.Sprintf("%s=%d,%d", fdChildEnv, limit, reserve))
	f := strings.Fields(p.expect(t, "READY", time.Minute))
	if len(f) != 3 {
		t.Fatalf("child server: %q", f)
	}
	return &testServer{httpBase: "http://" + f[1], tcpAddr: f[2]}, p.cmd
}

// Without a reserve, a flood takes every descriptor: accept then fails with
// EMFILE. The accept loops back off instead of spinning or stopping, and
// once the flood goes the server serves new connections and requests again.
func TestAcceptOutOfDescriptorsRecovers(t *testing.T) {
	ts, _ := startFDChild(t, fdChildLimit, -1)
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	// More connections than the child may open: the kernel completes them
	// (the listen backlog) even when the child cannot accept them.
	for range fdChildLimit + 16 {
		nc, err := net.DialTimeout("tcp", ts.tcpAddr, 5*time.Second)
		if err != nil {
			break // the backlog is full
		}
		held = append(held, nc)
	}
	for _, c := range held {
		c.Close()
	}
	held = nil
	eventually(t, "a new connection served after the flood", func() bool {
		nc, err := net.DialTimeout("tcp", ts.tcpAddr, 5*time.Second)
		if err != nil {
			return false
		}
		defer nc.Close()
		rc := &rawConn{t: t, nc: nc, br: bufio.NewReader(nc), codec: wire.Proto}
		rc.send(&pb.ClientFrame{Id: 1, Body: &pb.ClientFrame_Ping{Ping: &pb.Ping{}}})
		return rc.read().GetPong() != nil
	})
	eventually(t, "HTTP served after the flood", func() bool {
		resp, err := http.Get(ts.httpBase + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// BRIEF case 18, the descriptor reserve: a server whose process may open
// fdChildLimit descriptors, with fdChildReserve kept in reserve, is flooded
// with connections. Once its open descriptors reach the limit less the
// reserve, new connections are refused at once (and counted) instead of
// taking the rest: the server then still answers HTTP and stores messages,
// and once the flood goes away new connections are served again. HTTP
// connections may use half of the reserve, never the rest.
func TestFDReserve(t *testing.T) {
	ts, cmd := startFDChild(t, fdChildLimit, fdChildReserve)
	childFDs := func() int {
		ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	metric := func(series string) int {
		_, text := scrape(t, ts, testAPIKey)
		return int(metricValue(t, text, series))
	}
	const (
		tcpOpen   = `parley_connections{transport="tcp"}`
		fdRefused = `parley_connections_refused_total{reason="fd_reserve"}`
	)

	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	refused, peak := 0, 0
	for i := 0; i < fdChildLimit && refused < 20; i++ {
		before := metric(tcpOpen) + metric(fdRefused)
		nc, err := net.DialTimeout("tcp", ts.tcpAddr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		held = append(held, nc)
		eventually(t, "the verdict on a connection", func() bool { return metric(tcpOpen)+metric(fdRefused) > before })
		refused = metric(fdRefused)
		peak = max(peak, childFDs())
	}
	if refused == 0 {
		t.Fatalf("%d connections held, none refused; the server holds %d descriptors of %d", len(held), childFDs(), fdChildLimit)
	}
	// The check counts descriptors sampled up to a second ago plus the
	// connections since: others opened meanwhile (the scrapes' HTTP
	// connections, a store file, a refused socket not yet closed) are seen
	// at the next sample, so the ceiling allows a few.
	if os.Getenv("FDDEBUG") != "" {
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", cmd.Process.Pid))
		kinds := map[string]int{}
		for _, e := range ents {
			l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", cmd.Process.Pid, e.Name()))
			if strings.HasPrefix(l, "socket:") {
				l = "socket"
			}
			kinds[l]++
		}
		t.Logf("fds now %d: %v; tcp open %d", len(ents), kinds, metric(tcpOpen))
	}
	if ceiling := fdChildLimit - fdChildReserve + 4; peak > ceiling {
		t.Fatalf("the server held %d descriptors, above %d (limit %d, reserve %d)", peak, ceiling, fdChildLimit, fdChildReserve)
	}
	open := metric(tcpOpen)
	t.Logf("%d connections kept, %d refused, at most %d descriptors open (limit %d, reserve %d)", open, refused, peak, fdChildLimit, fdChildReserve)

	// Silent connections to the HTTP port get the first half of the reserve
	// (so the HTTP connection in use keeps working), never the second.
	fdsBefore, refusedBefore := childFDs(), refused
	const silent = fdChildReserve
	for range silent {
		nc, err := net.DialTimeout("tcp", strings.TrimPrefix(ts.httpBase, "http://"), 5*time.Second)
		if err != nil {
			t.Fatalf("dial http: %v", err)
		}
		held = append(held, nc)
		peak = max(peak, childFDs())
	}
	// Accepted ones show as descriptors, refused ones in the metric. The sum
	// may fall a few short for good: a descriptor counted in fdsBefore (a
	// refused TCP socket not yet closed, a scrape's connection) can close
	// meanwhile, which under -race once kept the exact sum from ever
	// being reached.
	eventually(t, "every HTTP connection served or refused", func() bool {
		return childFDs()-fdsBefore+metric(fdRefused)-refusedBefore >= silent-4
	})
	peak = max(peak, childFDs())
	if metric(fdRefused) == refusedBefore {
		t.Fatalf("%d silent HTTP connections all accepted (%d descriptors)", silent, childFDs())
	}
	if ceiling := fdChildLimit - fdChildReserve/2 + 4; peak > ceiling {
		t.Fatalf("with HTTP connections the server held %d descriptors, above %d (limit %d, reserve %d)", peak, ceiling, fdChildLimit, fdChildReserve)
	}
	t.Logf("then %d of %d silent HTTP connections refused, at most %d descriptors open", metric(fdRefused)-refusedBefore, silent, peak)

	// With the last of the reserve untouched, HTTP and the store still work.
	if code, out := adminDo(t, http.MethodPost, ts.httpBase+"/v1/admin/messages", testAPIKey,
		[]byte(`{"from":"alice","to":"bob","client_msg_id":"during-flood","text":"hi"}`)); code != http.StatusCreated {
		t.Fatalf("send while the reserve holds: HTTP %d %v", code, out)
	}

	// The flood goes: connections are served again.
	for _, c := range held {
		c.Close()
	}
	held = nil
	eventually(t, "the flood's connections closed", func() bool { return metric(tcpOpen) == 0 })
	// The next sample of the descriptors (at most a second away) sees them gone.
	eventually(t, "a new connection served", func() bool {
		before := metric(fdRefused)
		nc, err := net.DialTimeout("tcp", ts.tcpAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		var kept bool
		eventually(t, "the verdict", func() bool {
			kept = metric(tcpOpen) == 1
			return kept || metric(fdRefused) > before
		})
		return kept
	})
}

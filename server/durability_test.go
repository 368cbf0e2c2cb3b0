package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// childEnv, when set, makes the test binary run a server on that data
// directory instead of the tests, so a test can kill -9 a real process.
const childEnv = "PARLEY_TEST_CHILD_DATA"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		runChild(dir)
		return
	}
	if cfg := os.Getenv(clusterChildEnv); cfg != "" {
		runClusterChild(cfg)
		return
	}
	os.Exit(m.Run())
}

func runChild(dir string) {
	srv, err := server.New(server.Config{
		DataDir: dir, HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0",
		AdminAPIKeys: []string{testAPIKey},
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	if err := srv.Start(); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Printf("ADDRS %s %s\n", srv.HTTPAddr(), srv.TCPAddr())
	select {} // until killed
}

type child struct {
	cmd      *exec.Cmd
	httpBase string
	tcp      string
}

func startChild(t *testing.T, dir string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "ADDRS ") {
		t.Fatalf("child server did not start: %q %v", line, err)
	}
	f := strings.Fields(line)
	return &child{cmd: cmd, httpBase: "http://" + f[1], tcp: "tcp://" + f[2]}
}

func (c *child) kill9(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.cmd.Wait()
}

// BRIEF case 1: kill -9 during a send burst, then restart. Every message ACKed
// to its sender is there, the sequence has no gaps, and a retry of an ACKed
// client message id is answered from storage, not stored again.
func TestKill9DuringSendBurstLosesNoAckedMessage(t *testing.T) {
	dir := t.TempDir()
	ch := startChild(t, dir)
	ctx := ctx10(t)
	tok, err := client.MintToken(ctx, ch.httpBase, testAPIKey, "alice", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	const senders = 8
	var mu sync.Mutex
	acked := map[string]*pb.SendAck{} // client msg id → ack
	var wg sync.WaitGroup
	for g := 0; g < senders; g++ {
		c, err := client.Dial(ctx, client.Options{Addr: ch.tcp, Token: tok.Token, DeviceID: fmt.Sprint("d", g), DeviceType: fmt.Sprint("t", g), MaxSendAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				id := fmt.Sprintf("g%d-%d", g, k)
				ack, err := c.Send(context.Background(), &pb.Send{ClientMsgId: id, To: "bob", Payload: []byte(id)})
				if err != nil {
					return // the server died
				}
				mu.Lock()
				acked[id] = ack
				mu.Unlock()
			}
		}()
	}
	eventually(t, "a burst of ACKs", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 2000 })
	ch.kill9(t)
	wg.Wait()

	ch2 := startChild(t, dir)
	alice, err := client.Dial(ctx, client.Options{Addr: ch2.tcp, Token: tok.Token, DeviceID: "check", DeviceType: "check"})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	stored := map[string]*pb.Message{}
	var after uint64
	for {
		page, err := alice.SyncMessages(ctx, "p:alice:bob", after, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Messages {
			if m.Seq != after+1 {
				t.Fatalf("gap: seq %d after %d", m.Seq, after)
			}
			after = m.Seq
			if string(m.Payload) != m.ClientMsgId {
				t.Fatalf("seq %d payload %q does not match its id %q", m.Seq, m.Payload, m.ClientMsgId)
			}
			if stored[m.ClientMsgId] != nil {
				t.Fatalf("client msg id %s stored twice", m.ClientMsgId)
			}
			stored[m.ClientMsgId] = m
		}
		if !page.HasMore {
			break
		}
	}
	for id, ack := range acked {
		m := stored[id]
		if m == nil {
			t.Fatalf("ACKed message %s (seq %d) lost", id, ack.Seq)
		}
		if m.Seq != ack.Seq || m.MessageId != ack.MessageId {
			t.Fatalf("%s: stored seq %d id %d, ACKed seq %d id %d", id, m.Seq, m.MessageId, ack.Seq, ack.MessageId)
		}
	}
	t.Logf("%d ACKed before kill -9, %d stored after restart", len(acked), len(stored))
	// Retrying an ACKed id returns the original.
	for id, ack := range acked {
		again, err := alice.Send(ctx, &pb.Send{ClientMsgId: id, To: "bob", Payload: []byte(id)})
		if err != nil {
			t.Fatal(err)
		}
		if !again.Duplicate || again.Seq != ack.Seq {
			t.Fatalf("retry of %s: %v, original %v", id, again, ack)
		}
		break
	}
	// And new sends continue the sequence.
	next, err := alice.SendText(ctx, "bob", "after restart")
	if err != nil || next.Seq != after+1 {
		t.Fatalf("next send %v %v, want seq %d", next, err, after+1)
	}
}

// A clean restart on the same data directory keeps history, cursors and accounts.
func TestRestartKeepsHistoryCursorsAndAccounts(t *testing.T) {
	dir := t.TempDir()
	ts := startServer(t, func(c *server.Config) { c.DataDir = dir })
	ctx := ctx10(t)
	creds, err := client.Register(ctx, ts.httpBase, "alice", "alice-password")
	if err != nil {
		t.Fatal(err)
	}
	alice, _ := ts.connectToken(t, creds.Token, "a1", "phone", transports[0])
	bob, _ := ts.connect(t, "bob", "b1", "phone", transports[2])
	for i := 0; i < 5; i++ {
		if _, err := alice.SendText(ctx, "bob", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := bob.MarkRead(ctx, "p:alice:bob", 3); err != nil {
		t.Fatal(err)
	}
	eventually(t, "alice sees bob's read cursor", func() bool {
		convs, err := alice.AllConversations(ctx)
		return err == nil && len(convs) == 1 && convs[0].PeerReadSeq == 3
	})
	shutdown(t, ts)

	ts2 := startServer(t, func(c *server.Config) { c.DataDir = dir })
	// The old token still works (same generated key), and so does the password.
	if _, err := client.Login(ctx, ts2.httpBase, "alice", "alice-password"); err != nil {
		t.Fatal(err)
	}
	bob2, _ := ts2.connect(t, "bob", "b1", "phone", transports[1])
	convs, err := bob2.AllConversations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 1 || convs[0].LastSeq != 5 || convs[0].ReadSeq != 3 || convs[0].UnreadCount != 2 {
		t.Fatalf("after restart: %v", convs)
	}
	alice2, _ := ts2.connectToken(t, creds.Token, "a1", "phone", transports[2])
	ack, err := alice2.SendText(ctx, "bob", "after restart")
	if err != nil || ack.Seq != 6 {
		t.Fatalf("send after restart: %v %v", ack, err)
	}
}

package server_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
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
	if cfg := os.Getenv(pushChildEnv); cfg != "" {
		runPushChild(cfg)
		return
	}
	os.Exit(m.Run())
}

func runChild(dir string) {
	serveChild(server.Config{
		DataDir: dir, HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0",
		AdminAPIKeys: []string{testAPIKey},
	})
}

// serveChild runs a server in this (child) process until it is killed,
// after telling its parent (spawnChild) the addresses.
func serveChild(cfg server.Config) {
	cfg.UnknownRecipients = "accept" // as startServer
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := server.New(cfg)
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
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
	return spawnChild(t, childEnv+"="+dir)
}

// spawnChild runs this test binary as a server process (env selects which,
// see TestMain), killed at the end of the test, and waits for its addresses.
func spawnChild(t *testing.T, env string) *child {
	t.Helper()
	p := startChildProc(t, 0, env)
	f := strings.Fields(p.expect(t, "ADDRS ", time.Minute))
	return &child{cmd: p.cmd, httpBase: "http://" + f[1], tcp: "tcp://" + f[2]}
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
	// A group delivered cursor, written lazily (once a second), moved just
	// before the shutdown: the shutdown writes it.
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 4; i++ {
		if _, err := alice.Send(ctx, &pb.Send{ConversationId: g.ConversationId, ContentType: "text", Payload: []byte("hi")}); err != nil {
			t.Fatal(err)
		}
	}
	if err := bob.MarkDelivered(ctx, g.ConversationId, 4); err != nil {
		t.Fatal(err)
	}
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
	var direct, group *pb.Conversation
	for _, c := range convs {
		if c.Type == pb.ConversationType_CONVERSATION_TYPE_GROUP {
			group = c
		} else {
			direct = c
		}
	}
	if len(convs) != 2 || direct == nil || direct.LastSeq != 5 || direct.ReadSeq != 3 || direct.UnreadCount != 2 {
		t.Fatalf("after restart: %v", convs)
	}
	if group == nil || group.DeliveredSeq != 4 {
		t.Fatalf("group delivered cursor after restart: %v", group)
	}
	alice2, _ := ts2.connectToken(t, creds.Token, "a1", "phone", transports[2])
	ack, err := alice2.SendText(ctx, "bob", "after restart")
	if err != nil || ack.Seq != 6 {
		t.Fatalf("send after restart: %v %v", ack, err)
	}
}

// BRIEF case 2 through a whole server: a bit flipped in a stored message on
// disk. The restarted server starts and is ready, never serves the corrupt
// message (a read that meets it is answered INTERNAL), and the damage stays
// with its conversation: sends into it are refused with INTERNAL, sends to
// others, even batched with them, are stored.
func TestCorruptStorageThroughServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, func(c *server.Config) { c.DataDir = dir })
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	// 38 MiB of sends: under the race detector on a loaded machine they
	// alone can take most of ten seconds.
	ctx, cancelAll := context.WithTimeout(context.Background(), time.Minute)
	defer cancelAll()
	marker := make([]byte, 64)
	rand.Read(marker) // incompressible: stored verbatim, so it can be found
	if _, err := alice.Send(ctx, &pb.Send{ClientMsgId: "marker", To: "bob", ContentType: "bin", Payload: marker}); err != nil {
		t.Fatal(err)
	}
	// Past the 32 MiB memtable, so the marker lands in a table file. Keys
	// hold length-prefixed conversation ids: the filler's (p:alice:dave)
	// sorts between the damaged p:alice:bob and the intact p:alice:zelda,
	// so those two share no data block.
	filler := make([]byte, 48<<10)
	for i := 0; i < 800; i++ {
		rand.Read(filler)
		if _, err := alice.Send(ctx, &pb.Send{To: "dave", ContentType: "bin", Payload: filler}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := alice.SendText(ctx, "zelda", "an intact conversation"); err != nil {
		t.Fatal(err)
	}
	shut, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := ts.Shutdown(shut); err != nil {
		t.Fatal(err)
	}
	flipped := 0
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sst") {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if i := bytes.Index(data, marker); i >= 0 {
			data[i+10] ^= 0x01
			flipped++
			return os.WriteFile(path, data, 0o600)
		}
		return nil
	})
	if flipped != 1 {
		t.Fatalf("the message was found in %d table files, want 1", flipped)
	}

	ts2 := startServer(t, func(c *server.Config) { c.DataDir = dir })
	bob := ts2.dialOnly(t, "bob", "b1", "phone")
	page, err := bob.SyncMessages(ctx, "p:alice:bob", 0, 10)
	if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_INTERNAL) {
		t.Fatalf("reading the corrupt message: %v, %v; want INTERNAL and nothing served", page, err)
	}
	// Another conversation's messages are served intact or, when a lookup
	// passes through the damaged block, refused: never wrong.
	zelda := ts2.dialOnly(t, "zelda", "z1", "phone")
	if page, err := zelda.History(ctx, "p:alice:zelda", 0, 10); err == nil {
		if len(page.Messages) != 1 || string(page.Messages[0].Payload) != "an intact conversation" {
			t.Fatalf("an intact conversation: %v", page)
		}
	} else if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_INTERNAL) {
		t.Fatalf("an intact conversation: %v", err)
	}
	// A send that must read the damaged record — a retry of the damaged
	// message, whose de-dup check reads it — is refused with INTERNAL (no
	// retry can help), at once; sends batched with it to other
	// conversations are stored. (Whether a new message into the damaged
	// conversation reads the damaged block depends on where the table's
	// block boundaries fell: see below.)
	alice2, err := client.Dial(ctx, client.Options{Addr: "tcp://" + ts2.tcpAddr, Token: ts2.mint(t, "alice"),
		DeviceID: "a2", DeviceType: "desktop", MaxSendAttempts: 1}) // a refusal reaches the test
	if err != nil {
		t.Fatal(err)
	}
	defer alice2.Close()
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		to := "bob"
		if i%2 == 1 {
			to = "zelda"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if to == "bob" {
				_, errs[i] = alice2.Send(ctx, &pb.Send{ClientMsgId: "marker", To: "bob", ContentType: "bin", Payload: marker})
				return
			}
			_, errs[i] = alice2.SendText(ctx, to, fmt.Sprint("after the damage ", i))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if i%2 == 1 && err != nil {
			t.Fatalf("a send to an intact conversation batched with the damaged one: %v", err)
		}
		if i%2 == 0 && !client.IsCode(err, pb.ErrorCode_ERROR_CODE_INTERNAL) {
			t.Fatalf("a retry of the damaged message: %v, want INTERNAL", err)
		}
	}
	// A new message into the damaged conversation is stored after it, or
	// refused with INTERNAL when its records share the damaged block:
	// never stored over it.
	if ack, err := alice2.SendText(ctx, "bob", "after the damage"); err == nil && ack.Seq < 2 {
		t.Fatalf("a new message into the damaged conversation took seq %d", ack.Seq)
	} else if err != nil && !client.IsCode(err, pb.ErrorCode_ERROR_CODE_INTERNAL) {
		t.Fatalf("a new message into the damaged conversation: %v", err)
	}
	if code, _ := adminDo(t, "GET", ts2.httpBase+"/readyz", "", nil); code != 200 {
		t.Fatalf("/readyz after a corrupt block: %d", code)
	}
}

// Command check exercises a running Parley cluster across its nodes with the
// Go SDK: 1:1 messages both ways, a group created through another node's
// admin API, the push API and a kick, each between users connected to
// different nodes. `docs/cluster/run-local.sh check` runs it against the
// local cluster; it exits non-zero when a step fails.
//
//	go run ./docs/cluster/check -key-file KEYFILE -http http://127.0.0.1:8081,http://127.0.0.1:8082,http://127.0.0.1:8083
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

func main() {
	httpList := flag.String("http", "http://127.0.0.1:8081,http://127.0.0.1:8082,http://127.0.0.1:8083", "the nodes' HTTP base URLs, comma-separated (at least 2)")
	tcpList := flag.String("tcp", "", "the nodes' TCP addresses (host:port), comma-separated; when given, bob connects over TCP")
	keyFile := flag.String("key-file", "", "file holding an admin API key (the same on every node)")
	wait := flag.Duration("wait", 5*time.Second, "how long to wait for each delivery")
	flag.Parse()
	if err := run(strings.Split(*httpList, ","), splitNonEmpty(*tcpList), *keyFile, *wait); err != nil {
		fmt.Fprintln(os.Stderr, "FAIL", err)
		os.Exit(1)
	}
	fmt.Println("PASS: every check crossed nodes")
}

func splitNonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// recorder keeps what one connection was pushed.
type recorder struct {
	mu     sync.Mutex
	msgs   []*pb.Message
	pushes []*pb.Push
	closed error
}

func (r *recorder) message(conv, text string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if m.ConversationId == conv && string(m.Payload) == text {
			return true
		}
	}
	return false
}

func (r *recorder) push(op int32, body string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.pushes {
		if p.Op == op && string(p.Body) == body {
			return true
		}
	}
	return false
}

func (r *recorder) closedWith(code pb.DisconnectCode) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d *client.DisconnectError
	return errors.As(r.closed, &d) && d.Code == code
}

type checker struct {
	nodes []string // HTTP bases
	tcp   []string
	key   string
	wait  time.Duration
	run   string // this run's user id prefix
}

// node names node i (0-based) for the report.
func (c *checker) node(i int) string { return fmt.Sprintf("node %d", i+1) }

func (c *checker) admin(i int) *client.Admin { return client.NewAdmin(c.nodes[i], c.key) }

// dial connects uid to node i (over TCP when asked and known, else WebSocket).
func (c *checker) dial(ctx context.Context, i int, uid, device string, tcp bool) (*client.Client, *recorder, string, error) {
	cred, err := c.admin((i+1)%len(c.nodes)).MintToken(ctx, uid, time.Hour) // minted by another node
	if err != nil {
		return nil, nil, "", fmt.Errorf("mint a token for %s: %w", uid, err)
	}
	addr, how := "ws"+strings.TrimPrefix(c.nodes[i], "http")+"/ws", "ws"
	if tcp && i < len(c.tcp) {
		addr, how = "tcp://"+c.tcp[i], "tcp"
	}
	r := &recorder{}
	cl, err := client.Dial(ctx, client.Options{
		Addr: addr, Token: cred.Token, DeviceID: device, DeviceType: "phone",
		OnMessage: func(m *pb.Message) { r.mu.Lock(); r.msgs = append(r.msgs, m); r.mu.Unlock() },
		OnPush:    func(p *pb.Push) { r.mu.Lock(); r.pushes = append(r.pushes, p); r.mu.Unlock() },
		OnClose:   func(err error) { r.mu.Lock(); r.closed = err; r.mu.Unlock() },
	})
	if err != nil {
		return nil, nil, "", fmt.Errorf("connect %s to %s (%s): %w", uid, c.node(i), addr, err)
	}
	return cl, r, fmt.Sprintf("%s on %s (%s)", uid, c.node(i), how), nil
}

// await polls cond until it holds or the wait is over; it reports how long
// after t0 (when the action began) it held.
func (c *checker) await(t0 time.Time, what string, cond func() bool) (time.Duration, error) {
	for !cond() {
		if time.Since(t0) > c.wait {
			return 0, fmt.Errorf("%s: nothing after %s", what, c.wait)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(t0), nil
}

func ok(format string, args ...any) { fmt.Printf("ok    "+format+"\n", args...) }

func run(nodes, tcp []string, keyFile string, wait time.Duration) error {
	if len(nodes) < 2 {
		return errors.New("-http needs at least two nodes")
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		return fmt.Errorf("-key-file: %w", err)
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	c := &checker{nodes: nodes, tcp: tcp, key: strings.TrimSpace(string(key)), wait: wait, run: "check-" + hex.EncodeToString(rnd[:])}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	last := len(nodes) - 1
	// far acts through a node other than bob's (node 2): the last, or node 1 in a 2-node cluster.
	far := last
	if far == 1 {
		far = 0
	}
	alice, bob, carol := c.run+"-alice", c.run+"-bob", c.run+"-carol"

	for _, u := range []string{alice, bob, carol} {
		if _, err := c.admin(0).CreateUser(ctx, u, ""); err != nil {
			return fmt.Errorf("create %s on node 1: %w", u, err)
		}
	}
	ok("users %s, %s, %s created through node 1's admin API", alice, bob, carol)

	ca, ra, wa, err := c.dial(ctx, 0, alice, "a1", false)
	if err != nil {
		return err
	}
	defer ca.Close()
	cb, rb, wb, err := c.dial(ctx, 1, bob, "b1", true)
	if err != nil {
		return err
	}
	defer cb.Close()
	cc, rc, wc, err := c.dial(ctx, last, carol, "c1", false)
	if err != nil {
		return err
	}
	defer cc.Close()
	ok("connected %s, %s, %s (each with a token minted by another node)", wa, wb, wc)

	// 1:1, both ways.
	t0 := time.Now()
	ack, err := ca.SendText(ctx, bob, "hello bob")
	if err != nil {
		return fmt.Errorf("%s sends to %s: %w", wa, bob, err)
	}
	d, err := c.await(t0, bob+" receives alice's message", func() bool { return rb.message(ack.ConversationId, "hello bob") })
	if err != nil {
		return err
	}
	ok("1:1   %s → %s: stored as %s #%d, delivered in %s", wa, wb, ack.ConversationId, ack.Seq, d.Round(time.Microsecond))
	t0 = time.Now()
	if _, err := cb.SendText(ctx, alice, "hi alice"); err != nil {
		return fmt.Errorf("%s sends to %s: %w", wb, alice, err)
	}
	if d, err = c.await(t0, alice+" receives bob's reply", func() bool { return ra.message(ack.ConversationId, "hi alice") }); err != nil {
		return err
	}
	ok("1:1   %s → %s: delivered in %s", wb, wa, d.Round(time.Microsecond))

	// A group made through another node's admin API; alice (node 1) sends.
	g, err := c.admin(far).CreateGroup(ctx, client.GroupSpec{Owner: alice, Name: "check", UserIDs: []string{bob, carol}})
	if err != nil {
		return fmt.Errorf("create a group on %s: %w", c.node(far), err)
	}
	conv := g.GetConversationId()
	t0 = time.Now()
	if _, err := ca.SendToConversation(ctx, conv, "text", []byte("hello group")); err != nil {
		return fmt.Errorf("%s sends to %s: %w", wa, conv, err)
	}
	d1, err := c.await(t0, bob+" receives the group message", func() bool { return rb.message(conv, "hello group") })
	if err != nil {
		return err
	}
	d2, err := c.await(t0, carol+" receives the group message", func() bool { return rc.message(conv, "hello group") })
	if err != nil {
		return err
	}
	ok("group %s (created through %s's admin API): %s → %s in %s, %s in %s",
		conv, c.node(far), wa, wb, d1.Round(time.Microsecond), wc, d2.Round(time.Microsecond))

	// A push through another node to bob, who is connected to node 2.
	t0 = time.Now()
	n, err := c.admin(far).Push(ctx, client.PushTarget{UserIDs: []string{bob}}, 42, []byte("ping from "+c.node(far)))
	if err != nil {
		return fmt.Errorf("push through %s: %w", c.node(far), err)
	}
	if d, err = c.await(t0, bob+" receives the push", func() bool { return rb.push(42, "ping from "+c.node(far)) }); err != nil {
		return err
	}
	ok("push  POST %s/v1/admin/push/users?user_ids=%s&op=42 → %s in %s (the API counted %d: sessions on %s only)",
		c.nodes[far], bob, wb, d.Round(time.Microsecond), n, c.node(far))

	// Bob signs in on another node with the same device type: his session on node 2 is kicked.
	t0 = time.Now()
	cb2, _, wb2, err := c.dial(ctx, far, bob, "b2", false)
	if err != nil {
		return err
	}
	defer cb2.Close()
	if d, err = c.await(t0, bob+"'s older phone session is kicked", func() bool {
		return rb.closedWith(pb.DisconnectCode_DISCONNECT_CODE_KICKED)
	}); err != nil {
		return err
	}
	ok("kick  %s signed in: %s closed with KICKED in %s", wb2, wb, d.Round(time.Microsecond))
	return nil
}

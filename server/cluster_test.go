package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// Cluster tests: several nodes on one PostgreSQL schema, routed by NATS
// (embedded in each node and clustered through routes, or an external
// nats-server started here). They skip without PARLEY_TEST_PG.

const testTokenKey = "test-token-key-0123456789abcdef0123456789"

// freePorts finds n free loopback ports for the embedded NATS servers' route
// listeners: each node's config must name the others' route addresses before
// any starts, and NATS opens its listeners itself (it cannot be handed one), so
// a port is picked, checked free, and left for NATS to take. It is picked below
// the kernel's ephemeral range (ip_local_port_range starts at 32768): a port
// from listening on :0 lands in that range, where any test's outgoing
// connection or :0 listener can take it in the moment before NATS does, and
// CI once lost a cluster test that way. Everything else listens on port 0.
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	ports := make([]int, 0, n)
	for len(ports) < n {
		p := int(routePortNext.Add(1))%(32768-routePortBase) + routePortBase
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue // taken, by another test binary perhaps
		}
		ln.Close()
		ports = append(ports, p)
	}
	return ports
}

// routePortBase is the lowest route port tests pick; routePortNext walks up
// from a random start so that test binaries running side by side (go test
// runs packages in parallel) rarely try the same ports.
const routePortBase = 20000

var routePortNext = func() *atomic.Int64 {
	var n atomic.Int64
	n.Store(rand.Int64N(32768 - routePortBase))
	return &n
}()

// natsRoutes gives n embedded NATS servers their route listen addresses and
// the route URLs naming all of them.
func natsRoutes(t *testing.T, n int) (listen, routes []string) {
	t.Helper()
	for _, p := range freePorts(t, n) {
		listen = append(listen, fmt.Sprintf("127.0.0.1:%d", p))
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	return listen, routes
}

// clusterConfig makes c node i of a cluster: shared secrets, its own node id.
func clusterConfig(c *server.Config, i int) {
	c.NodeID = uint16(i + 1)
	c.TokenKey = testTokenKey
	c.DrainWindow = time.Millisecond // tests close at once
	c.UnknownRecipients = "accept"   // as startServer
}

// startCluster starts n nodes with embedded NATS routed to each other and
// waits until every node reports ready.
func startCluster(t *testing.T, n int, mod func(i int, c *server.Config)) []*testServer {
	t.Helper()
	usePG := pgConfig(t)
	listen, routes := natsRoutes(t, n)
	nodes := make([]*testServer, n)
	for i := range n {
		nodes[i] = startServer(t, func(c *server.Config) {
			usePG(c)
			clusterConfig(c, i)
			c.NATSClusterListen = listen[i]
			c.NATSRoutes = routes
			if mod != nil {
				mod(i, c)
			}
		})
	}
	for _, ts := range nodes {
		waitReady(t, ts, true)
		eventually(t, "the embedded NATS servers route to each other", func() bool { return ts.Stats().ClusterRoutes == n-1 })
	}
	return nodes
}

// startNodesOnNATS starts n nodes on PostgreSQL routed by the external NATS
// server at url (startNATS); mod, when non-nil, adjusts each node's config.
func startNodesOnNATS(t *testing.T, n int, url string, mod func(*server.Config)) []*testServer {
	t.Helper()
	usePG := pgConfig(t)
	nodes := make([]*testServer, n)
	for i := range n {
		nodes[i] = startServer(t, func(c *server.Config) {
			usePG(c)
			if mod != nil {
				mod(c)
			}
			clusterConfig(c, i)
			c.NATSURLs = []string{url}
		})
	}
	return nodes
}

// readyCode is the node's /readyz status code.
func readyCode(ts *testServer) int {
	resp, err := http.Get(ts.httpBase + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// waitReady waits until /readyz answers 200 (ready) or, for !ready, until
// it answers anything else (503, or no answer from a node that stopped listening).
func waitReady(t *testing.T, ts *testServer, ready bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for (readyCode(ts) == http.StatusOK) != ready {
		if time.Now().After(deadline) {
			t.Fatalf("%s: /readyz never became ready=%v", ts.httpBase, ready)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// texts are the payloads of the recorded messages of conv, in arrival order.
func (r *recorder) texts(conv string) []string {
	var out []string
	for _, m := range r.messages() {
		if m.ConversationId == conv && m.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL {
			out = append(out, string(m.Payload))
		}
	}
	return out
}

// dialObserved connects uid to ts over WebSocket and records what it is pushed.
func dialObserved(t *testing.T, ts *testServer, uid, deviceID, deviceType string) (*client.Client, *recorder) {
	t.Helper()
	return dialObservedOpts(t, ts, uid, deviceID, deviceType, 0)
}

// dialObservedOpts is dialObserved with the SDK's send attempts bounded
// (0: its default), so a refusal reaches the test instead of a retry.
func dialObservedOpts(t *testing.T, ts *testServer, uid, deviceID, deviceType string, attempts int) (*client.Client, *recorder) {
	t.Helper()
	c, rec, err := dialRecorded(t, client.Options{
		Addr: ts.wsURL, Token: ts.mint(t, uid), DeviceID: deviceID, DeviceType: deviceType, MaxSendAttempts: attempts,
	})
	if err != nil {
		t.Fatalf("dial %s on %s: %v", uid, ts.httpBase, err)
	}
	return c, rec
}

func sendN(t *testing.T, c *client.Client, conv string, n int, prefix string) {
	t.Helper()
	ctx := ctx10(t)
	for i := range n {
		if _, err := c.SendToConversation(ctx, conv, "text/plain", fmt.Appendf(nil, "%s%d", prefix, i)); err != nil {
			t.Fatalf("send %d to %s: %v", i, conv, err)
		}
	}
}

func wantTexts(t *testing.T, who string, o *recorder, conv, prefix string, n int) {
	t.Helper()
	eventually(t, fmt.Sprintf("%s receives %d messages of %s", who, n, conv), func() bool {
		return len(o.texts(conv)) >= n
	})
	got := o.texts(conv)
	if len(got) != n {
		t.Fatalf("%s: %d messages of %s, want %d: %q", who, len(got), conv, n, got)
	}
	for i, s := range got {
		if want := fmt.Sprintf("%s%d", prefix, i); s != want {
			t.Fatalf("%s: message %d is %q, want %q (all: %q)", who, i, s, want, got)
		}
	}
}

// waitKnown waits until every node can reach each user's sessions: a
// session's interest reaches the other nodes' NATS servers a moment after
// its login (its own server has it before AuthOk), and a message published
// in that moment is only synced, not pushed.
func waitKnown(t *testing.T, nodes []*testServer, users ...string) {
	t.Helper()
	for _, ts := range nodes {
		for _, u := range users {
			eventually(t, u+"'s session known to "+ts.httpBase, func() bool {
				list, err := adminClient(ts).Sessions(context.Background(), u)
				return err == nil && len(list) > 0
			})
		}
	}
}

// 1:1 and group chat between users on different nodes; membership changes
// made on one node take effect on the others at once.
func TestClusterChatAcrossNodes(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	alice, oa := dialObserved(t, nodes[0], "alice", "a1", "phone")
	bob, ob := dialObserved(t, nodes[1], "bob", "b1", "phone")
	_, oc := dialObserved(t, nodes[2], "carol", "c1", "phone")
	_, od := dialObserved(t, nodes[0], "dave", "d1", "phone") // alice's node
	_, oe := dialObserved(t, nodes[1], "erin", "e1", "phone")
	waitKnown(t, nodes, "alice", "bob", "carol", "dave", "erin")

	sendN(t, alice, "p:alice:bob", 20, "ab")
	wantTexts(t, "bob", ob, "p:alice:bob", "ab", 20)
	sendN(t, bob, "p:alice:bob", 5, "ba")
	eventually(t, "alice receives bob's replies", func() bool { return len(oa.texts("p:alice:bob")) == 5 })

	ctx := ctx10(t)
	g, err := adminClient(nodes[2]).CreateGroup(ctx, groupSpec("alice", "bob", "carol", "dave"))
	if err != nil {
		t.Fatal(err)
	}
	conv := g.ConversationId
	sendN(t, alice, conv, 30, "g")
	wantTexts(t, "bob", ob, conv, "g", 30)
	wantTexts(t, "carol", oc, conv, "g", 30)
	wantTexts(t, "dave", od, conv, "g", 30)
	if n := len(oa.texts(conv)); n != 0 {
		t.Fatalf("the sender's own session got %d of its messages pushed back", n)
	}

	// Changes through node 3's admin API; erin (node 2) joins and gets
	// what follows, carol (node 3) is removed and gets nothing more.
	if err := adminClient(nodes[2]).AddMembers(ctx, conv, []string{"erin"}); err != nil {
		t.Fatal(err)
	}
	if err := adminClient(nodes[0]).RemoveMember(ctx, conv, "carol"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "carol sees her removal", func() bool {
		for _, m := range oc.snapshot().msgs {
			if m.ConversationId == conv && m.Kind == pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED {
				return true
			}
		}
		return false
	})
	sendN(t, bob, conv, 10, "h")
	wantTexts(t, "erin", oe, conv, "h", 10)
	eventually(t, "alice and dave get bob's group messages", func() bool {
		return len(oa.texts(conv)) == 10 && len(od.texts(conv)) == 40
	})
	if got := oc.texts(conv); len(got) != 30 {
		t.Fatalf("carol, removed, has %d group messages, want the 30 before her removal", len(got))
	}
	if _, err := oCarolSend(t, nodes[2], conv); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("a removed member's send on another node: %v, want PERMISSION_DENIED", err)
	}
}

// oCarolSend has carol try to send to conv from a new connection to ts.
func oCarolSend(t *testing.T, ts *testServer, conv string) (*pb.SendAck, error) {
	c, _ := dialObserved(t, ts, "carol", "c2", "desktop")
	return c.SendToConversation(ctx10(t), conv, "text/plain", []byte("let me in"))
}

// Kicks, logouts and admin kicks reach the node that holds the session.
func TestClusterKickAcrossNodes(t *testing.T) {
	nodes := startCluster(t, 3, nil)
	_, old := dialObserved(t, nodes[0], "alice", "a1", "phone")
	_, desk := dialObserved(t, nodes[2], "alice", "a3", "desktop")
	dialObserved(t, nodes[1], "alice", "a2", "phone") // same device type, another node
	eventually(t, "the older phone session on node 1 is kicked", func() bool {
		s := old.snapshot()
		return s.closed && isDisconnect(s.closeErr, pb.DisconnectCode_DISCONNECT_CODE_KICKED)
	})
	if desk.snapshot().closed {
		t.Fatal("a desktop session was kicked by a phone login")
	}

	// An admin kick through node 1 closes the desktop session on node 3.
	ctx := ctx10(t)
	c3, o3 := dialObserved(t, nodes[2], "bob", "b1", "phone")
	if _, err := adminClient(nodes[0]).Kick(ctx, "bob", c3.AuthOk().SessionId); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "bob's session on node 3, kicked by node 1's admin API", o3, pb.DisconnectCode_DISCONNECT_CODE_KICKED)

	// Revoking tokens on node 2 closes sessions everywhere.
	if _, err := adminClient(nodes[1]).RevokeTokens(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "revocation on node 2 closes alice's desktop on node 3", func() bool {
		s := desk.snapshot()
		return s.closed && isDisconnect(s.closeErr, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED)
	})
}

// Presence, typing, rooms and every kind of push cross nodes.
func TestClusterPresenceTypingRoomsPush(t *testing.T) {
	nodes := startCluster(t, 3, func(_ int, c *server.Config) { c.RoomClientSend = true })
	ctx := ctx10(t)
	adm := adminClient(nodes[0])
	if err := adm.Befriend(ctx, "alice", "bob"); err != nil {
		t.Fatal(err)
	}
	bob, ob := dialObserved(t, nodes[1], "bob", "b1", "phone")
	list, err := bob.SubscribePresence(ctx, "alice")
	if err != nil || len(list.Users) != 1 || list.Users[0].Online {
		t.Fatalf("presence before alice connects: %v %v", list, err)
	}
	alice, oa := dialObserved(t, nodes[0], "alice", "a1", "phone")
	eventually(t, "bob (node 2) sees alice come online on node 1", func() bool {
		p := ob.lastPresence()
		return p != nil && p.UserId == "alice" && p.Online
	})
	// A second subscriber on a third node learns the state from the others.
	carol, _ := dialObserved(t, nodes[2], "carol", "c1", "phone")
	if err := adm.Befriend(ctx, "alice", "carol"); err != nil {
		t.Fatal(err)
	}
	if list, err := carol.SubscribePresence(ctx, "alice"); err != nil || !list.Users[0].Online {
		t.Fatalf("carol on node 3 asks about alice, online on node 1: %v %v", list, err)
	}

	if err := alice.Typing(ctx, "p:alice:bob"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob sees alice typing", func() bool { return len(ob.snapshot().typing) == 1 })

	// Rooms: members on two nodes; a client broadcast and an admin push from a third.
	if _, err := bob.JoinRoom(ctx, "lobby"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.JoinRoom(ctx, "lobby"); err != nil {
		t.Fatal(err)
	}
	// The admin API answers for the whole cluster: node 3 counts the
	// room's members on nodes 1 and 2, and lists alice's session on node 1.
	eventually(t, "node 3 counts the room's members on nodes 1 and 2", func() bool {
		code, body := adminGet(t, nodes[2].httpBase+"/v1/admin/rooms/lobby")
		return code == 200 && strings.Contains(body, `"online":2`)
	})
	if list, err := adminClient(nodes[2]).Sessions(ctx, "alice"); err != nil || len(list) != 1 || list[0].SessionID != alice.AuthOk().SessionId {
		t.Fatalf("alice's sessions through node 3: %v %v", list, err)
	}
	if err := alice.RoomSend(ctx, "lobby", 7, []byte("hi room")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob gets alice's room broadcast", func() bool { return len(ob.snapshot().pushes) == 1 })
	if _, err := adminClient(nodes[2]).Push(ctx, client.PushTarget{Room: "lobby"}, 8, []byte("room push")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both room members get node 3's room push", func() bool {
		return len(ob.snapshot().pushes) == 2 && len(oa.snapshot().pushes) == 1
	})
	if _, err := adminClient(nodes[2]).Push(ctx, client.PushTarget{UserIDs: []string{"alice", "bob"}}, 9, []byte("to users")); err != nil {
		t.Fatal(err)
	}
	if _, err := adminClient(nodes[0]).Push(ctx, client.PushTarget{DeviceKeys: []string{bob.AuthOk().SessionId}}, 10, []byte("to bob's device")); err != nil {
		t.Fatal(err)
	}
	if _, err := adminClient(nodes[1]).Push(ctx, client.PushTarget{All: true}, 11, []byte("to all")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "user, device and broadcast pushes cross nodes", func() bool {
		return len(ob.snapshot().pushes) == 5 && len(oa.snapshot().pushes) == 3
	})

	// Alice leaves: both subscribers see her offline.
	alice.Close()
	eventually(t, "bob sees alice go offline", func() bool {
		p := ob.lastPresence()
		return p != nil && !p.Online
	})
}

// startNATS runs a nats-server (the "external" NATS of a cluster) on port
// (0: one the server picks as it listens) and returns it with its URL.
func startNATS(t *testing.T, port int) (*natsserver.Server, string) {
	t.Helper()
	if port == 0 {
		port = natsserver.RANDOM_PORT
	}
	ns, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server did not start")
	}
	t.Cleanup(ns.Shutdown)
	return ns, "nats://" + ns.Addr().String()
}

// outagePair connects alice to node 1 (sends tried once, so a refusal
// reaches the test) and bob to node 2, and has one message, prefix0, cross.
func outagePair(t *testing.T, nodes []*testServer, prefix string) (*client.Client, *recorder) {
	t.Helper()
	alice, _ := dialObservedOpts(t, nodes[0], "alice", "a1", "phone", 1)
	_, ob := dialObserved(t, nodes[1], "bob", "b1", "phone")
	sendN(t, alice, "p:alice:bob", 1, prefix)
	wantTexts(t, "bob", ob, "p:alice:bob", prefix, 1)
	return alice, ob
}

// wantRefusedWithin checks that a send during an outage of what is refused
// with UNAVAILABLE within limit.
func wantRefusedWithin(t *testing.T, c *client.Client, what string, limit time.Duration) {
	t.Helper()
	start := time.Now()
	_, err := c.SendToConversation(ctx10(t), "p:alice:bob", "text/plain", []byte("lost?"))
	if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_UNAVAILABLE) {
		t.Fatalf("send during the %s outage: %v, want UNAVAILABLE", what, err)
	}
	if took := time.Since(start); took > limit {
		t.Fatalf("the refusal took %v, over %v: it should be immediate", took, limit)
	}
}

// BRIEF case 4 (NATS): with NATS gone, sends fail fast with UNAVAILABLE
// (never an ACK that other nodes cannot hear of) and /readyz says not
// ready; when NATS is back the nodes recover by themselves.
func TestClusterNATSOutage(t *testing.T) {
	ns, url := startNATS(t, 0)
	port := ns.Addr().(*net.TCPAddr).Port
	nodes := startNodesOnNATS(t, 2, url, nil)
	alice, ob := outagePair(t, nodes, "before")

	ns.Shutdown()
	ns.WaitForShutdown()
	waitReady(t, nodes[0], false)
	wantRefusedWithin(t, alice, "NATS", 2*time.Second)
	// A read cursor is stored locally; its receipt to the other node is best
	// effort, so the client is not told of an error.
	if err := alice.MarkRead(ctx10(t), "p:alice:bob", 1); err != nil {
		t.Fatalf("marking read during the NATS outage: %v", err)
	}

	startNATS(t, port) // back on the same address
	waitReady(t, nodes[0], true)
	waitReady(t, nodes[1], true)
	eventually(t, "cross-node delivery resumes", func() bool {
		_, err := alice.SendToConversation(ctx10(t), "p:alice:bob", "text/plain", []byte("after0"))
		return err == nil && len(ob.texts("p:alice:bob")) >= 2
	})
}

// pgProxy forwards loopback connections to PostgreSQL until cut.
type pgProxy struct {
	target string
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
}

// startPGProxy listens on 127.0.0.1:port (0: any free port; see p.ln) and
// forwards to target.
func startPGProxy(t *testing.T, target string, port int) *pgProxy {
	t.Helper()
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{target: target, ln: ln}
	t.Cleanup(p.cut)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
	return p
}

// cut closes the listener and every forwarded connection: PostgreSQL is gone.
func (p *pgProxy) cut() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// BRIEF case 4 (PostgreSQL): with the database unreachable, sends fail fast
// with UNAVAILABLE and /readyz says not ready; they recover when it returns.
func TestClusterPostgresOutage(t *testing.T) {
	usePG := pgConfig(t)
	var probe server.Config
	usePG(&probe)
	proxy := startPGProxy(t, "127.0.0.1:5432", 0)
	port := proxy.ln.Addr().(*net.TCPAddr).Port
	proxied := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/test?sslmode=disable&connect_timeout=2", port)
	_, url := startNATS(t, 0)
	nodes := startNodesOnNATS(t, 2, url, func(c *server.Config) { c.PostgresURL = proxied })
	alice, ob := outagePair(t, nodes, "m")

	proxy.cut()
	waitReady(t, nodes[0], false)
	wantRefusedWithin(t, alice, "PostgreSQL", 3*time.Second)

	startPGProxy(t, "127.0.0.1:5432", port)
	waitReady(t, nodes[0], true)
	eventually(t, "sends succeed again and reach bob", func() bool {
		_, err := alice.SendToConversation(ctx10(t), "p:alice:bob", "text/plain", []byte("m1"))
		return err == nil && len(ob.texts("p:alice:bob")) >= 2
	})
	if got := ob.texts("p:alice:bob"); got[1] != "m1" {
		t.Fatalf("bob got %q: the refused message was stored after all", got)
	}
}

// waitClosed waits until the observed client is closed with code, and says
// how it was closed (or that it was not) if that does not come.
func waitClosed(t *testing.T, who string, o *recorder, code pb.DisconnectCode) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s := o.snapshot()
		if s.closed && isDisconnect(s.closeErr, code) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: closed %v (%v), want %v", who, s.closed, s.closeErr, code)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// clusterChildEnv, when set, makes the test binary run one cluster node
// from the JSON config in it, so a test can kill -9 a real node process.
const clusterChildEnv = "PARLEY_TEST_CLUSTER_NODE"

func runClusterChild(cfgJSON string) {
	var cfg server.Config
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	serveChild(cfg)
}

// clusterNode is a node running in a child process.
type clusterNode struct {
	cmd  *exec.Cmd
	http string // http://host:port
	ws   string
	tcp  string
}

// startClusterChildren starts n nodes as child processes (embedded NATS
// routed to each other, one PostgreSQL schema) and waits until all are ready.
func startClusterChildren(t *testing.T, n int) []*clusterNode {
	t.Helper()
	usePG := pgConfig(t)
	listen, routes := natsRoutes(t, n)
	nodes := make([]*clusterNode, n)
	for i := range n {
		cfg := server.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", TCPAddr: "127.0.0.1:0",
			AdminAPIKeys: []string{testAPIKey}, AppSecret: testAppSecret,
			NATSClusterListen: listen[i], NATSRoutes: routes}
		usePG(&cfg)
		clusterConfig(&cfg, i)
		b, err := json.Marshal(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ch := spawnChild(t, clusterChildEnv+"="+string(b))
		nodes[i] = &clusterNode{cmd: ch.cmd, http: ch.httpBase, ws: "ws" + strings.TrimPrefix(ch.httpBase, "http") + "/ws", tcp: ch.tcp}
	}
	for _, nd := range nodes {
		waitReady(t, &testServer{httpBase: nd.http}, true)
		eventually(t, "the node processes' NATS servers route to each other", func() bool {
			_, body := adminGet(t, nd.http+"/metrics")
			return strings.Contains(body, fmt.Sprintf("parley_cluster_routes %d\n", n-1))
		})
	}
	return nodes
}

// BRIEF case 3: a node is killed (kill -9) during a send burst. Its clients
// reconnect to the other nodes (the SDK's address list); no acknowledged
// message is lost, none is stored twice, and every receiver ends with a
// gap-free sequence in order.
func TestClusterNodeKilledMidBurst(t *testing.T) {
	nodes := startClusterChildren(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := client.NewAdmin(nodes[1].http, testAPIKey)
	const pairs, perSender, inFlight = 6, 150, 4
	group, err := adm.CreateGroup(ctx, groupSpec("s0", "r0", "r1", "r2"))
	if err != nil {
		t.Fatal(err)
	}

	// Clients start on different nodes; node 0, which dies, holds a third.
	addrsFrom := func(i int) []string {
		var a []string
		for k := range nodes {
			nd := nodes[(i+k)%len(nodes)]
			if (i+k)%2 == 0 {
				a = append(a, nd.ws)
			} else {
				a = append(a, nd.tcp)
			}
		}
		return a
	}
	type got struct {
		mu   sync.Mutex
		msgs map[string][]*pb.Message // conversation → delivered, in order
	}
	session := func(uid string, i int, g *got) *client.Session {
		tok, err := adm.MintToken(ctx, uid, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		opts := client.SessionOptions{Addrs: addrsFrom(i), MinBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond}
		opts.Token, opts.DeviceID, opts.DeviceType = tok.Token, uid+"-dev", "phone"
		if g != nil {
			g.msgs = map[string][]*pb.Message{}
			opts.OnMessage = func(m *pb.Message) {
				if m.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL {
					g.mu.Lock()
					g.msgs[m.ConversationId] = append(g.msgs[m.ConversationId], m)
					g.mu.Unlock()
				}
			}
		}
		s, err := client.NewSession(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.WaitReady(ctx); err != nil {
			t.Fatalf("%s: %v", uid, err)
		}
		return s
	}
	receivers := make([]*got, pairs)
	senders := make([]*client.Session, pairs)
	for i := range pairs {
		receivers[i] = &got{}
		session(fmt.Sprint("r", i), i+1, receivers[i])
		senders[i] = session(fmt.Sprint("s", i), i, nil)
	}

	// The burst: each sender sends perSender messages to its receiver (s0
	// to the group instead), inFlight at a time; node 0 dies a third in.
	var acked sync.Map // client msg id → *pb.SendAck
	var nAcked atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, pairs*inFlight)
	for i, s := range senders {
		for w := range inFlight {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := w; k < perSender; k += inFlight {
					m := &pb.Send{To: fmt.Sprint("r", i), ContentType: "text", Payload: fmt.Appendf(nil, "%d-%d", i, k)}
					if i == 0 {
						m = &pb.Send{ConversationId: group.ConversationId, ContentType: "text", Payload: m.Payload}
					}
					ack, err := s.Send(ctx, m)
					if err != nil {
						errs <- fmt.Errorf("s%d message %d: %w", i, k, err)
						return
					}
					acked.Store(m.ClientMsgId, ack)
					nAcked.Add(1)
				}
			}()
		}
	}
	total := int64(pairs * perSender)
	for nAcked.Load() < total/3 {
		time.Sleep(time.Millisecond)
	}
	if err := nodes[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killedAt := nAcked.Load()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("node 0 killed after %d of %d ACKs", killedAt, total)

	// Every receiver: each ACKed message once, in seq order, no gaps.
	check := func(who string, g *got, conv string, want int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			g.mu.Lock()
			n := len(g.msgs[conv])
			g.mu.Unlock()
			if n >= want || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		msgs := g.msgs[conv]
		seen := map[string]bool{}
		for i, m := range msgs {
			if i > 0 && m.Seq != msgs[i-1].Seq+1 {
				t.Fatalf("%s: seq %d after %d in %s", who, m.Seq, msgs[i-1].Seq, conv)
			}
			if seen[m.ClientMsgId] {
				t.Fatalf("%s: client message %s stored twice in %s", who, m.ClientMsgId, conv)
			}
			seen[m.ClientMsgId] = true
			if a, ok := acked.Load(m.ClientMsgId); ok && a.(*pb.SendAck).Seq != m.Seq {
				t.Fatalf("%s: %s delivered at seq %d, ACKed at %d", who, m.ClientMsgId, m.Seq, a.(*pb.SendAck).Seq)
			}
		}
		if len(msgs) != want {
			t.Fatalf("%s: %d messages in %s, want %d (every ACK)", who, len(msgs), conv, want)
		}
	}
	for i := 1; i < pairs; i++ {
		check(fmt.Sprint("r", i), receivers[i], fmt.Sprintf("p:r%d:s%d", i, i), perSender)
	}
	for i := range 3 {
		check(fmt.Sprint("r", i, " (group)"), receivers[i], group.ConversationId, perSender)
	}
}

// Graceful drain: a node shutting down says so on /readyz at once, closes
// its connections spread over drain_window with SERVER_SHUTDOWN, and its
// clients carry on on another node.
func TestClusterDrain(t *testing.T) {
	const window = time.Second
	nodes := startCluster(t, 2, func(i int, c *server.Config) {
		if i == 0 {
			c.DrainWindow = window
		}
	})
	ctx := ctx10(t)
	const n = 20
	var mu sync.Mutex
	var closes []time.Time
	sessions := make([]*client.Session, n)
	for i := range n {
		opts := client.SessionOptions{Addrs: []string{nodes[0].wsURL, nodes[1].wsURL}, MinBackoff: 10 * time.Millisecond}
		opts.Token, opts.DeviceID, opts.DeviceType = nodes[0].mint(t, fmt.Sprint("u", i)), "d", "phone"
		opts.OnDisconnect = func(err error) {
			if isDisconnect(err, pb.DisconnectCode_DISCONNECT_CODE_SERVER_SHUTDOWN) {
				mu.Lock()
				closes = append(closes, time.Now())
				mu.Unlock()
			}
		}
		s, err := client.NewSession(opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		if err := s.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
		sessions[i] = s
	}
	if got := nodes[0].Stats().Sessions; got != n {
		t.Fatalf("node 0 holds %d sessions, want %d", got, n)
	}
	done := make(chan error, 1)
	go func() {
		sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		done <- nodes[0].Shutdown(sctx)
	}()
	waitReady(t, nodes[0], false) // draining: the load balancer stops sending here
	if err := <-done; err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	mu.Lock()
	spread := closes[len(closes)-1].Sub(closes[0])
	count := len(closes)
	mu.Unlock()
	if count != n {
		t.Fatalf("%d clients were told SERVER_SHUTDOWN, want %d", count, n)
	}
	if spread < window/2 {
		t.Fatalf("closes spread over %v: not spread over the %v window", spread, window)
	}
	eventually(t, "every client carries on on node 1", func() bool { return nodes[1].Stats().Sessions == n })
	adm := adminClient(nodes[1])
	if _, err := adm.Send(ctx, client.Message{From: "u0", To: "u1", ClientMsgID: "drain-1", ContentType: "text", Payload: []byte("still here")}); err != nil {
		t.Fatal(err)
	}
}

// A node killed without a word: the users only it held go offline for
// their followers on the other nodes once it has been silent a few seconds.
func TestClusterPresenceAfterNodeCrash(t *testing.T) {
	nodes := startClusterChildren(t, 3)
	ts := make([]*testServer, len(nodes))
	for i, nd := range nodes {
		ts[i] = &testServer{httpBase: nd.http, wsURL: nd.ws}
	}
	ctx := ctx10(t)
	if err := client.NewAdmin(nodes[1].http, testAPIKey).Befriend(ctx, "alice", "bob"); err != nil {
		t.Fatal(err)
	}
	dialObserved(t, ts[0], "alice", "a1", "phone")
	bob, ob := dialObserved(t, ts[1], "bob", "b1", "phone")
	if list, err := bob.SubscribePresence(ctx, "alice"); err != nil || !list.Users[0].Online {
		t.Fatalf("bob on node 2 asks about alice on node 1: %v %v", list, err)
	}
	if err := nodes[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		p := ob.lastPresence()
		if p != nil && p.UserId == "alice" && !p.Online {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("bob still sees alice online 20 s after her node died: %v", p)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Two nodes given the same node_id (which would mix up their session and
// message ids) notice each other's heartbeats and report not ready.
func TestClusterDuplicateNodeID(t *testing.T) {
	usePG := pgConfig(t)
	_, url := startNATS(t, 0)
	var nodes []*testServer
	for range 2 {
		nodes = append(nodes, startServer(t, func(c *server.Config) {
			usePG(c)
			clusterConfig(c, 0) // both node 1
			c.NATSURLs = []string{url}
		}))
		waitReady(t, nodes[len(nodes)-1], true) // ready until the heartbeats meet
	}
	for _, ts := range nodes {
		waitReady(t, ts, false)
	}
}

package server_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/parleyim/parley/server"
)

// A node whose route listener the others reach only through a port mapping
// (here a forwarder on 127.0.0.1 in front of 127.0.0.2:P) joins a cluster
// whose nodes know only one another: node 2's routes name the forwarder,
// node 3 knows only node 2 and learns of node 1 by route gossip. With
// nats_cluster_advertise naming the forwarder, node 3 connects through it
// (without, it is told 127.0.0.1:P, where nothing listens), and messages
// cross between nodes 1 and 3.
func TestClusterNATSAdvertise(t *testing.T) {
	usePG := pgConfig(t)
	pA := freeOnBothLoopbacks(t)
	ports := freePorts(t, 2) // node 2's and 3's route listeners
	fwd := startPGProxy(t, fmt.Sprintf("127.0.0.2:%d", pA), 0)
	fwdURL := "nats://" + fwd.ln.Addr().String()
	node := func(i int, listen, advertise string, routes ...string) *testServer {
		return startServer(t, func(c *server.Config) {
			usePG(c)
			clusterConfig(c, i)
			c.NATSClusterListen, c.NATSClusterAdvertise, c.NATSRoutes = listen, advertise, routes
			c.NATSClusterSecret = "advertise-test-secret-0123456789"
		})
	}
	n2 := node(1, fmt.Sprintf("127.0.0.1:%d", ports[0]), "", fwdURL)
	n3 := node(2, fmt.Sprintf("127.0.0.1:%d", ports[1]), "", fmt.Sprintf("nats://127.0.0.1:%d", ports[0]))
	eventually(t, "nodes 2 and 3 route to each other", func() bool {
		return n2.Stats().ClusterRoutes == 1 && n3.Stats().ClusterRoutes == 1
	})
	// Node 1 joins last, so node 3 learns of it only from node 2.
	n1 := node(0, fmt.Sprintf("127.0.0.2:%d", pA), fwd.ln.Addr().String())
	nodes := []*testServer{n1, n2, n3}
	for i, ts := range nodes {
		eventually(t, fmt.Sprintf("node %d routes to the two others", i+1), func() bool { return ts.Stats().ClusterRoutes == 2 })
	}

	alice, oa := dialObserved(t, n1, "alice", "a1", "phone")
	bob, ob := dialObserved(t, n3, "bob", "b1", "phone")
	waitKnown(t, nodes, "alice", "bob")
	sendN(t, alice, "p:alice:bob", 3, "ab")
	wantTexts(t, "bob on node 3", ob, "p:alice:bob", "ab", 3)
	sendN(t, bob, "p:alice:bob", 3, "ba")
	eventually(t, "alice on node 1 receives bob's replies", func() bool { return len(oa.texts("p:alice:bob")) == 3 })
}

// freeOnBothLoopbacks is a port free on both 127.0.0.1 and 127.0.0.2.
func freeOnBothLoopbacks(t *testing.T) int {
	t.Helper()
	for range 20 {
		l2, err := net.Listen("tcp", "127.0.0.2:0")
		if err != nil {
			t.Skipf("127.0.0.2 is not usable here: %v", err)
		}
		port := l2.Addr().(*net.TCPAddr).Port
		l1, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		l2.Close()
		if err == nil {
			l1.Close()
			return port
		}
	}
	t.Fatal("no port free on both 127.0.0.1 and 127.0.0.2")
	return 0
}

// nats_cluster_advertise is a host:port, and only with embedded NATS.
func TestClusterNATSAdvertiseValidation(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*server.Config)
	}{
		{"no port", func(c *server.Config) { c.NATSClusterAdvertise = "nat.example.com" }},
		{"bad port", func(c *server.Config) { c.NATSClusterAdvertise = "nat.example.com:70000" }},
		{"no host", func(c *server.Config) { c.NATSClusterAdvertise = ":6222" }},
		{"a URL", func(c *server.Config) { c.NATSClusterAdvertise = "nats://nat.example.com:6222" }},
		{"without embedded NATS", func(c *server.Config) {
			c.NATSClusterListen, c.NATSURLs, c.NATSClusterAdvertise = "", []string{"nats://127.0.0.1:4222"}, "nat.example.com:6222"
		}},
	} {
		cfg := server.Config{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", TCPAddr: "off",
			PostgresURL: "postgres://127.0.0.1:1/none", TokenKey: testTokenKey, AppSecret: testAppSecret,
			AdminAPIKeys: []string{testAPIKey}, NATSClusterListen: "127.0.0.1:0"}
		tc.mod(&cfg)
		srv, err := server.New(cfg)
		if err == nil {
			srv.Shutdown(context.Background())
			t.Fatalf("%s: accepted", tc.name)
		}
		if !strings.Contains(err.Error(), "nats_cluster_advertise") {
			t.Fatalf("%s: %v, want it to name nats_cluster_advertise", tc.name, err)
		}
	}
}

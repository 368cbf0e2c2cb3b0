package route

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

// A starting node is not ready until it is routed to the peers its routes
// name, so a client is not served by a node whose messages no other node
// would hear yet; a node named only by itself, or given an external NATS,
// does not wait.
func TestNotReadyUntilRouted(t *testing.T) {
	pa, pb := freeRoutePort(t), freeRoutePort(t)
	for pb == pa {
		pb = freeRoutePort(t)
	}
	a := fmt.Sprintf("127.0.0.1:%d", pa)
	b := fmt.Sprintf("127.0.0.1:%d", pb)
	routes := []string{"nats://" + a, "nats://" + b}

	na := startEmbeddedNode(t, "1", a, "", routes...)
	if err := na.Ready(); !errors.Is(err, ErrNotRouted) {
		t.Fatalf("a node whose one peer is not up: Ready = %v, want ErrNotRouted", err)
	}
	nb := startEmbeddedNode(t, "2", b, "", routes...)
	deadline := time.Now().Add(routeWait / 2) // well before the wait would give up
	for na.Ready() != nil || nb.Ready() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("not ready once routed: %v, %v (routes %d, %d)", na.Ready(), nb.Ready(), na.Routes(), nb.Routes())
		}
		time.Sleep(10 * time.Millisecond)
	}

	alone := startEmbeddedNode(t, "3", fmt.Sprintf("127.0.0.1:%d", freeRoutePort(t)), "")
	if err := alone.Ready(); err != nil {
		t.Fatalf("a node with no peers configured: Ready = %v", err)
	}
}

func TestPeerRoutes(t *testing.T) {
	for _, tc := range []struct {
		cfg  NATSConfig
		want int
	}{
		{NATSConfig{ClusterListen: "127.0.0.1:1", Routes: []string{"nats://127.0.0.1:1", "nats://127.0.0.1:2", "nats://127.0.0.1:3"}}, 2},
		{NATSConfig{ClusterListen: "0.0.0.0:1", ClusterAdvertise: "10.0.0.1:1", Routes: []string{"nats://10.0.0.1:1", "nats://10.0.0.2:1", "nats://10.0.0.2:1"}}, 1},
		{NATSConfig{ClusterListen: "127.0.0.1:1"}, 0},
		// This node under a name it cannot recognise: one route fewer.
		{NATSConfig{ClusterListen: "0.0.0.0:6222", Routes: []string{"nats://node1:6222", "nats://node2:6222", "nats://node3:6222"}}, 2},
		{NATSConfig{URLs: []string{"nats://127.0.0.1:4222"}}, 0},
	} {
		if got := peerRoutes(tc.cfg); got != tc.want {
			t.Errorf("peerRoutes(%+v) = %d, want %d", tc.cfg, got, tc.want)
		}
	}
}

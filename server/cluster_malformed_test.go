package server_test

import (
	"testing"

	"github.com/nats-io/nats.go"
)

// Envelopes from another node that do not decode, or do not hold what their
// kind needs, are dropped and counted in parley_cluster_malformed_total; the
// node goes on serving.
func TestClusterMalformedEnvelopesAreCounted(t *testing.T) {
	t.Parallel()
	_, url := startNATS(t, 0)
	nodes := startNodesOnNATS(t, 2, url, nil)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	for _, data := range [][]byte{
		{},                        // nothing: does not decode
		{1, 0, 9},                 // a kick claiming 9 keys and holding none: does not decode
		{1, 0, 1, 1, 'x'},         // a kick to every node with only the user key
		{2, 0, 1, 1, 'x'},         // a close with 1 key of 5
		{99, 0, 0},                // a kind nobody knows
		{6, 0, 2, 1, '7', 1, '8'}, // a node heartbeat with two node ids
	} {
		if err := nc.Publish("parley.all", data); err != nil {
			t.Fatal(err)
		}
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		eventually(t, "the malformed envelopes to be counted", func() bool {
			_, text := scrape(t, n, testAPIKey)
			return metricValue(t, text, "parley_cluster_malformed_total") == 6
		})
	}
	alice, _ := nodes[0].connect(t, "alice", "a1", "phone", transports[0])
	_, bob := nodes[1].connect(t, "bob", "b1", "phone", transports[0])
	if _, err := alice.SendText(ctx10(t), "bob", "still here"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob to receive across nodes", func() bool { return bob.count() == 1 })
}

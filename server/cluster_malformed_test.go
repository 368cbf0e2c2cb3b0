package server_test

import (
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/parleyim/parley/internal/cluster"
	"github.com/parleyim/parley/internal/cluster/clusterpb"
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
	encode := func(m *clusterpb.Envelope) []byte {
		b, err := cluster.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	v := cluster.Version
	sent := [][]byte{
		{},                 // nothing: does not decode
		{v},                // no event: does not decode
		{v, 0x12, 9},       // a kick claiming 9 bytes and holding none: does not decode
		{v, 0xfa, 0x06, 0}, // only an event nobody knows (field 111): does not decode
		{v, 0x3a, 1, 0x0a}, // a heartbeat cut short: does not decode
		{1, 0, 9},          // the previous layout: a kick claiming 9 keys and holding none
		{99, 0, 0},         // the previous layout: a kind nobody knows
		encode(&clusterpb.Envelope{Event: &clusterpb.Envelope_Kick{Kick: &clusterpb.Kick{UserId: "x"}}}),                                     // a kick with only the user
		encode(&clusterpb.Envelope{Event: &clusterpb.Envelope_Close{Close: &clusterpb.Close{Reason: "x"}}}),                                  // a close of nobody
		encode(&clusterpb.Envelope{Event: &clusterpb.Envelope_NodeAlive{NodeAlive: &clusterpb.NodeAlive{}}}),                                 // a heartbeat of no node
		encode(&clusterpb.Envelope{Event: &clusterpb.Envelope_RoomOnlineAnswer{RoomOnlineAnswer: &clusterpb.RoomOnlineAnswer{Sessions: 3}}}), // an answer nobody asked for
	}
	for _, data := range sent {
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
			return metricValue(t, text, "parley_cluster_malformed_total") == float64(len(sent))
		})
	}
	alice, _ := nodes[0].connect(t, "alice", "a1", "phone", transports[0])
	_, bob := nodes[1].connect(t, "bob", "b1", "phone", transports[0])
	if _, err := alice.SendText(ctx10(t), "bob", "still here"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob to receive across nodes", func() bool { return bob.count() == 1 })
}

package server_test

import (
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/nats-io/nats.go"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// During a rolling upgrade nodes of the previous release run beside new
// ones: what they send, in their untyped layout, still takes effect.
func TestClusterAcceptsThePreviousReleasesEnvelopes(t *testing.T) {
	t.Parallel()
	_, url := startNATS(t, 0)
	nodes := startNodesOnNATS(t, 1, url, nil)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_, obs := dialObserved(t, nodes[0], "bob", "b1", "phone")

	// The previous release's close: kind 2, no except session, five keys
	// (user, code, reason, session id, token id).
	data := []byte{2, 0, 5}
	for _, k := range []string{"bob", strconv.Itoa(int(pb.DisconnectCode_DISCONNECT_CODE_KICKED)), "closed by an older node", "", ""} {
		data = binary.AppendUvarint(data, uint64(len(k)))
		data = append(data, k...)
	}
	if err := nc.Publish("parley.all", data); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, "bob's session, closed by a node of the previous release", obs, pb.DisconnectCode_DISCONNECT_CODE_KICKED)
}

package wire

import (
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// A push stays best effort when it crosses nodes as bytes; nothing else is.
func TestBestEffortFromProto(t *testing.T) {
	frames := map[*pb.ServerFrame]bool{
		{Body: &pb.ServerFrame_Push{Push: &pb.Push{Op: 1, Body: []byte("x"), Room: "r"}}}:      true,
		{Body: &pb.ServerFrame_Push{Push: &pb.Push{}}}:                                         true,
		{Id: 7, Body: &pb.ServerFrame_Push{Push: &pb.Push{Op: 2}}}:                             true,
		{Body: &pb.ServerFrame_Message{Message: &pb.Message{ConversationId: "p:a:b", Seq: 3}}}: false,
		{Id: 9, Body: &pb.ServerFrame_Disconnect{Disconnect: &pb.Disconnect{Reason: "x"}}}:     false,
		{}: false,
	}
	for f, want := range frames {
		if got := NewOutbound(f).BestEffort(); got != want {
			t.Errorf("NewOutbound(%v).BestEffort() = %v", f, got)
		}
		b, err := EncodeServer(Proto, f)
		if err != nil {
			t.Fatal(err)
		}
		if got := OutboundFromProto(b).BestEffort(); got != want {
			t.Errorf("OutboundFromProto(%v).BestEffort() = %v", f, got)
		}
	}
	if OutboundFromProto([]byte{0xff, 0xff}).BestEffort() {
		t.Error("garbage is a push")
	}
}

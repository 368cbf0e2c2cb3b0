package cluster

import (
	"bytes"
	"encoding/binary"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/parleyim/parley/internal/cluster/clusterpb"
)

// oneOfEach holds an envelope of every event the schema has.
func oneOfEach() []*clusterpb.Envelope {
	return []*clusterpb.Envelope{
		{Event: &clusterpb.Envelope_Frame{Frame: &clusterpb.Frame{ExceptSession: "n1-7", SkipUsers: []string{"a", "b.c"}, Frame: []byte{0, 1, 255}}}},
		{Event: &clusterpb.Envelope_Kick{Kick: &clusterpb.Kick{UserId: "alice", DeviceType: "phone", DeviceId: "a1", SessionId: "n1-3", StartedUnixNano: 1700000000123456789}}},
		{Event: &clusterpb.Envelope_Close{Close: &clusterpb.Close{UserId: "alice", Code: 4, Reason: "token revoked", SessionId: "n2-9", TokenId: "t1"}}},
		{Event: &clusterpb.Envelope_GroupChanged{GroupChanged: &clusterpb.GroupChanged{ConversationId: "g:00ff", Joined: []string{"bob"}, Left: []string{"carol", "dan"}}}},
		{Event: &clusterpb.Envelope_Presence{Presence: &clusterpb.Presence{Online: true, Node: "n2"}}},
		{Event: &clusterpb.Envelope_Sessions{Sessions: &clusterpb.Sessions{SessionIds: []string{"n2-1", "n2-2"}, Frame: []byte("frame")}}},
		{Event: &clusterpb.Envelope_NodeAlive{NodeAlive: &clusterpb.NodeAlive{Node: "n3"}}},
		{Event: &clusterpb.Envelope_SessionsQuestion{SessionsQuestion: &clusterpb.SessionsQuestion{}}},
		{Event: &clusterpb.Envelope_SessionsAnswer{SessionsAnswer: &clusterpb.SessionsAnswer{Sessions: []*clusterpb.SessionInfo{
			{SessionId: "n2-1", UserId: "alice", DeviceId: "a1", DeviceType: "phone", ConnectedUnixNano: 42}}}}},
		{Event: &clusterpb.Envelope_RoomOnlineQuestion{RoomOnlineQuestion: &clusterpb.RoomOnlineQuestion{}}},
		{Event: &clusterpb.Envelope_RoomOnlineAnswer{RoomOnlineAnswer: &clusterpb.RoomOnlineAnswer{Sessions: 12}}},
		{Event: &clusterpb.Envelope_UserOnlineQuestion{UserOnlineQuestion: &clusterpb.UserOnlineQuestion{}}},
		{Event: &clusterpb.Envelope_UserOnlineAnswer{UserOnlineAnswer: &clusterpb.UserOnlineAnswer{Node: "n2"}}},
		{Event: &clusterpb.Envelope_NodeStatsQuestion{NodeStatsQuestion: &clusterpb.NodeStatsQuestion{}}},
		{Event: &clusterpb.Envelope_NodeStatsAnswer{NodeStatsAnswer: &clusterpb.NodeStatsAnswer{Node: "n2", Connections: 3, Sessions: 2,
			MessagesStored: 1 << 40, Deliveries: 7, SendsFailed: 1, HeapBytes: 1 << 30, Goroutines: 99, UptimeSeconds: 12.5,
			WebhookQueued: 4, WebhookDropped: 5, PushQueued: 6, PushDropped: 8}}},
	}
}

func TestRoundTripEveryEvent(t *testing.T) {
	all := oneOfEach()
	if want := (&clusterpb.Envelope{}).ProtoReflect().Descriptor().Oneofs().ByName("event").Fields().Len(); len(all) != want {
		t.Fatalf("the test covers %d events, the schema has %d", len(all), want)
	}
	var d Decoder
	for _, in := range all {
		b, err := Encode(in)
		if err != nil {
			t.Fatal(err)
		}
		if Legacy(b) {
			t.Fatalf("%v encoded as the previous layout", in)
		}
		out, err := d.Decode(b)
		if err != nil {
			t.Fatalf("decode %v: %v", in, err)
		}
		if !proto.Equal(in, out) {
			t.Fatalf("round trip: %v, want %v", out, in)
		}
	}
}

// The frame path writes what proto.Marshal writes and reads it back.
func TestAppendFrameIsTheSchemasEncoding(t *testing.T) {
	frame := bytes.Repeat([]byte{7}, 300) // a length past one varint byte
	var d Decoder
	for _, except := range []string{"", "n1-42"} {
		got := AppendFrame([]byte("keep"), except, frame)
		if !bytes.HasPrefix(got, []byte("keep")) {
			t.Fatal("AppendFrame overwrote dst")
		}
		want, err := Encode(&clusterpb.Envelope{Event: &clusterpb.Envelope_Frame{Frame: &clusterpb.Frame{ExceptSession: except, Frame: frame}}})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[4:], want) {
			t.Fatalf("AppendFrame(%q) = %x, proto gives %x", except, got[4:], want)
		}
		m, err := d.Decode(got[4:])
		if err != nil {
			t.Fatal(err)
		}
		f := m.GetFrame()
		if f.GetExceptSession() != except || !bytes.Equal(f.GetFrame(), frame) {
			t.Fatalf("decoded %v", m)
		}
	}
	// The hand-written field numbers are the schema's.
	fields := map[protoreflect.FieldNumber]protoreflect.Name{
		fieldEnvelopeFrame: "frame",
	}
	if got := (&clusterpb.Envelope{}).ProtoReflect().Descriptor().Fields().ByNumber(fieldEnvelopeFrame).Name(); got != fields[fieldEnvelopeFrame] {
		t.Fatalf("Envelope field %d is %s", fieldEnvelopeFrame, got)
	}
	if got := (&clusterpb.Envelope{}).ProtoReflect().Descriptor().Fields().ByNumber(fieldTraceparent).Name(); got != "traceparent" {
		t.Fatalf("Envelope field %d is %s", fieldTraceparent, got)
	}
	fd := (&clusterpb.Frame{}).ProtoReflect().Descriptor().Fields()
	for num, name := range map[protoreflect.FieldNumber]protoreflect.Name{
		fieldFrameExcept: "except_session", fieldFrameSkip: "skip_users", fieldFrameBytes: "frame"} {
		if f := fd.ByNumber(num); f == nil || f.Name() != name {
			t.Fatalf("Frame field %d is not %s", num, name)
		}
	}
}

func TestMalformedIsAnError(t *testing.T) {
	var d Decoder
	for _, bad := range [][]byte{
		nil,
		{Version},                         // no event
		{Version, 0x12, 9},                // a kick claiming 9 bytes, holding none
		{Version, 0x0a, 2, 0x1a},          // a frame cut short
		{Version, 0xfa, 0x06, 0},          // only an event this release does not know (field 111)
		{Version, 0x22, 2, 0x0a, 0xff},    // a group change claiming more than it holds
		{Version, 0x3a, 3, 0x0a, 1, 0xff}, // a node id that is not UTF-8
		{1, 0, 9},                         // previous layout: a kick claiming 9 keys, holding none
		{1, 0, 1, 1, 'x'},                 // previous layout: a kick with only the user key
		{2, 0, 1, 1, 'x'},                 // previous layout: a close with 1 key of 5
		{99, 0, 0},                        // previous layout: a kind nobody knows
		{6, 0, 2, 1, '7', 1, '8'},         // previous layout: a heartbeat with two node ids
	} {
		if m, err := d.Decode(bad); err == nil {
			t.Fatalf("Decode(%x) accepted %v", bad, m)
		}
	}
}

// legacy writes the previous release's layout, as that release did.
func legacy(kind byte, except string, keys []string, data []byte) []byte {
	b := []byte{kind}
	b = binary.AppendUvarint(b, uint64(len(except)))
	b = append(b, except...)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	return append(b, data...)
}

// What a node of the previous release sends decodes into the typed events.
func TestDecodesThePreviousLayout(t *testing.T) {
	env := func(m *clusterpb.Envelope) *clusterpb.Envelope { return m }
	for _, c := range []struct {
		in   []byte
		want *clusterpb.Envelope
	}{
		{legacy(0, "n1-7", []string{"a", "b"}, []byte{0, 1}), env(&clusterpb.Envelope{Event: &clusterpb.Envelope_Frame{Frame: &clusterpb.Frame{
			ExceptSession: "n1-7", SkipUsers: []string{"a", "b"}, Frame: []byte{0, 1}}}})},
		{legacy(0, "", nil, []byte{9}), env(&clusterpb.Envelope{Event: &clusterpb.Envelope_Frame{Frame: &clusterpb.Frame{Frame: []byte{9}}}})},
		{legacy(1, "", []string{"alice", "phone", "a1", "n1-3", "1700000000123456789"}, nil), oneOfEach()[1]},
		{legacy(2, "", []string{"alice", "4", "token revoked", "n2-9", "t1"}, nil), oneOfEach()[2]},
		{legacy(3, "", []string{"g:00ff", "-carol", "+bob", "-dan"}, nil), oneOfEach()[3]},
		{legacy(4, "", []string{"1", "n2"}, nil), oneOfEach()[4]},
		{legacy(5, "", []string{"n2-1", "n2-2"}, []byte("frame")), oneOfEach()[5]},
		{legacy(6, "", []string{"n3"}, nil), oneOfEach()[6]},
		{legacy(7, "", nil, nil), oneOfEach()[7]},
		{legacy(8, "", nil, nil), oneOfEach()[9]},
		{[]byte{255, 0, 0}, oneOfEach()[11]},
	} {
		want := c.want
		if !Legacy(c.in) {
			t.Fatalf("%x not taken for the previous layout", c.in)
		}
		var d Decoder
		got, err := d.Decode(c.in)
		if err != nil {
			t.Fatalf("Decode(%x): %v", c.in, err)
		}
		if !proto.Equal(got, want) {
			t.Fatalf("Decode(%x) = %v, want %v", c.in, got, want)
		}
	}
}

// A frame decodes into the Decoder's own message: nothing allocated but
// its strings (here none).
func TestFrameDecodeDoesNotAllocate(t *testing.T) {
	b := AppendFrame(nil, "", make([]byte, 100))
	var d Decoder
	if n := testing.AllocsPerRun(100, func() {
		if _, err := d.Decode(b); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Fatalf("%v allocations per frame decoded", n)
	}
}

func FuzzDecodeEnvelope(f *testing.F) {
	for _, m := range oneOfEach() {
		b, _ := Encode(m)
		f.Add(b)
	}
	f.Add(AppendFrame(nil, "n1-1", []byte("x")))
	f.Add(legacy(0, "n1-7", []string{"a"}, []byte{1}))
	f.Add(legacy(3, "", []string{"g:1", "+a", "-b"}, nil))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		var d Decoder
		m, err := d.Decode(b)
		if err != nil {
			return
		}
		if m.GetEvent() == nil {
			t.Fatal("decoded an envelope without an event")
		}
		if Legacy(b) {
			return
		}
		// The frame path agrees with the generated code.
		var slow clusterpb.Envelope
		if err := proto.Unmarshal(b[1:], &slow); err != nil || !proto.Equal(&slow, m) {
			t.Fatalf("Decode gave %v, proto.Unmarshal %v (%v)", m, &slow, err)
		}
		again, err := Encode(m)
		if err != nil {
			t.Fatalf("re-encode of a decoded envelope: %v", err)
		}
		if m2, err := d.Decode(again); err != nil || !proto.Equal(m2, &slow) {
			t.Fatalf("re-encoded envelope decodes to %v (%v)", m2, err)
		}
	})
}

// Encode and decode of a frame envelope to one user, as the route does it
// (one buffer reused across messages).
func BenchmarkFrameEnvelope(b *testing.B) {
	frame := make([]byte, 200)
	var buf []byte
	var d Decoder
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendFrame(buf[:0], "n1-42", frame)
		if _, err := d.Decode(buf); err != nil {
			b.Fatal(err)
		}
	}
}

// A frame carries its sender's trace context to the receiving node, in the
// bytes proto.Marshal writes; a frame without one decodes with none, even
// right after one with it (the Decoder reuses its message).
func TestTracedFrameRoundTrip(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	frame := []byte("server frame")
	b := AppendTracedFrame(nil, "s1", frame, tp)
	want, err := Encode(&clusterpb.Envelope{Traceparent: tp, Event: &clusterpb.Envelope_Frame{Frame: &clusterpb.Frame{ExceptSession: "s1", Frame: frame}}})
	if err != nil {
		t.Fatal(err)
	}
	var ref clusterpb.Envelope
	if err := proto.Unmarshal(b[1:], &ref); err != nil || ref.Traceparent != tp || !bytes.Equal(ref.GetFrame().GetFrame(), frame) {
		t.Fatalf("proto.Unmarshal of AppendTracedFrame's bytes: %v, %v (Encode gives %x)", &ref, err, want)
	}
	var d Decoder
	for _, c := range []struct {
		b  []byte
		tp string
	}{{b, tp}, {AppendFrame(nil, "s1", frame), ""}, {want, tp}} {
		m, err := d.Decode(c.b)
		if err != nil {
			t.Fatal(err)
		}
		if m.Traceparent != c.tp || !bytes.Equal(m.GetFrame().GetFrame(), frame) || m.GetFrame().GetExceptSession() != "s1" {
			t.Fatalf("decoded %v, want traceparent %q", m, c.tp)
		}
	}
}

package store

import (
	"reflect"
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

func TestDecodeHead(t *testing.T) {
	for _, m := range []*pb.Message{
		{},
		{ConversationId: "g:x", Seq: 7, From: "alice", ContentType: "text", Payload: []byte("hi"), Kind: pb.MessageKind_MESSAGE_KIND_NORMAL},
		{From: "bob", Kind: pb.MessageKind_MESSAGE_KIND_MEMBERS_ADDED, Event: &pb.MessageEvent{UserIds: []string{"a", "b", "c"}}},
		{From: "carol", Kind: pb.MessageKind_MESSAGE_KIND_NORMAL, Recalled: true, EditedAt: 12345},
		{From: "dave", Kind: pb.MessageKind(-3)},
		{From: "erin", Kind: pb.MessageKind_MESSAGE_KIND_NORMAL, SenderOnly: true, Payload: []byte("x")},
		{From: "fred", Kind: pb.MessageKind_MESSAGE_KIND_NORMAL, ThreadRoot: 9, Mentions: []string{"a", "bé"}, MentionAll: true, ReplyTo: 3},
	} {
		body, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		h, err := DecodeHead(body)
		want := MessageHead{From: m.From, Kind: m.Kind, Recalled: m.Recalled, SenderOnly: m.SenderOnly,
			ThreadRoot: m.ThreadRoot, Mentions: m.Mentions, MentionAll: m.MentionAll}
		if err != nil || !reflect.DeepEqual(h, want) {
			t.Fatalf("DecodeHead(%v) = %+v, %v; want %+v", m, h, err, want)
		}
		// Every cut short of the whole is malformed or a shorter message,
		// never a panic.
		for i := range body {
			_, _ = DecodeHead(body[:i])
		}
	}
	for _, bad := range [][]byte{{0x22}, {0x22, 0x05, 'a'}, {0x50}, {0xff}, {0x0b}} {
		if _, err := DecodeHead(bad); err == nil {
			t.Fatalf("DecodeHead(%x) accepted a malformed encoding", bad)
		}
	}
}

func FuzzDecodeHead(f *testing.F) {
	b, _ := proto.Marshal(&pb.Message{From: "alice", Kind: pb.MessageKind_MESSAGE_KIND_NORMAL, Recalled: true})
	f.Add(b)
	f.Fuzz(func(t *testing.T, body []byte) {
		h, err := DecodeHead(body)
		var m pb.Message
		if perr := proto.Unmarshal(body, &m); perr == nil && err == nil {
			if h.Kind != m.Kind || h.Recalled != m.Recalled || h.SenderOnly != m.SenderOnly ||
				h.ThreadRoot != m.ThreadRoot || h.MentionAll != m.MentionAll || !slices.Equal(h.Mentions, m.Mentions) {
				t.Fatalf("DecodeHead = %+v, proto.Unmarshal = %v", h, &m)
			}
		}
	})
}

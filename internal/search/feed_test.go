package search_test

import (
	"context"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/parleyim/parley/internal/search"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

func TestDocOf(t *testing.T) {
	normal := func(ct, payload, searchText string) *pb.Message {
		return &pb.Message{ConversationId: "c", Seq: 1, Kind: pb.MessageKind_MESSAGE_KIND_NORMAL,
			ContentType: ct, Payload: []byte(payload), SearchText: searchText}
	}
	recalled := normal("text", "x", "")
	recalled.Recalled = true
	event := normal("text", "x", "")
	event.Kind = pb.MessageKind_MESSAGE_KIND_GROUP_UPDATED
	for _, c := range []struct {
		m    *pb.Message
		want string // "" for no document
	}{
		{normal("", "plain", ""), "plain"},
		{normal("text", "plain", ""), "plain"},
		{normal("text/markdown", "**md**", ""), "**md**"},
		{normal("textual/x", "nope", ""), ""},
		{normal("image/png", "png bytes", ""), ""},
		{normal("text", "\xff\xfe", ""), ""},
		{normal("app/card", `{"a":1}`, "card words"), "card words"},
		{normal("text", "payload", "search text wins"), "search text wins"},
		{normal("text", "   ", ""), ""},
		{recalled, ""},
		{event, ""},
	} {
		d := search.DocOf(c.m)
		got := ""
		if d != nil {
			got = d.Text
		}
		if got != c.want {
			t.Errorf("DocOf(%q %q %q): %q, want %q", c.m.ContentType, c.m.Payload, c.m.SearchText, got, c.want)
		}
	}
	long := normal("text", strings.Repeat("é", search.MaxTextBytes), "")
	if d := search.DocOf(long); len(d.Text) > search.MaxTextBytes || !utf8.ValidString(d.Text) || len(d.Text) < search.MaxTextBytes-1 {
		t.Fatalf("a long text is cut to %d bytes (valid %v), want at most %d at a character boundary", len(d.Text), utf8.ValidString(d.Text), search.MaxTextBytes)
	}
}

type getter map[uint64]*pb.Message

func (g getter) GetMessage(_ context.Context, _ string, seq uint64) (*pb.Message, error) {
	if m, ok := g[seq]; ok {
		return m, nil
	}
	return nil, store.ErrNotFound
}

func TestChangesOfEvents(t *testing.T) {
	target := &pb.Message{ConversationId: "c", Seq: 1, From: "ann", ServerTime: 5, Kind: pb.MessageKind_MESSAGE_KIND_NORMAL,
		ContentType: "text", Payload: []byte("new text"), Attachments: []*pb.Attachment{{Id: "f"}}}
	ev := func(kind pb.MessageKind, seq uint64) *pb.Message {
		return &pb.Message{ConversationId: "c", Seq: 9, Kind: kind, Event: &pb.MessageEvent{TargetSeq: seq}}
	}
	cs, err := search.Changes(context.Background(), getter{1: target}, []*pb.Message{
		ev(pb.MessageKind_MESSAGE_KIND_EDIT, 1),
		ev(pb.MessageKind_MESSAGE_KIND_EDIT, 2), // target gone
		ev(pb.MessageKind_MESSAGE_KIND_RECALL, 3),
		ev(pb.MessageKind_MESSAGE_KIND_PINNED, 1),
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 3 {
		t.Fatalf("%d changes, want 3: %+v", len(cs), cs)
	}
	if p := cs[0].Put; p == nil || p.Seq != 1 || p.Text != "new text" || p.From != "ann" || p.Time != 5 || !p.HasAttachment {
		t.Fatalf("edit: %+v, want the target's document with its sender, time and attachments", cs[0])
	}
	if cs[1].Put != nil || cs[1].Seq != 2 || cs[2].Put != nil || cs[2].Seq != 3 {
		t.Fatalf("edit of a missing message and recall: %+v %+v, want deletes of 2 and 3", cs[1], cs[2])
	}
}

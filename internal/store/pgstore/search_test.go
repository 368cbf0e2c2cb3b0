package pgstore

import (
	"context"
	"errors"
	"testing"

	"github.com/parleyim/parley/internal/search"
	"github.com/parleyim/parley/internal/search/searchtest"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// searchIndex is a Store as the conformance suite's search.Index: documents
// are written as the messages they come from (searchHarness.apply), so
// Apply and Position are never called.
type searchIndex struct{ *Store }

func (searchIndex) Apply(context.Context, []search.Change, uint64) error {
	return errors.New("pgstore: documents are written as messages")
}
func (searchIndex) Position(context.Context) (uint64, error) { return 0, nil }

// messageOf is the stored message whose search.DocOf is d.
func messageOf(d *search.Doc) *pb.Message {
	m := &pb.Message{ConversationId: d.ConversationID, From: d.From, ContentType: d.ContentType,
		Payload: []byte(d.Text), SearchText: d.Text, ServerTime: d.Time, SenderOnly: d.SenderOnly,
		Kind: pb.MessageKind_MESSAGE_KIND_NORMAL}
	if d.HasAttachment {
		m.Attachments = []*pb.Attachment{{Id: "f1", Name: "a.txt", Size: 1}}
	}
	return m
}

// applyAsMessages writes search changes through the store's own write path:
// a document at the conversation's next seq is appended (after filler
// messages with nothing to search, up to its seq); one at a seq already
// taken is an edit replacing that message; a delete is a recall (of a seq
// that has no message: nothing). Edit and recall events take seqs of their
// own, as in any conversation.
func applyAsMessages(t *testing.T, s *Store, changes []search.Change) {
	t.Helper()
	ctx := context.Background()
	for _, c := range changes {
		conv, seq := c.ConversationID, c.Seq
		if c.Put != nil {
			conv, seq = c.Put.ConversationID, c.Put.Seq
		}
		last, err := s.LastSeq(ctx, conv)
		if err != nil {
			t.Fatalf("LastSeq(%s): %v", conv, err)
		}
		switch {
		case c.Put != nil && seq > last:
			var batch []*pb.Message
			for i := last + 1; i < seq; i++ {
				batch = append(batch, &pb.Message{ConversationId: conv, From: "filler", ContentType: "app/bin", Payload: []byte{0xff}})
			}
			res, err := s.Append(ctx, append(batch, messageOf(c.Put)))
			if err != nil || res[len(res)-1].Msg.Seq != seq {
				t.Fatalf("Append %s/%d: %v", conv, seq, err)
			}
		case c.Put != nil:
			m := messageOf(c.Put)
			m.Seq = seq
			ev := &pb.Message{ConversationId: conv, From: c.Put.From, Kind: pb.MessageKind_MESSAGE_KIND_EDIT,
				Event: &pb.MessageEvent{TargetSeq: seq}}
			if _, err := s.Apply(ctx, store.Change{Event: ev, Update: m}); err != nil {
				t.Fatalf("edit %s/%d: %v", conv, seq, err)
			}
		default:
			m, err := s.GetMessage(ctx, conv, seq)
			if errors.Is(err, store.ErrNotFound) {
				continue
			} else if err != nil {
				t.Fatalf("GetMessage(%s/%d): %v", conv, seq, err)
			}
			m.Recalled, m.Payload, m.SearchText = true, nil, ""
			ev := &pb.Message{ConversationId: conv, From: m.From, Kind: pb.MessageKind_MESSAGE_KIND_RECALL,
				Event: &pb.MessageEvent{TargetSeq: seq}}
			if _, err := s.Apply(ctx, store.Change{Event: ev, Update: m}); err != nil {
				t.Fatalf("recall %s/%d: %v", conv, seq, err)
			}
		}
	}
}

func TestPGSearchConformance(t *testing.T) {
	url := testURL(t)
	searchtest.Run(t, func(t *testing.T) searchtest.Harness {
		s := openSchema(t, url, freshSchema(t, url))
		return searchtest.Harness{
			Index: searchIndex{s},
			Apply: func(t *testing.T, changes []search.Change) { applyAsMessages(t, s, changes) },
		}
	})
}

package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/search"
	"github.com/parleyim/parley/internal/search/searchtest"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// searchIndex is a Store as the conformance suite's search.Index: documents
// are written as the messages they come from (applyAsMessages), so
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

// TestPGSearchBackfill: messages stored before migration 0010 (no search
// fields, a search_backfill row) are filled in batch by batch from the
// recorded position, then the row is gone; and a Store opened on such a
// schema does it by itself.
func TestPGSearchBackfill(t *testing.T) {
	ctx := context.Background()
	s, schema := openTempSchema(t)
	var all []string
	for i := range 5 {
		conv := fmt.Sprintf("g:%d", i%2)
		normal := pb.MessageKind_MESSAGE_KIND_NORMAL
		res := mustAppend(t, s, &pb.Message{ConversationId: conv, From: "u1", Kind: normal, ContentType: "text", Payload: []byte(fmt.Sprintf("older words %d", i))},
			&pb.Message{ConversationId: conv, From: "u1", Kind: normal, ContentType: "image/png", Payload: []byte{0x89, 'P'}})
		all = append(all, fmt.Sprintf("%s/%d", conv, res[0].Msg.Seq))
	}
	// The backfill Open started on the fresh schema must be over before the
	// test re-arms it, or it takes the batches the test counts.
	<-s.backfilled
	// As before the migration.
	sqlExec(t, s, schema, `UPDATE {s}.messages SET search_norm = NULL, server_time = NULL, content_type = NULL, has_attachment = NULL, sender_only = NULL`)
	sqlExec(t, s, schema, `INSERT INTO {s}.search_backfill VALUES (1, '', 0)`)
	q := search.Query{Text: "older", Ranges: []search.Range{{ConversationID: "g:0", From: 1}, {ConversationID: "g:1", From: 1}}}
	hits := func(s *Store) []string {
		t.Helper()
		r, err := s.Search(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range r.Hits {
			out = append(out, fmt.Sprintf("%s/%d", h.ConversationID, h.Seq))
		}
		slices.Sort(out)
		return out
	}
	if got := hits(s); len(got) != 0 {
		t.Fatalf("before the backfill: %v", got)
	}
	// Batches of 3 rows: g:0 has 6 (3 text), g:1 4 (2 text).
	for step := 1; ; step++ {
		state, err := s.backfillStep(ctx, 3)
		if err != nil {
			t.Fatal(err)
		}
		if state == backfillDone {
			if step != 4 {
				t.Fatalf("done after %d batches of 3 for 10 rows, want 4", step)
			}
			break
		}
		if step == 2 {
			if got := hits(s); len(got) != 3 || got[0] != all[0] {
				t.Fatalf("after 2 batches (g:0 done): %v", got)
			}
		}
	}
	slices.Sort(all)
	if got := hits(s); !slices.Equal(got, all) {
		t.Fatalf("after the backfill: %v, want %v", got, all)
	}
	if state, err := s.backfillStep(ctx, 3); err != nil || state != backfillDone {
		t.Fatalf("once done: %v, %v", state, err)
	}

	// Opened on a schema that needs it: the Store backfills by itself.
	sqlExec(t, s, schema, `UPDATE {s}.messages SET search_norm = NULL`)
	sqlExec(t, s, schema, `INSERT INTO {s}.search_backfill VALUES (1, '', 0)`)
	s2 := openSchema(t, testURL(t), schema)
	defer s2.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(hits(s2), all) {
		if time.Now().After(deadline) {
			t.Fatalf("a Store opened with a backfill pending: %v, want %v", hits(s2), all)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

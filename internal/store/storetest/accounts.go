package storetest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// testAccountDeletion: what deleting an account needs of a store. A user's
// files are listed by owner in pages; erasing a user's messages clears
// their content in place (seqs, senders and the other user's messages
// unchanged), takes them out of search and mentions, reaches the message
// log, and is idempotent; deleting a user's records removes theirs and
// other users' records about them and nothing of anyone else.
func testAccountDeletion(t *testing.T, s store.Store) {
	ctx := context.Background()
	t0 := time.Unix(1_763_800_000, 0).UTC()
	for _, f := range []store.File{
		{ID: "f-2", Owner: "alice", Name: "b.txt", Size: 2, ContentType: "text/plain", BlobKey: "f/2", CreatedAt: t0},
		{ID: "f-1", Owner: "alice", Name: "a.txt", Size: 1, ContentType: "text/plain", BlobKey: "f/1", CreatedAt: t0},
		{ID: "f-3", Owner: "bob", Name: "c.txt", Size: 3, ContentType: "text/plain", BlobKey: "f/3", CreatedAt: t0},
	} {
		if err := s.PutFile(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for after := ""; ; {
		page, err := s.FilesOf(ctx, "alice", after, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			break
		}
		if len(page) != 1 {
			t.Fatalf("FilesOf with limit 1 returned %d files", len(page))
		}
		ids, after = append(ids, page[0].ID), page[0].ID
	}
	if len(ids) != 2 || ids[0] != "f-1" || ids[1] != "f-2" {
		t.Fatalf("alice's files = %v, want [f-1 f-2]", ids)
	}

	const conv = "d:alice:bob"
	a1 := msg(conv, "alice", "bob", "a1")
	a1.SearchText, a1.Mentions = "unique-marker-text", []string{"bob"}
	b1 := msg(conv, "bob", "alice", "b1")
	a2 := msg(conv, "alice", "bob", "a2")
	a2.Attachments = []*pb.Attachment{{Id: "f-1"}}
	appendOK(t, s, a1, b1, a2)
	ev := &pb.Message{ConversationId: conv, From: "alice", To: "bob", ClientMsgId: "edit-1", Kind: pb.MessageKind_MESSAGE_KIND_EDIT,
		ContentType: "text", Payload: []byte("edited text"), Event: &pb.MessageEvent{TargetSeq: 1}, MessageId: nextMessageID()}
	appendOK(t, s, ev)
	if got, err := s.Mentions(ctx, "bob", conv, 0, 10); err != nil || len(got) != 1 {
		t.Fatalf("bob's mentions before = %v, %v; want one", got, err)
	}
	var logBefore uint64
	lg, hasLog := s.(store.Log)
	if hasLog {
		var err error
		if logBefore, err = lg.LastLogPos(ctx); err != nil {
			t.Fatal(err)
		}
	}

	erased := 0
	after, pages := uint64(0), 0
	for {
		next, n, err := s.EraseMessages(ctx, conv, "alice", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if next == 0 {
			break
		}
		if next <= after {
			t.Fatalf("EraseMessages after %d returned next %d", after, next)
		}
		erased, after, pages = erased+n, next, pages+1
	}
	if erased != 3 || pages != 2 {
		t.Fatalf("erased %d messages in %d pages, want 3 in 2", erased, pages)
	}
	got := all(t, s, conv)
	wantSeqs(t, "after erasing", got, []uint64{1, 2, 3, 4})
	for _, m := range got {
		if m.From == "bob" {
			if !bytes.Equal(m.Payload, b1.Payload) || m.Recalled {
				t.Fatalf("bob's message changed: %v", m)
			}
			continue
		}
		if m.From != "alice" || len(m.Payload) != 0 || m.SearchText != "" || m.ContentType != "" ||
			len(m.Attachments) != 0 || len(m.Mentions) != 0 {
			t.Fatalf("alice's message %d not erased: %v", m.Seq, m)
		}
		if m.Kind == pb.MessageKind_MESSAGE_KIND_NORMAL && !m.Recalled {
			t.Fatalf("alice's message %d not marked recalled", m.Seq)
		}
		if m.Kind == pb.MessageKind_MESSAGE_KIND_EDIT && m.GetEvent().GetTargetSeq() != 1 {
			t.Fatalf("the edit event lost its target: %v", m)
		}
	}
	if got, err := s.Mentions(ctx, "bob", conv, 0, 10); err != nil || len(got) != 0 {
		t.Fatalf("bob's mentions after = %v, %v; want none", got, err)
	}
	if hasLog {
		entries, err := lg.LogAfter(ctx, logBefore, 100, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 3 {
			t.Fatalf("%d log entries after erasing, want 3 (one per erased message)", len(entries))
		}
		for _, e := range entries {
			if e.Msg == nil || e.Msg.From != "alice" || len(e.Msg.Payload) != 0 {
				t.Fatalf("log entry %d: %v", e.Pos, e.Msg)
			}
		}
	}
	if _, n, err := s.EraseMessages(ctx, conv, "alice", 0, 100); err != nil || n != 0 {
		t.Fatalf("erasing again erased %d (%v), want 0", n, err)
	}

	// Records about alice, hers and other users'.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	now := t0
	must(s.PutContact(ctx, "alice", store.Contact{UserID: "bob", State: pb.ContactState_CONTACT_STATE_FRIEND, Note: "b", UpdatedAt: now}))
	must(s.PutContact(ctx, "bob", store.Contact{UserID: "alice", State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: now}))
	must(s.PutContact(ctx, "bob", store.Contact{UserID: "carol", State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: now}))
	must(s.PutContact(ctx, "carol", store.Contact{UserID: "alice", State: pb.ContactState_CONTACT_STATE_FRIEND, UpdatedAt: now}))
	must(s.SetBlocked(ctx, "alice", "dave", true))
	must(s.SetBlocked(ctx, "dave", "alice", true))
	must(s.SetBlocked(ctx, "dave", "bob", true))
	must(s.SetConversationSettings(ctx, "alice", conv, store.ConversationSettings{Pinned: true}))
	must(s.SetConversationSettings(ctx, "bob", conv, store.ConversationSettings{Muted: true}))
	must(s.HideMessages(ctx, "alice", conv, []uint64{2}))
	must(s.SetCursors(ctx, []store.Cursor{{ConversationID: conv, UserID: "alice", Delivered: 4, Read: 4},
		{ConversationID: conv, UserID: "bob", Delivered: 3, Read: 2}}))
	must(s.SetLastSeen(ctx, "alice", now))
	must(s.PutPushTarget(ctx, store.PushTarget{UserID: "alice", DeviceID: "phone", Kind: "fcm", Token: "tok", UpdatedAt: now}))

	must(s.DeleteUserRecords(ctx, "alice"))
	must(s.DeleteUserRecords(ctx, "alice")) // idempotent

	if c, err := s.Contacts(ctx, "alice"); err != nil || len(c) != 0 {
		t.Fatalf("alice's contacts = %v, %v", c, err)
	}
	if c, err := s.Contacts(ctx, "bob"); err != nil || len(c) != 1 || c[0].UserID != "carol" {
		t.Fatalf("bob's contacts = %v, %v; want carol only", c, err)
	}
	if c, err := s.Contacts(ctx, "carol"); err != nil || len(c) != 0 {
		t.Fatalf("carol's contacts = %v, %v; want none", c, err)
	}
	if b, err := s.Blocked(ctx, "alice"); err != nil || len(b) != 0 {
		t.Fatalf("alice's block list = %v, %v", b, err)
	}
	if b, err := s.Blocked(ctx, "dave"); err != nil || len(b) != 1 || b[0] != "bob" {
		t.Fatalf("dave's block list = %v, %v; want bob only", b, err)
	}
	if cs, err := s.GetConversationSettings(ctx, "alice", conv); err != nil || cs != (store.ConversationSettings{}) {
		t.Fatalf("alice's settings = %v, %v", cs, err)
	}
	if cs, err := s.GetConversationSettings(ctx, "bob", conv); err != nil || !cs.Muted {
		t.Fatalf("bob's settings = %v, %v", cs, err)
	}
	if h, err := s.HiddenMessages(ctx, "alice", conv, 0, 10); err != nil || len(h) != 0 {
		t.Fatalf("alice's hidden = %v, %v", h, err)
	}
	if c, err := s.GetCursor(ctx, conv, "alice"); err != nil || c.Delivered != 0 || c.Read != 0 {
		t.Fatalf("alice's cursor = %v, %v", c, err)
	}
	if c, err := s.GetCursor(ctx, conv, "bob"); err != nil || c.Delivered != 3 {
		t.Fatalf("bob's cursor = %v, %v", c, err)
	}
	if ls, err := s.LastSeen(ctx, "alice"); err != nil || !ls.IsZero() {
		t.Fatalf("alice's last seen = %v, %v", ls, err)
	}
	if p, err := s.PushTargets(ctx, "alice"); err != nil || len(p) != 0 {
		t.Fatalf("alice's push targets = %v, %v", p, err)
	}
	if c, err := s.Conversations(ctx, "alice"); err != nil || len(c) != 0 {
		t.Fatalf("alice's conversations = %v, %v", c, err)
	}
	if c, err := s.Conversations(ctx, "bob"); err != nil || len(c) != 1 {
		t.Fatalf("bob's conversations = %v, %v", c, err)
	}
	if u, err := s.UserStorage(ctx, "alice"); err != nil || u != 0 {
		t.Fatalf("alice's storage = %d, %v", u, err)
	}
	must(s.PurgeDeleted(ctx))
	wantSeqs(t, "after purging", all(t, s, conv), []uint64{1, 2, 3, 4})
}

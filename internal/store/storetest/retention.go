package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// testRetention: ExpireBefore raises a floor and deletes the messages below
// it in batches, with their reactions, pins, threads, mentions and de-dup
// entries; the log has no entry of a deleted message; DeleteMessages and
// ExpiringMessages serve disappearing messages; two sweepers at once delete
// each message once.
func testRetention(t *testing.T, s store.Store) {
	ctx := context.Background()
	var ms []*pb.Message
	for i := range 6 {
		m := msg("c1", "a", "b", fmt.Sprint("r", i))
		if i == 1 {
			m.Mentions = []string{"b"}
		}
		if i == 2 {
			m.ThreadRoot = 1
		}
		ms = append(ms, m)
	}
	appendOK(t, s, ms...)
	appendOK(t, s, msg("c2", "a", "b", "other"))
	if _, err := s.React(ctx, []store.ReactionOp{{ConversationID: "c1", Seq: 2, UserID: "b", Emoji: "👍"}}); err != nil {
		t.Fatalf("React: %v", err)
	}
	pin := msg("c1", "a", "b", "pin")
	pin.Kind = pb.MessageKind_MESSAGE_KIND_PINNED
	pin.Event = &pb.MessageEvent{TargetSeq: 2}
	if _, err := s.Apply(ctx, store.Change{Event: pin, Pin: &store.PinChange{Seq: 2, By: "a", At: time.Now()}}); err != nil {
		t.Fatalf("Apply pin: %v", err)
	}
	// c1: 1..6 messages, 7 the pin event.
	if f, err := s.MessageFloor(ctx, "c1"); err != nil || f != 0 {
		t.Fatalf("MessageFloor before = %d, %v", f, err)
	}
	removed, more, err := s.ExpireBefore(ctx, "c1", 4, 2)
	if err != nil || !more || len(removed) != 2 || removed[0].Seq != 1 || removed[1].Seq != 2 {
		t.Fatalf("ExpireBefore(4, limit 2) = %v, %v, %v", removed, more, err)
	}
	if f, _ := s.MessageFloor(ctx, "c1"); f != 4 {
		t.Fatalf("floor after the first batch = %d, want 4", f)
	}
	if left, err := s.ExpiryUnfinished(ctx, "c1"); err != nil || !left {
		t.Fatalf("ExpiryUnfinished after the first batch = %v, %v, want true", left, err)
	}
	removed, more, err = s.ExpireBefore(ctx, "c1", 4, 2)
	if err != nil || more || len(removed) != 1 || removed[0].Seq != 3 {
		t.Fatalf("second batch = %v, %v, %v", removed, more, err)
	}
	for _, c := range []string{"c1", "c2", "nowhere"} {
		if left, err := s.ExpiryUnfinished(ctx, c); err != nil || left {
			t.Fatalf("ExpiryUnfinished(%s) after the last batch = %v, %v, want false", c, left, err)
		}
	}
	wantSeqs(t, "c1 after expiry", all(t, s, "c1"), []uint64{4, 5, 6, 7})
	if h, err := s.History(ctx, "c1", 0, 100); err != nil || len(h) != 4 || h[0].Seq != 4 {
		t.Fatalf("History after expiry: %d messages, %v", len(h), err)
	}
	if _, err := s.GetMessage(ctx, "c1", 2); err != store.ErrNotFound {
		t.Fatalf("GetMessage of an expired message: %v", err)
	}
	if n := lastSeq(t, s, "c1"); n != 7 {
		t.Fatalf("LastSeq moved: %d", n)
	}
	wantSeqs(t, "c2 untouched", all(t, s, "c2"), []uint64{1})
	if r, err := s.Reactions(ctx, "c1", []uint64{2}, "b"); err != nil || len(r) != 0 {
		t.Fatalf("reactions of an expired message: %v, %v", r, err)
	}
	// Reacting to it after it expired (it was reacted to before: a store
	// may remember it) finds no message.
	if res, err := s.React(ctx, []store.ReactionOp{{ConversationID: "c1", Seq: 2, UserID: "a", Emoji: "👍"}}); err != nil || !errors.Is(res[0].Err, store.ErrNotFound) {
		t.Fatalf("React on an expired message: %+v, %v", res, err)
	}
	if p, err := s.Pins(ctx, "c1"); err != nil || len(p) != 0 {
		t.Fatalf("pins of an expired message: %v, %v", p, err)
	}
	if m, err := s.Mentions(ctx, "b", "c1", 0, 10); err != nil || len(m) != 0 {
		t.Fatalf("mentions of an expired message: %v, %v", m, err)
	}
	if th, err := s.Threads(ctx, "c1", []uint64{1}); err != nil || len(th) != 0 {
		t.Fatalf("thread of an expired root: %v, %v", th, err)
	}
	// A lower floor changes nothing; a floor past the end is clamped.
	if removed, _, err := s.ExpireBefore(ctx, "c1", 2, 10); err != nil || len(removed) != 0 {
		t.Fatalf("lower floor: %v, %v", removed, err)
	}
	if f, _ := s.MessageFloor(ctx, "c1"); f != 4 {
		t.Fatalf("floor after a lower one = %d", f)
	}
	// The de-dup entry went with the message: a resend is a new message.
	if r := appendOK(t, s, msg("c1", "a", "b", "r0")); r[0].Duplicate || r[0].Msg.Seq != 8 {
		t.Fatalf("resend of an expired message's id: %+v", r[0])
	}
	if removed, _, err := s.ExpireBefore(ctx, "c1", 1000, 100); err != nil || len(removed) != 5 {
		t.Fatalf("expire all: %d, %v", len(removed), err)
	}
	if f, _ := s.MessageFloor(ctx, "c1"); f != 9 {
		t.Fatalf("floor clamped to LastSeq+1 = %d, want 9", f)
	}
	if r := appendOK(t, s, msg("c1", "a", "b", "after")); r[0].Msg.Seq != 9 {
		t.Fatalf("a message after expiring everything got seq %d, want 9", r[0].Msg.Seq)
	}
	if lg, ok := s.(store.Log); ok {
		entries, err := lg.LogAfter(ctx, 0, 1000, 0)
		if err != nil {
			t.Fatalf("LogAfter: %v", err)
		}
		for _, e := range entries {
			if e.Msg == nil {
				t.Fatalf("log entry %d of a deleted message", e.Pos)
			}
		}
		if len(entries) != 2 { // c2's message and c1's last
			t.Fatalf("log holds %d entries, want 2", len(entries))
		}
	}
	if err := s.ReclaimSpace(ctx, "c1", 9); err != nil {
		t.Fatalf("ReclaimSpace(c1): %v", err)
	}
	if err := s.ReclaimSpace(ctx, "", 0); err != nil {
		t.Fatalf("ReclaimSpace(): %v", err)
	}
	if removed, more, err := s.ExpireBefore(ctx, "nowhere", 10, 10); err != nil || more || len(removed) != 0 {
		t.Fatalf("ExpireBefore of an unknown conversation: %v, %v, %v", removed, more, err)
	}
}

// testBelowFloorGone: a message below the floor is gone as soon as the
// floor is raised, though a sweep deleting in batches has not deleted it
// yet: GetMessage, an edit, a recall and a reaction find no message, as
// for one never stored. A message at the floor is served as before.
func testBelowFloorGone(t *testing.T, s store.Store) {
	ctx := context.Background()
	var ms []*pb.Message
	for i := range 6 {
		ms = append(ms, msg("bf", "a", "b", fmt.Sprint("m", i)))
	}
	r := appendOK(t, s, ms...)
	if _, err := s.React(ctx, []store.ReactionOp{{ConversationID: "bf", Seq: 4, UserID: "b", Emoji: "👍"}}); err != nil {
		t.Fatalf("React: %v", err)
	}
	if _, more, err := s.ExpireBefore(ctx, "bf", 6, 2); err != nil || !more {
		t.Fatalf("first batch of ExpireBefore(6, limit 2): more %v, %v; want more", more, err)
	}
	// Seqs 4 and 5 are below the floor but not deleted yet (a store may
	// keep the first batch's too, until its sweep ends): what this tests.
	stored := map[uint64]bool{}
	for _, m := range all(t, s, "bf") {
		stored[m.Seq] = true
	}
	if !stored[4] || !stored[5] || !stored[6] {
		t.Fatalf("stored mid-sweep: %v; want seqs 4, 5 and 6 still stored", stored)
	}

	if _, err := s.GetMessage(ctx, "bf", 4); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetMessage below the floor mid-sweep: %v, want ErrNotFound", err)
	}
	edited := proto.Clone(r[3].Msg).(*pb.Message)
	edited.Payload, edited.EditedAt = []byte("edited"), 1700000001234
	editEv := event("bf", "a", "e1", pb.MessageKind_MESSAGE_KIND_EDIT, &pb.MessageEvent{TargetSeq: 4})
	if _, err := s.Apply(ctx, store.Change{Event: editEv, Update: edited}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("edit below the floor mid-sweep: %v, want ErrNotFound", err)
	}
	recalled := proto.Clone(r[4].Msg).(*pb.Message)
	recalled.Payload, recalled.ContentType, recalled.Recalled = nil, "", true
	recallEv := event("bf", "a", "r1", pb.MessageKind_MESSAGE_KIND_RECALL, &pb.MessageEvent{TargetSeq: 5})
	if _, err := s.Apply(ctx, store.Change{Event: recallEv, Update: recalled}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("recall below the floor mid-sweep: %v, want ErrNotFound", err)
	}
	if n := lastSeq(t, s, "bf"); n != 6 {
		t.Fatalf("LastSeq = %d after refused updates, want 6", n)
	}
	res, err := s.React(ctx, []store.ReactionOp{
		{ConversationID: "bf", Seq: 4, UserID: "a", Emoji: "👍"}, // reacted to before the floor rose
		{ConversationID: "bf", Seq: 5, UserID: "a", Emoji: "👍"},
		{ConversationID: "bf", Seq: 6, UserID: "a", Emoji: "👍"},
	})
	if err != nil || !errors.Is(res[0].Err, store.ErrNotFound) || !errors.Is(res[1].Err, store.ErrNotFound) || res[2].Err != nil {
		t.Fatalf("React below and at the floor mid-sweep: %+v, %v; want ErrNotFound, ErrNotFound, nil", res, err)
	}

	// At the floor: served, edited, recalled.
	if m := getMessage(t, s, "bf", 6); m.Seq != 6 {
		t.Fatalf("GetMessage at the floor: seq %d", m.Seq)
	}
	atFloor := proto.Clone(r[5].Msg).(*pb.Message)
	atFloor.Payload, atFloor.EditedAt = []byte("edited"), 1700000001234
	applyNew(t, s, store.Change{Event: event("bf", "a", "e2", pb.MessageKind_MESSAGE_KIND_EDIT, &pb.MessageEvent{TargetSeq: 6}), Update: atFloor}, 7)
	if got := getMessage(t, s, "bf", 6); !proto.Equal(got, atFloor) {
		t.Fatalf("edited message at the floor stored as %v, want %v", got, atFloor)
	}
	atFloor = proto.Clone(atFloor).(*pb.Message)
	atFloor.Payload, atFloor.ContentType, atFloor.Recalled = nil, "", true
	applyNew(t, s, store.Change{Event: event("bf", "a", "r2", pb.MessageKind_MESSAGE_KIND_RECALL, &pb.MessageEvent{TargetSeq: 6}), Update: atFloor}, 8)
}

// testDisappearing: ExpiringMessages lists stored messages by expiry up to
// a time; DeleteMessages deletes them once.
func testDisappearing(t *testing.T, s store.Store) {
	ctx := context.Background()
	base := time.UnixMilli(1_800_000_000_000)
	var ms []*pb.Message
	for i, off := range []int{30, 10, 0, 20} { // 0: does not disappear
		m := msg("d1", "a", "b", fmt.Sprint("d", i))
		if off > 0 {
			m.ExpiresAt = base.Add(time.Duration(off) * time.Second).UnixMilli()
		}
		ms = append(ms, m)
	}
	appendOK(t, s, ms...)
	got, err := s.ExpiringMessages(ctx, base.Add(20*time.Second), 10)
	if err != nil {
		t.Fatalf("ExpiringMessages: %v", err)
	}
	want := []store.MessageRef{{ConversationID: "d1", Seq: 2}, {ConversationID: "d1", Seq: 4}}
	if !slices.Equal(got, want) {
		t.Fatalf("ExpiringMessages(+20s) = %v, want %v", got, want)
	}
	if got, _ := s.ExpiringMessages(ctx, base.Add(time.Hour), 1); len(got) != 1 || got[0].Seq != 2 {
		t.Fatalf("ExpiringMessages limit 1 = %v", got)
	}
	m, err := s.GetMessage(ctx, "d1", 2)
	if err != nil || m.ExpiresAt != ms[1].ExpiresAt {
		t.Fatalf("stored expiry: %v, %v", m, err)
	}
	if _, err := s.React(ctx, []store.ReactionOp{{ConversationID: "d1", Seq: 2, UserID: "b", Emoji: "👍"}}); err != nil {
		t.Fatalf("React: %v", err)
	}
	done, err := s.DeleteMessages(ctx, append(want, store.MessageRef{ConversationID: "d1", Seq: 99}))
	if err != nil || !slices.Equal(done, want) {
		t.Fatalf("DeleteMessages = %v, %v", done, err)
	}
	if res, err := s.React(ctx, []store.ReactionOp{{ConversationID: "d1", Seq: 2, UserID: "a", Emoji: "👍"}}); err != nil || !errors.Is(res[0].Err, store.ErrNotFound) {
		t.Fatalf("React on a disappeared message: %+v, %v", res, err)
	}
	wantSeqs(t, "d1 after deleting", all(t, s, "d1"), []uint64{1, 3})
	if got, _ := s.ExpiringMessages(ctx, base.Add(time.Hour), 10); len(got) != 1 || got[0].Seq != 1 {
		t.Fatalf("ExpiringMessages after deleting = %v", got)
	}
	if done, err := s.DeleteMessages(ctx, want); err != nil || len(done) != 0 {
		t.Fatalf("DeleteMessages again = %v, %v", done, err)
	}
	if f, _ := s.MessageFloor(ctx, "d1"); f != 0 {
		t.Fatalf("DeleteMessages moved the floor to %d", f)
	}
	convs, err := s.StoredConversations(ctx, "", 10)
	if err != nil || !slices.Contains(convs, "d1") {
		t.Fatalf("StoredConversations = %v, %v", convs, err)
	}
	appendOK(t, s, msg("d2", "a", "b", "x2"), msg("d3", "a", "b", "x3"))
	var paged []string
	for after := ""; ; {
		page, err := s.StoredConversations(ctx, after, 1)
		if err != nil {
			t.Fatalf("StoredConversations: %v", err)
		}
		if len(page) == 0 {
			break
		}
		paged = append(paged, page...)
		after = page[len(page)-1]
	}
	slices.Sort(paged)
	if !slices.Equal(paged, []string{"d1", "d2", "d3"}) {
		t.Fatalf("StoredConversations paged = %v", paged)
	}
}

// testConcurrentExpire: two sweepers (two nodes) expiring one conversation
// at once, a deleter of single messages (disappearing messages, deletions
// for everyone) and sends to the conversation: every message below the
// floor is deleted exactly once between the three, and the sends are
// stored after it.
func testConcurrentExpire(t *testing.T, s store.Store) {
	ctx := context.Background()
	var ms []*pb.Message
	for i := range 200 {
		ms = append(ms, msg("cc", "a", "b", fmt.Sprint("m", i)))
	}
	appendOK(t, s, ms...)
	var mu sync.Mutex
	seen := map[uint64]int{}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for seq := uint64(150); seq >= 1; seq -= 3 {
			removed, err := s.DeleteMessages(ctx, []store.MessageRef{{ConversationID: "cc", Seq: seq}})
			if err != nil {
				t.Errorf("DeleteMessages: %v", err)
				return
			}
			mu.Lock()
			for _, r := range removed {
				seen[r.Seq]++
			}
			mu.Unlock()
		}
	}()
	go func() {
		defer wg.Done()
		for i := range 20 {
			if _, err := s.Append(ctx, []*pb.Message{msg("cc", "b", "a", fmt.Sprint("late", i))}); err != nil {
				t.Errorf("Append: %v", err)
				return
			}
		}
	}()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				removed, more, err := s.ExpireBefore(ctx, "cc", 151, 7)
				if err != nil {
					t.Errorf("ExpireBefore: %v", err)
					return
				}
				mu.Lock()
				for _, r := range removed {
					seen[r.Seq]++
				}
				mu.Unlock()
				if !more {
					return
				}
			}
		}()
	}
	wg.Wait()
	if len(seen) != 150 {
		t.Fatalf("%d messages deleted, want 150", len(seen))
	}
	for seq, n := range seen {
		if n != 1 || seq > 150 {
			t.Fatalf("seq %d deleted %d times", seq, n)
		}
	}
	var left []uint64
	for _, m := range all(t, s, "cc") {
		left = append(left, m.Seq)
	}
	if len(left) != 70 || left[0] != 151 || left[69] != 220 {
		t.Fatalf("left %v, want 151..220", left)
	}
}

// testOrphanedFiles: a file goes (OrphanedFiles, DeleteOrphanedFile) once
// the last stored message carrying it is deleted, by ExpireBefore or
// DeleteMessages, or recalled; a file still carried by any message is
// kept; a file carried again before its deletion is kept; the mark lasts
// until the deletion (a crash in between loses nothing).
func testOrphanedFiles(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, id := range []string{"f-shared", "f-keep", "f-again", "f-recall"} {
		f := store.File{ID: id, Owner: "a", Name: id, Size: 100, ContentType: "text/plain", BlobKey: "f/" + id, CreatedAt: time.Now()}
		if err := s.PutFile(ctx, f); err != nil {
			t.Fatalf("PutFile(%s): %v", id, err)
		}
	}
	if err := s.AttachFiles(ctx, []string{"f-shared", "f-keep", "f-again", "f-recall"}); err != nil {
		t.Fatalf("AttachFiles: %v", err)
	}
	carrying := func(conv string, ids ...string) *pb.Message {
		m := msg(conv, "a", "b", "")
		for _, id := range ids {
			m.Attachments = append(m.Attachments, &pb.Attachment{Id: id, Name: id, Size: 100})
		}
		return m
	}
	orphans := func(what string, want ...string) {
		t.Helper()
		fs, err := s.OrphanedFiles(ctx, 0, 100)
		if err != nil {
			t.Fatalf("OrphanedFiles (%s): %v", what, err)
		}
		var got []string
		for _, f := range fs {
			got = append(got, f.ID)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("OrphanedFiles (%s) = %v, want %v", what, got, want)
		}
	}
	exists := func(id string, want bool) {
		t.Helper()
		_, err := s.GetFile(ctx, id)
		if (err == nil) != want || (err != nil && !errors.Is(err, store.ErrNotFound)) {
			t.Fatalf("GetFile(%s) = %v, want found %v", id, err, want)
		}
	}
	appendOK(t, s, carrying("of1", "f-shared", "f-keep"))  // of1/1: disappears
	appendOK(t, s, carrying("of2", "f-shared"))            // of2/1: expires by floor
	appendOK(t, s, carrying("of3", "f-keep"))              // of3/1: never expires
	appendOK(t, s, carrying("of4", "f-again", "f-recall")) // of4/1
	orphans("all carried")

	if gone, err := s.DeleteMessages(ctx, []store.MessageRef{{ConversationID: "of1", Seq: 1}}); err != nil || len(gone) != 1 {
		t.Fatalf("DeleteMessages(of1/1) = %v, %v", gone, err)
	}
	orphans("after the first carrier of f-shared went") // both still carried
	if removed, _, err := s.ExpireBefore(ctx, "of2", 2, 10); err != nil || len(removed) != 1 {
		t.Fatalf("ExpireBefore(of2, 2) = %v, %v", removed, err)
	}
	orphans("after the second carrier went", "f-shared")
	orphaned := func(id string, want bool) {
		t.Helper()
		age, ok, err := s.FileOrphaned(ctx, id)
		if err != nil || ok != want || (ok && (age < -time.Second || age > time.Minute)) {
			t.Fatalf("FileOrphaned(%s) = %v, %v, %v; want orphaned %v, marked just now", id, age, ok, err, want)
		}
	}
	orphaned("f-shared", true)
	orphaned("f-keep", false) // marked when of1/1 went, but of3/1 carries it
	orphaned("no-such-file", false)
	// Too young a mark is not collected: a send that attached the file
	// before may still be committing.
	if fs, err := s.OrphanedFiles(ctx, time.Hour, 100); err != nil || len(fs) != 0 {
		t.Fatalf("OrphanedFiles(minAge 1h) = %v, %v; want none", fs, err)
	}
	orphans("asked again: the mark lasts until the deletion", "f-shared")
	_, before, _ := s.MediaUsage(ctx, "a")
	if ok, err := s.DeleteOrphanedFile(ctx, "f-shared"); err != nil || !ok {
		t.Fatalf("DeleteOrphanedFile(f-shared) = %v, %v", ok, err)
	}
	exists("f-shared", false)
	if _, after, _ := s.MediaUsage(ctx, "a"); after != before-100 {
		t.Fatalf("media usage %d after the deletion, want %d", after, before-100)
	}
	if ok, err := s.DeleteOrphanedFile(ctx, "f-keep"); err != nil || ok {
		t.Fatalf("DeleteOrphanedFile(f-keep, carried by of3/1) = %v, %v; want false", ok, err)
	}
	exists("f-keep", true)
	orphans("after the deletion")

	// A recall drops the recalled message's files.
	old := all(t, s, "of4")[0]
	rec := msg("of4", "a", "b", "")
	rec.Kind, rec.Event = pb.MessageKind_MESSAGE_KIND_RECALL, &pb.MessageEvent{TargetSeq: 1}
	upd := proto.Clone(old).(*pb.Message)
	upd.Recalled, upd.Payload, upd.ContentType, upd.Attachments = true, nil, "", nil
	if _, err := s.Apply(ctx, store.Change{Event: rec, Update: upd}); err != nil {
		t.Fatalf("Apply recall: %v", err)
	}
	orphans("after the recall", "f-again", "f-recall")
	// f-again is sent again before the sweeper deletes it: kept.
	orphaned("f-again", true)
	appendOK(t, s, carrying("of5", "f-again"))
	orphaned("f-again", false)
	if ok, err := s.DeleteOrphanedFile(ctx, "f-again"); err != nil || ok {
		t.Fatalf("DeleteOrphanedFile(f-again, carried again) = %v, %v; want false", ok, err)
	}
	exists("f-again", true)
	orphans("after f-again was sent again", "f-recall")
	if ok, err := s.DeleteOrphanedFile(ctx, "f-recall"); err != nil || !ok {
		t.Fatalf("DeleteOrphanedFile(f-recall) = %v, %v", ok, err)
	}
	orphans("at the end")
	exists("f-keep", true)
	exists("f-again", true)
}

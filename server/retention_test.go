package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// retentionFlow: alice sends bob ten messages with distinct words; an admin
// keeps the last three; after a sweep nothing older is served anywhere bob
// looks: sync from an old position, history, search, the conversation's
// unread count and first seq; and the policy change is in the audit log.
func retentionFlow(t *testing.T, ts *testServer, bleve bool) {
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	bob := ts.dialOnly(t, "bob", "b1", "phone")
	ctx := ctx10(t)
	var conv string
	for i := 1; i <= 10; i++ {
		ack, err := alice.SendText(ctx, "bob", fmt.Sprintf("word%d common", i))
		if err != nil {
			t.Fatal(err)
		}
		conv = ack.ConversationId
	}
	if bleve {
		// The index holds the old messages first, so forgetting is tested.
		waitFound(t, bob, "word2", conv+"#2")
	}
	adm := adminClient(ts)
	r, err := adm.SetRetention(ctx, conv, client.RetentionPolicy{Messages: 3})
	if err != nil || r.Policy == nil || r.Policy.Messages != 3 {
		t.Fatalf("SetRetention: %+v, %v", r, err)
	}
	sw, err := adm.SweepRetention(ctx)
	if err != nil || sw.Expired != 7 {
		t.Fatalf("sweep: %+v, %v", sw, err)
	}
	page, err := bob.SyncMessages(ctx, conv, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 3 || page.Messages[0].Seq != 8 || page.LastSeq != 10 {
		t.Fatalf("sync from 0 after expiry: %d messages from %v, last %d", len(page.Messages), page.Messages, page.LastSeq)
	}
	if page, err = bob.SyncMessages(ctx, conv, 2, 100); err != nil || len(page.Messages) != 3 || page.Messages[0].Seq != 8 {
		t.Fatalf("sync from below the floor: %v, %v", page, err)
	}
	if page, err = bob.History(ctx, conv, 0, 100); err != nil || len(page.Messages) != 3 || page.Messages[0].Seq != 8 {
		t.Fatalf("history: %v, %v", page, err)
	}
	if page, err = bob.History(ctx, conv, 8, 100); err != nil || len(page.Messages) != 0 {
		t.Fatalf("history below the floor: %v, %v", page, err)
	}
	list, err := bob.Conversations(ctx, 10, "")
	if err != nil || len(list.Conversations) != 1 {
		t.Fatalf("conversations: %v, %v", list, err)
	}
	if c := list.Conversations[0]; c.FirstSeq != 8 || c.UnreadCount != 3 {
		t.Fatalf("conversation: first_seq %d unread %d, want 8 and 3", c.FirstSeq, c.UnreadCount)
	}
	if got := found(t, bob, &pb.Search{Query: "word2"}); len(got) != 0 {
		t.Fatalf("search finds an expired message: %v", got)
	}
	if got := found(t, bob, &pb.Search{Query: "common"}); len(got) != 3 {
		if !bleve {
			t.Fatalf("search of the kept messages: %v", got)
		}
		waitFound(t, bob, "common", conv+"#8", conv+"#9", conv+"#10")
	}
	// Sending goes on above the floor.
	if ack, err := alice.SendText(ctx, "bob", "after"); err != nil || ack.Seq != 11 {
		t.Fatalf("send after expiry: %v, %v", ack, err)
	}
	if code, body := adminGet(t, ts.httpBase+"/v1/admin/audit"); code != 200 || !strings.Contains(body, "retention") {
		t.Fatalf("audit log (%d) has no retention entry: %s", code, body)
	}
}

func TestRetentionExpiresEverywhere(t *testing.T) {
	retentionFlow(t, startServer(t, nil), true)
}

func TestPGRetentionExpiresEverywhere(t *testing.T) {
	usePG := pgConfig(t)
	retentionFlow(t, startServer(t, usePG), false)
}

// A server default (keep the newest 2) applies to every conversation; a
// conversation's own policy (keep 4) replaces it.
func TestRetentionServerDefault(t *testing.T) {
	ts := startServer(t, func(c *server.Config) { c.RetentionMessages = 2 })
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	ctx := ctx10(t)
	convs := map[string]string{}
	for _, to := range []string{"bob", "carol"} {
		for i := 0; i < 6; i++ {
			ack, err := alice.SendText(ctx, to, "hi")
			if err != nil {
				t.Fatal(err)
			}
			convs[to] = ack.ConversationId
		}
	}
	adm := adminClient(ts)
	if _, err := adm.SetRetention(ctx, convs["carol"], client.RetentionPolicy{Messages: 4}); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.SweepRetention(ctx); err != nil {
		t.Fatal(err)
	}
	for to, want := range map[string]uint64{"bob": 5, "carol": 3} {
		r, err := adm.GetRetention(ctx, convs[to])
		if err != nil || r.FirstSeq != want || r.Default.Messages != 2 {
			t.Fatalf("%s: %+v, %v; want first seq %d", to, r, err, want)
		}
	}
	if _, err := adm.SetRetention(ctx, convs["bob"], client.RetentionPolicy{Days: -1}); !isHTTP(err, 400) {
		t.Fatalf("a negative policy: %v", err)
	}
}

// Disappearing messages: either side of a 1:1 sets the timer as an event;
// only messages sent after it carry an expiry; a value outside the offered
// ones is BAD_REQUEST; in a group a plain member is refused.
func TestDisappearingSetting(t *testing.T) {
	ts := startServer(t, nil)
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	bob := ts.dialOnly(t, "bob", "b1", "phone")
	ctx := ctx10(t)
	before, err := alice.SendText(ctx, "bob", "before")
	if err != nil {
		t.Fatal(err)
	}
	conv := before.ConversationId
	if _, err := bob.SetDisappearing(ctx, conv, 45*time.Second); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
		t.Fatalf("45 s timer: %v", err)
	}
	ev, err := bob.SetDisappearing(ctx, conv, 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	after, err := alice.SendText(ctx, "bob", "after")
	if err != nil {
		t.Fatal(err)
	}
	page, err := alice.SyncMessages(ctx, conv, 0, 10)
	if err != nil || len(page.Messages) != 3 {
		t.Fatalf("sync: %v, %v", page, err)
	}
	m0, m1, m2 := page.Messages[0], page.Messages[1], page.Messages[2]
	if m0.ExpiresAt != 0 || m1.Seq != ev.Seq || m1.Kind != pb.MessageKind_MESSAGE_KIND_DISAPPEARING_SET ||
		m1.Event.GetDisappearingSeconds() != 300 || m1.ExpiresAt != 0 {
		t.Fatalf("before and event: %v / %v", m0, m1)
	}
	if m2.Seq != after.Seq || m2.ExpiresAt != m2.ServerTime+300_000 {
		t.Fatalf("message after the event: expires %d, sent %d", m2.ExpiresAt, m2.ServerTime)
	}
	list, err := alice.Conversations(ctx, 10, "")
	if err != nil || client.Disappearing(list.Conversations[0]) != 5*time.Minute {
		t.Fatalf("conversation timer: %v, %v", list, err)
	}
	if _, err := alice.SetDisappearing(ctx, conv, 0); err != nil { // the other side turns it off
		t.Fatal(err)
	}
	if ack, err := alice.SendText(ctx, "bob", "off"); err != nil {
		t.Fatal(err)
	} else if m, err := alice.SyncMessages(ctx, conv, ack.Seq-1, 1); err != nil || m.Messages[0].ExpiresAt != 0 {
		t.Fatalf("after turning it off: %v, %v", m, err)
	}

	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "g", UserIds: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bob.SetDisappearing(ctx, g.ConversationId, time.Hour); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("a plain member sets the timer: %v", err)
	}
	if _, err := alice.SetDisappearing(ctx, g.ConversationId, time.Hour); err != nil {
		t.Fatalf("the owner sets the timer: %v", err)
	}
	carol := ts.dialOnly(t, "carol", "c1", "phone")
	if _, err := carol.SetDisappearing(ctx, conv, time.Hour); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("a stranger sets a 1:1's timer: %v", err)
	}
}

// A disappearing message is not served once its time has passed, before
// and after the sweeper deleted it: not in sync, history, search or the
// unread count. Takes the shortest offered timer (30 s) of real time.
func TestDisappearingMessagesExpire(t *testing.T) {
	t.Parallel()
	ts := startServer(t, func(c *server.Config) { c.RetentionSweepInterval = time.Hour })
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	bob := ts.dialOnly(t, "bob", "b1", "phone")
	ctx := ctx10(t)
	first, err := alice.SendText(ctx, "bob", "kept forever")
	if err != nil {
		t.Fatal(err)
	}
	conv := first.ConversationId
	if _, err := alice.SetDisappearing(ctx, conv, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	gone, err := alice.SendText(ctx, "bob", "vanishing secret")
	if err != nil {
		t.Fatal(err)
	}
	waitFound(t, bob, "secret", fmt.Sprintf("%s#%d", conv, gone.Seq))
	page, err := bob.SyncMessages(ctx, conv, 0, 10)
	if err != nil || len(page.Messages) != 3 {
		t.Fatalf("before expiry: %v, %v", page, err)
	}
	exp := client.ExpiresAt(page.Messages[2])
	time.Sleep(time.Until(exp) + 100*time.Millisecond)
	check := func(when string) {
		t.Helper()
		ctx := ctx10(t)
		for _, get := range []func() (*pb.MessagePage, error){
			func() (*pb.MessagePage, error) { return bob.SyncMessages(ctx, conv, 0, 10) },
			func() (*pb.MessagePage, error) { return bob.History(ctx, conv, 0, 10) },
		} {
			p, err := get()
			if err != nil || len(p.Messages) != 2 || p.Messages[1].Kind != pb.MessageKind_MESSAGE_KIND_DISAPPEARING_SET {
				t.Fatalf("%s: %v, %v", when, p, err)
			}
		}
		if got := found(t, bob, &pb.Search{Query: "secret"}); len(got) != 0 {
			t.Fatalf("%s: search finds %v", when, got)
		}
		list, err := bob.Conversations(ctx, 10, "")
		if err != nil || list.Conversations[0].UnreadCount != 1 {
			t.Fatalf("%s: unread count %v, %v; want 1", when, list, err)
		}
	}
	check("expired, not swept")
	sw, err := adminClient(ts).SweepRetention(ctx10(t))
	if err != nil || sw.Disappeared != 1 {
		t.Fatalf("sweep: %+v, %v", sw, err)
	}
	check("swept")
}

// TestFilesOfDisappearedMessagesAreDeleted: alice sends bob two files in a
// conversation with disappearing messages, and one of them to carol too in
// a conversation without. Once bob's messages expired and were swept, the
// file only they carried is gone (its URL, its record, its bytes in the
// media store, alice's usage); the one carol's message still carries is
// kept and downloads.
func TestFilesOfDisappearedMessagesAreDeleted(t *testing.T) {
	t.Parallel()
	filesFlow(t, startServer(t, func(c *server.Config) {
		c.RetentionSweepInterval = time.Hour
		server.SetMediaOrphanGraceForTest(c, orphanGrace)
	}))
}

// orphanGrace is the tests' media orphan grace: a file no message carries
// any more may be sent again for a while; its bytes go once it is older.
const orphanGrace = 2 * time.Second

func TestPGFilesOfDisappearedMessagesAreDeleted(t *testing.T) {
	t.Parallel()
	usePG := pgConfig(t)
	filesFlow(t, startServer(t, func(c *server.Config) {
		usePG(c)
		c.RetentionSweepInterval = time.Hour
		server.SetMediaOrphanGraceForTest(c, orphanGrace)
	}))
}

func filesFlow(t *testing.T, ts *testServer) {
	ctx := ctx10(t)
	tok := ts.mint(t, "alice")
	alice, _ := ts.connectToken(t, tok, "a1", "web", transports[0])
	bob := ts.dialOnly(t, "bob", "b1", "phone")
	up := func(text string) *pb.Attachment {
		t.Helper()
		data := []byte(text)
		a, err := ts.http().UploadFile(ctx, tok, "t.txt", bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	only, shared := up("carried by disappearing messages only"), up("carried by carol's message too")
	first, err := alice.SendText(ctx, "bob", "hello")
	if err != nil {
		t.Fatal(err)
	}
	conv := first.ConversationId
	if _, err := alice.SetDisappearing(ctx, conv, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, a := range []*pb.Attachment{only, shared} {
		if _, err := alice.Send(ctx, &pb.Send{To: "bob", Attachments: []*pb.Attachment{a}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := alice.Send(ctx, &pb.Send{To: "carol", Attachments: []*pb.Attachment{shared}}); err != nil {
		t.Fatal(err)
	}
	onlyURL, err := alice.FileURL(ctx, only.Id, "", 0, false)
	if err != nil {
		t.Fatal(err)
	}
	blobs := func(id string) int { // files of the media store named after id
		t.Helper()
		n := 0
		err := filepath.WalkDir(filepath.Join(ts.cfg.DataDir, "media"), func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.Contains(d.Name(), id) {
				n++
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if blobs(only.Id) == 0 || blobs(shared.Id) == 0 {
		t.Fatalf("the media store holds no bytes of the files (layout changed?)")
	}
	page, err := bob.SyncMessages(ctx, conv, 0, 10)
	if err != nil || len(page.Messages) != 4 {
		t.Fatalf("bob's messages: %v, %v", page, err)
	}
	time.Sleep(time.Until(client.ExpiresAt(page.Messages[3])) + 100*time.Millisecond)
	sw, err := adminClient(ts).SweepRetention(ctx10(t))
	if err != nil || sw.Disappeared != 2 || sw.Files != 0 {
		t.Fatalf("sweep: %+v, %v; want 2 messages and no file yet (within the grace)", sw, err)
	}
	time.Sleep(orphanGrace)
	sw, err = adminClient(ts).SweepRetention(ctx10(t))
	if err != nil || sw.Files != 1 {
		t.Fatalf("sweep after the grace: %+v, %v; want 1 file", sw, err)
	}
	ctx = ctx10(t)
	if status, _, _ := ts.fetch(t, onlyURL.Url, ""); status != http.StatusNotFound {
		t.Fatalf("the deleted file's URL: %d, want 404", status)
	}
	if _, err := alice.FileURL(ctx, only.Id, "", 0, false); err == nil {
		t.Fatalf("a URL for the deleted file was signed")
	}
	if n := blobs(only.Id); n != 0 {
		t.Fatalf("%d blobs of the deleted file remain in the media store", n)
	}
	u, err := alice.FileURL(ctx, shared.Id, "", 0, false)
	if err != nil {
		t.Fatalf("the file carol's message carries: %v", err)
	}
	if status, _, body := ts.fetch(t, u.Url, ""); status != http.StatusOK || string(body) != "carried by carol's message too" {
		t.Fatalf("the kept file: %d %q", status, body)
	}
	if usage, err := adminClient(ts).MediaUsage(ctx, "alice"); err != nil || usage.Files != 1 {
		t.Fatalf("alice's usage: %+v, %v; want 1 file", usage, err)
	}
	// A sweep with nothing new deletes nothing more.
	if sw, err := adminClient(ts).SweepRetention(ctx); err != nil || sw.Files != 0 || blobs(shared.Id) == 0 {
		t.Fatalf("second sweep: %+v, %v", sw, err)
	}
}

// timerFailStore fails reads of disappearing-message timers while armed.
type timerFailStore struct {
	store.Store
	armed atomic.Bool
}

func (s *timerFailStore) GetSetting(ctx context.Context, key string) ([]byte, error) {
	if s.armed.Load() && strings.HasPrefix(key, "retention/disappearing/") {
		return nil, errors.New("injected: settings unreadable")
	}
	return s.Store.GetSetting(ctx, key)
}

// A send into a disappearing conversation whose timer cannot be read fails
// with UNAVAILABLE (the client retries) instead of being stored for good
// without an expiry; the retry, once the store answers, carries it.
func TestDisappearingFailsClosed(t *testing.T) {
	t.Parallel()
	st := &timerFailStore{}
	ts := startServer(t, func(c *server.Config) {
		server.SetStoreWrapForTest(c, func(inner store.Store) store.Store { st.Store = inner; return st })
	})
	alice, _, err := dialRecorded(t, client.Options{Addr: ts.wsURL, Token: ts.mint(t, "alice"), DeviceID: "a1", DeviceType: "phone", MaxSendAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctx10(t)
	first, err := alice.SendText(ctx, "bob", "hello")
	if err != nil {
		t.Fatal(err)
	}
	conv := first.ConversationId
	if _, err := alice.SetDisappearing(ctx, conv, time.Hour); err != nil {
		t.Fatal(err)
	}
	st.armed.Store(true)
	// The node trusts its cached timer for a few seconds: send until the
	// read that fails comes.
	var stored []uint64
	var refused *pb.Send
	for deadline := time.Now().Add(8 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		s := &pb.Send{To: "bob", ContentType: "text", Payload: []byte("meant to disappear")}
		ack, err := alice.Send(ctx10(t), s)
		if client.IsCode(err, pb.ErrorCode_ERROR_CODE_UNAVAILABLE) {
			refused = s
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, ack.Seq)
	}
	st.armed.Store(false)
	if refused == nil {
		t.Fatal("no send failed while the timer could not be read")
	}
	ack, err := alice.Send(ctx, refused) // the same client_msg_id
	if err != nil || ack.Duplicate {
		t.Fatalf("retry: %v, %v", ack, err)
	}
	page, err := alice.SyncMessages(ctx, conv, first.Seq+1, 1000) // after the timer's event
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != len(stored)+1 {
		t.Fatalf("%d messages stored, want %d", len(page.Messages), len(stored)+1)
	}
	for _, m := range page.Messages {
		if m.ExpiresAt != m.ServerTime+3_600_000 {
			t.Fatalf("message %d stored with expiry %d (sent %d): it would be kept for good", m.Seq, m.ExpiresAt, m.ServerTime)
		}
	}
}

// orphanHoldStore holds the media collector between finding the files no
// message carries and deleting them, while armed.
type orphanHoldStore struct {
	store.Store
	armed   atomic.Bool
	held    chan []string // the files found, once
	release chan struct{}
}

func (s *orphanHoldStore) OrphanedFiles(ctx context.Context, minAge time.Duration, limit int) ([]store.File, error) {
	fs, err := s.Store.OrphanedFiles(ctx, minAge, limit)
	if len(fs) > 0 && s.armed.CompareAndSwap(true, false) {
		var ids []string
		for _, f := range fs {
			ids = append(ids, f.ID)
		}
		s.held <- ids
		<-s.release
	}
	return fs, err
}

// TestFileSentAgainDuringSweep: a file whose only message was recalled can
// be sent again within the grace, and is then kept; once the grace has
// passed, a send of it racing the sweep that deletes it is refused, never
// stored with an attachment whose bytes the sweep deletes.
func TestFileSentAgainDuringSweep(t *testing.T) {
	t.Parallel()
	st := &orphanHoldStore{held: make(chan []string, 1), release: make(chan struct{})}
	ts := startServer(t, func(c *server.Config) {
		c.RetentionSweepInterval = time.Hour
		server.SetMediaOrphanGraceForTest(c, orphanGrace)
		server.SetStoreWrapForTest(c, func(inner store.Store) store.Store { st.Store = inner; return st })
	})
	ctx := ctx10(t)
	tok := ts.mint(t, "alice")
	alice, _ := ts.connectToken(t, tok, "a1", "web", transports[0])
	data := []byte("sent, recalled, sent again")
	file, err := ts.http().UploadFile(ctx, tok, "t.txt", bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	sendFile := func() (*pb.SendAck, error) {
		return alice.Send(ctx10(t), &pb.Send{To: "bob", Attachments: []*pb.Attachment{{Id: file.Id}}})
	}
	recall := func(ack *pb.SendAck) {
		t.Helper()
		if _, err := alice.Recall(ctx10(t), ack.ConversationId, ack.Seq); err != nil {
			t.Fatal(err)
		}
	}
	downloads := func(what string) {
		t.Helper()
		u, err := alice.FileURL(ctx10(t), file.Id, "", 0, false)
		if err != nil {
			t.Fatalf("%s: URL: %v", what, err)
		}
		if status, _, body := ts.fetch(t, u.Url, ""); status != http.StatusOK || !bytes.Equal(body, data) {
			t.Fatalf("%s: download %d %q", what, status, body)
		}
	}

	// Recalled, then sent again at once (a typo fixed): kept.
	first, err := sendFile()
	if err != nil {
		t.Fatal(err)
	}
	recall(first)
	if sw, err := adminClient(ts).SweepRetention(ctx10(t)); err != nil || sw.Files != 0 {
		t.Fatalf("sweep right after the recall: %+v, %v; want no file deleted", sw, err)
	}
	again, err := sendFile()
	if err != nil {
		t.Fatalf("sending the file again within the grace: %v", err)
	}
	time.Sleep(orphanGrace)
	if sw, err := adminClient(ts).SweepRetention(ctx10(t)); err != nil || sw.Files != 0 {
		t.Fatalf("sweep once the file is carried again: %+v, %v", sw, err)
	}
	downloads("carried again")

	// Recalled again and left past the grace: a send of it while the
	// sweep is between finding it and deleting it.
	recall(again)
	time.Sleep(orphanGrace)
	st.armed.Store(true)
	swept := make(chan error, 1)
	go func() {
		_, err := adminClient(ts).SweepRetention(context.Background())
		swept <- err
	}()
	if ids := <-st.held; len(ids) != 1 || ids[0] != file.Id {
		t.Fatalf("the sweep found %v, want the file", ids)
	}
	ack, sendErr := sendFile()
	close(st.release)
	if err := <-swept; err != nil {
		t.Fatal(err)
	}
	if sendErr == nil {
		// Stored: then its bytes must be there.
		downloads(fmt.Sprintf("sent again during the sweep (seq %d)", ack.Seq))
		return
	}
	if !client.IsCode(sendErr, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED) {
		t.Fatalf("send during the sweep: %v", sendErr)
	}
	if _, err := alice.FileURL(ctx10(t), file.Id, "", 0, false); err == nil {
		t.Fatal("the swept file still signs a URL")
	}
}

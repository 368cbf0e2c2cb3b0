// Package migratetest seeds a store with every record kind through the
// store.Store interface, and checks that another store reads back the
// same, through the same interface. The migration tests (internal/migrate,
// server, cmd/parley) use it; a new record kind gets a few lines in Seed
// and in Check.
package migratetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Conversations seeded by Seed.
const (
	Direct = "d:alice:bob" // 1:1, with a RaiseSeq gap, an edit and a recall
	Group  = "g:team"      // a group: members past and current, threads, mentions, pins, reactions
	Fading = "g:fading"    // retention: a floor above expired messages, and disappearing messages
)

// Users seeded by Seed.
var Users = []string{"alice", "bob", "carol", "dave"}

// at is a fixed time with microseconds (PostgreSQL's precision).
func at(minutes int) time.Time {
	return time.Date(2026, 3, 4, 5, 6, 7, 123456000, time.UTC).Add(time.Duration(minutes) * time.Minute)
}

func msg(conv, from, to, cmid, text string) *pb.Message {
	return &pb.Message{ConversationId: conv, From: from, To: to, ClientMsgId: cmid, ContentType: "text/plain",
		Payload: []byte(text), ServerTime: at(0).UnixMilli(), Kind: pb.MessageKind_MESSAGE_KIND_NORMAL}
}

// Seed writes every record kind into s. Times are in the future where they
// must not expire (revoked tokens).
func Seed(t testing.TB, s store.Store) {
	t.Helper()
	ctx := context.Background()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("seed: %s: %v", what, err)
		}
	}
	for i, u := range Users {
		must("create user", s.CreateUser(ctx, store.User{ID: u, NameKey: u, PasswordHash: "hash-" + u, CreatedAt: at(i)}))
	}
	must("update user", s.UpdateUser(ctx, store.User{ID: "alice", PasswordHash: "hash-alice", TokenEpoch: 3, CreatedAt: at(0)}))
	must("update user", s.UpdateUser(ctx, store.User{ID: "carol", PasswordHash: "hash-carol", ShadowMuted: true, Disabled: true, CreatedAt: at(2)}))
	must("update user", s.UpdateUser(ctx, store.User{ID: "dave", PasswordHash: "hash-dave", Bot: true, CreatedAt: at(3)}))
	must("revoke", s.RevokeToken(ctx, "token-1", time.Now().Add(240*time.Hour).Truncate(time.Microsecond)))

	// 1:1: seqs 1-3, a gap to 10, then 11-12; an edit of 1 and a recall of 2.
	app := func(ms ...*pb.Message) []store.AppendResult {
		t.Helper()
		res, err := s.Append(ctx, ms)
		must("append", err)
		return res
	}
	app(msg(Direct, "alice", "bob", "a-1", "hello bob"), msg(Direct, "bob", "alice", "b-1", "hi alice"),
		msg(Direct, "alice", "bob", "", "no client id"))
	must("raise seq", s.RaiseSeq(ctx, Direct, 10))
	m1, err := s.GetMessage(ctx, Direct, 1)
	must("get", err)
	m1.Payload, m1.EditedAt = []byte("hello bob, edited"), at(5).UnixMilli()
	edit := msg(Direct, "alice", "bob", "a-edit", "")
	edit.Kind = pb.MessageKind_MESSAGE_KIND_EDIT
	_, err = s.Apply(ctx, store.Change{Event: edit, Update: m1})
	must("edit", err)
	m2, err := s.GetMessage(ctx, Direct, 2)
	must("get", err)
	m2.Payload, m2.Recalled = nil, true
	recall := msg(Direct, "bob", "alice", "b-recall", "")
	recall.Kind = pb.MessageKind_MESSAGE_KIND_RECALL
	_, err = s.Apply(ctx, store.Change{Event: recall, Update: m2})
	must("recall", err)

	// Group: created with three members, carol leaves; messages with
	// mentions, a thread, a pin.
	created := msg(Group, "alice", "", "g-create", "")
	created.Kind = pb.MessageKind_MESSAGE_KIND_GROUP_CREATED
	_, err = s.Apply(ctx, store.Change{Event: created, Joined: true,
		Group: &store.Group{ConversationID: Group, Name: "Team", AvatarURL: "https://example.com/a.png", Announcement: "welcome",
			Owner: "alice", OpenJoin: true, MembersMentionAll: true, CreatedAt: at(1), AddPolicy: 1, HistoryVisibility: 1},
		Members: []store.Member{{UserID: "alice", Role: pb.GroupRole_GROUP_ROLE_OWNER, JoinedAt: at(1)},
			{UserID: "bob", Role: pb.GroupRole_GROUP_ROLE_MEMBER, JoinedAt: at(1), MutedUntil: at(60)},
			{UserID: "carol", Role: pb.GroupRole_GROUP_ROLE_ADMIN, JoinedAt: at(1)}}})
	must("create group", err)
	root := msg(Group, "alice", "", "g-1", "meeting at noon @bob @all")
	root.Mentions, root.MentionAll = []string{"bob"}, true
	app(root, msg(Group, "bob", "", "g-2", "ok"))
	rep := msg(Group, "carol", "", "g-3", "in the thread")
	rep.ThreadRoot = 2
	app(rep)
	left := msg(Group, "carol", "", "g-leave", "")
	left.Kind = pb.MessageKind_MESSAGE_KIND_MEMBERS_REMOVED
	_, err = s.Apply(ctx, store.Change{Event: left, Members: []store.Member{{UserID: "carol", Role: pb.GroupRole_GROUP_ROLE_ADMIN,
		JoinedAt: at(1), Left: true}}})
	must("leave", err)
	pin := msg(Group, "alice", "", "g-pin", "")
	pin.Kind = pb.MessageKind_MESSAGE_KIND_PINNED
	_, err = s.Apply(ctx, store.Change{Event: pin, Pin: &store.PinChange{Seq: 2, By: "alice", At: at(7)}})
	must("pin", err)
	res, err := s.React(ctx, []store.ReactionOp{
		{ConversationID: Group, Seq: 2, UserID: "bob", Emoji: "👍"},
		{ConversationID: Group, Seq: 2, UserID: "alice", Emoji: "👍"},
		{ConversationID: Group, Seq: 2, UserID: "alice", Emoji: "🎉"},
		{ConversationID: Group, Seq: 3, UserID: "alice", Emoji: "❤️"},
		{ConversationID: Group, Seq: 3, UserID: "alice", Emoji: "❤️", Remove: true}, // leaves an empty row
	})
	must("react", err)
	for _, r := range res {
		must("react op", r.Err)
	}

	must("cursors", s.SetCursors(ctx, []store.Cursor{{ConversationID: Direct, UserID: "bob", Delivered: 11, Read: 3},
		{ConversationID: Group, UserID: "bob", Delivered: 4, Read: 4}}))
	must("settings", s.SetConversationSettings(ctx, "alice", Group, store.ConversationSettings{Pinned: true, Muted: true, ClearedSeq: 1}))
	must("hide", s.HideMessages(ctx, "alice", Direct, []uint64{3, 11}))
	must("contact", s.PutContact(ctx, "alice", store.Contact{UserID: "bob", State: pb.ContactState_CONTACT_STATE_FRIEND, Note: "from work", UpdatedAt: at(8)}))
	must("block", s.SetBlocked(ctx, "alice", "dave", true))
	must("last seen", s.SetLastSeen(ctx, "bob", at(9)))
	must("push", s.PutPushTarget(ctx, store.PushTarget{UserID: "bob", DeviceID: "phone", Kind: "webpush", Token: "https://push.example/x",
		P256dh: "p", Auth: "a", TokenID: "tid", UpdatedAt: at(10)}))
	must("file", s.PutFile(ctx, store.File{ID: "file-1", Owner: "alice", Name: "a.png", Size: 1234, ContentType: "image/png", Width: 10,
		Height: 20, Blurhash: "LEHV6n", BlobKey: "blob/1", ThumbKey: "thumb/1", CreatedAt: at(11)}))
	must("file", s.PutFile(ctx, store.File{ID: "file-2", Owner: "alice", Name: "b.mp4", Size: 99, ContentType: "video/mp4", DurationMs: 3000,
		BlobKey: "blob/2", CreatedAt: at(12)}))
	must("attach", s.AttachFiles(ctx, []string{"file-1"}))
	reported, err := s.GetMessage(ctx, Group, 3)
	must("get", err)
	_, _, err = s.PutReport(ctx, store.Report{ID: "rep-1", Reporter: "bob", ConversationID: Group, Seq: 3, Reason: "spam", Note: "ads",
		Message: reported, CreatedAt: at(13), Status: store.ReportOpen})
	must("report", err)
	_, _, err = s.PutReport(ctx, store.Report{ID: "rep-2", Reporter: "alice", ConversationID: Direct, Seq: 11, Reason: "abuse",
		CreatedAt: at(14), Status: store.ReportOpen})
	must("report", err)
	must("close report", s.CloseReport(ctx, "rep-2", store.ReportDismissed, "admin", "nothing there", at(15)))
	for i := range 3 {
		_, err := s.AppendAudit(ctx, store.AuditEntry{Time: at(20 + i), Actor: "admin", Action: "user.ban", Target: "dave", Detail: fmt.Sprintf(`{"n":%d}`, i)})
		must("audit", err)
	}
	must("setting", s.PutSetting(ctx, "retention", []byte{0, 1, 2, 0xff}))

	// Retention: seqs 1-2 expired under a floor of 3; 4 and 5 disappear
	// (one already due, one in the future).
	app(msg(Fading, "alice", "", "f-1", "old"), msg(Fading, "bob", "", "f-2", "older"), msg(Fading, "alice", "", "f-3", "kept"))
	due, later := msg(Fading, "bob", "", "f-4", "due"), msg(Fading, "bob", "", "f-5", "later")
	due.ExpiresAt, later.ExpiresAt = at(30).UnixMilli(), time.Now().Add(240*time.Hour).UnixMilli()
	due.Attachments = []*pb.Attachment{{Id: "file-1", Name: "a.png", Size: 1234, ContentType: "image/png"}} // carried by it alone
	app(due, later)
	removed, _, err := s.ExpireBefore(ctx, Fading, 3, 100)
	must("expire", err)
	if len(removed) != 2 {
		t.Fatalf("seed: expire below 3 removed %v", removed)
	}
	app(msg(Direct, "bob", "alice", "b-2", "last one"))

	// End-to-end encryption: key packages (one-time, in order, and a last
	// resort) and an encrypted group's epoch.
	_, err = s.PutKeyPackages(ctx, "bob", "phone", [][]byte{{1, 0, 0xff}, {2}, {3}}, []byte("last"), store.KeyPackageLimits{PerDevice: 200, Devices: 20})
	must("key packages", err)
	_, err = s.PutKeyPackages(ctx, "carol", "web", nil, []byte("carol-last"), store.KeyPackageLimits{PerDevice: 200, Devices: 20})
	must("key packages", err)
	_, err = s.Apply(ctx, store.Change{Event: msg(MLSGroup, "alice", "", "mls-0", "created"), MLS: &store.MLSStep{Create: true}})
	must("mls create", err)
	_, err = s.Apply(ctx, store.Change{Event: msg(MLSGroup, "alice", "", "mls-1", "commit"), MLS: &store.MLSStep{Epoch: 0}})
	must("mls commit", err)
}

// MLSGroup is Seed's encrypted group.
const MLSGroup = "g:mls"

// dump is a comparable form of v (protobuf messages' exported fields
// included, their internal state not).
func dump(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("dump %T: %v", v, err)
	}
	// An empty list or map reads as nil from one store and empty from the
	// other: both are "none".
	return strings.NewReplacer("null", "[]", "{}", "[]").Replace(string(b))
}

// Check compares everything Seed wrote (and what the stores made of it)
// as want and got read it, through store.Store.
func Check(t testing.TB, want, got store.Store) {
	t.Helper()
	ctx := context.Background()
	same := func(what string, read func(s store.Store) (any, error)) {
		t.Helper()
		w, werr := read(want)
		g, gerr := read(got)
		if ws, gs := dump(t, []any{w, fmt.Sprint(werr)}), dump(t, []any{g, fmt.Sprint(gerr)}); ws != gs {
			t.Errorf("%s:\n source %s\n target %s", what, ws, gs)
		}
	}
	for _, u := range append(Users, "nobody") {
		same("GetUser "+u, func(s store.Store) (any, error) { return s.GetUser(ctx, u) })
		same("UserByName "+u, func(s store.Store) (any, error) { return s.UserByName(ctx, u) })
		same("Conversations "+u, func(s store.Store) (any, error) { return s.Conversations(ctx, u) })
		same("UserStorage "+u, func(s store.Store) (any, error) { return s.UserStorage(ctx, u) })
		same("Contacts "+u, func(s store.Store) (any, error) { return s.Contacts(ctx, u) })
		same("Blocked "+u, func(s store.Store) (any, error) { return s.Blocked(ctx, u) })
		same("LastSeen "+u, func(s store.Store) (any, error) { return s.LastSeen(ctx, u) })
		same("PushTargets "+u, func(s store.Store) (any, error) { return s.PushTargets(ctx, u) })
		same("MediaUsage "+u, func(s store.Store) (any, error) {
			f, b, err := s.MediaUsage(ctx, u)
			return []int64{f, b}, err
		})
		for _, c := range []string{Direct, Group} {
			same("GetCursor "+c+" "+u, func(s store.Store) (any, error) { return s.GetCursor(ctx, c, u) })
			same("GetMember "+c+" "+u, func(s store.Store) (any, error) { return s.GetMember(ctx, c, u) })
			same("settings "+c+" "+u, func(s store.Store) (any, error) { return s.GetConversationSettings(ctx, u, c) })
			same("hidden "+c+" "+u, func(s store.Store) (any, error) { return s.HiddenMessages(ctx, u, c, 0, 100) })
			same("Mentions "+c+" "+u, func(s store.Store) (any, error) { return s.Mentions(ctx, u, c, 0, 100) })
			same("Reactions "+c+" "+u, func(s store.Store) (any, error) {
				return s.Reactions(ctx, c, []uint64{1, 2, 3, 4, 5, 6, 7}, u)
			})
			same("InThread "+c+" "+u, func(s store.Store) (any, error) { return s.InThread(ctx, c, 2, u) })
		}
	}
	same("ListUsers", func(s store.Store) (any, error) { return s.ListUsers(ctx, store.ListQuery{Limit: 100}) })
	same("TokenRevoked", func(s store.Store) (any, error) { return s.TokenRevoked(ctx, "token-1") })
	for _, c := range []string{Direct, Group} {
		same("Messages "+c, func(s store.Store) (any, error) { return s.Messages(ctx, c, 0, 100) })
		same("History "+c, func(s store.Store) (any, error) { return s.History(ctx, c, 0, 100) })
		same("LastSeq "+c, func(s store.Store) (any, error) { return s.LastSeq(ctx, c) })
		same("Cursors "+c, func(s store.Store) (any, error) { return s.Cursors(ctx, c) })
		same("GetGroup "+c, func(s store.Store) (any, error) { return s.GetGroup(ctx, c) })
		same("Members "+c, func(s store.Store) (any, error) { return s.Members(ctx, c, "", 100) })
		same("Pins "+c, func(s store.Store) (any, error) { return s.Pins(ctx, c) })
		same("Threads "+c, func(s store.Store) (any, error) { return s.Threads(ctx, c, []uint64{1, 2, 3}) })
		same("ThreadMessages "+c, func(s store.Store) (any, error) { return s.ThreadMessages(ctx, c, 2, 0, 100) })
		same("ReactionChanges "+c, func(s store.Store) (any, error) { return s.ReactionChanges(ctx, c, 0, 100) })
		same("ReactionVersion "+c, func(s store.Store) (any, error) { return s.ReactionVersion(ctx, c) })
	}
	for _, f := range []string{"file-1", "file-2"} {
		same("GetFile "+f, func(s store.Store) (any, error) { return s.GetFile(ctx, f) })
	}
	same("UnattachedFiles", func(s store.Store) (any, error) { return s.UnattachedFiles(ctx, at(1000), 100) })
	for _, r := range []string{"rep-1", "rep-2"} {
		same("GetReport "+r, func(s store.Store) (any, error) { return s.GetReport(ctx, r) })
	}
	for _, st := range []store.ReportStatus{0, store.ReportOpen, store.ReportDismissed} {
		same(fmt.Sprint("Reports ", st), func(s store.Store) (any, error) { return s.Reports(ctx, st, "", 100) })
	}
	same("AuditLog", func(s store.Store) (any, error) { return s.AuditLog(ctx, 0, 100) })
	same("Messages "+Fading, func(s store.Store) (any, error) { return s.Messages(ctx, Fading, 0, 100) })
	same("LastSeq "+Fading, func(s store.Store) (any, error) { return s.LastSeq(ctx, Fading) })
	for _, c := range []string{Direct, Group, Fading} {
		same("MessageFloor "+c, func(s store.Store) (any, error) { return s.MessageFloor(ctx, c) })
	}
	same("ExpiringMessages now", func(s store.Store) (any, error) { return s.ExpiringMessages(ctx, time.Now(), 100) })
	same("ExpiringMessages later", func(s store.Store) (any, error) {
		return s.ExpiringMessages(ctx, time.Now().Add(480*time.Hour), 100)
	})
	same("GetSetting", func(s store.Store) (any, error) { return s.GetSetting(ctx, "retention") })
	same("ListGroups", func(s store.Store) (any, error) { return s.ListGroups(ctx, store.ListQuery{Limit: 100}) })
	same("MLSEpoch", func(s store.Store) (any, error) {
		e, ok, err := s.MLSEpoch(ctx, MLSGroup)
		return []any{e, ok}, err
	})
	for _, u := range []string{"bob", "carol"} {
		for _, d := range []string{"phone", "web"} {
			same("KeyPackageCount "+u+" "+d, func(s store.Store) (any, error) {
				n, lr, err := s.KeyPackageCount(ctx, u, d)
				return []any{n, lr}, err
			})
		}
	}
}

// CheckWritesContinue writes to both stores what a server does after the
// move, and compares: a resend of an old client id is a duplicate of the
// original, a new message takes last seq + 1, a new audit entry the next
// id, a username stays taken.
func CheckWritesContinue(t testing.TB, want, got store.Store) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []store.Store{want, got} {
		res, err := s.Append(ctx, []*pb.Message{msg(Direct, "alice", "bob", "a-1", "resent"), msg(Direct, "bob", "alice", "b-3", "new")})
		if err != nil {
			t.Fatalf("append after migration: %v", err)
		}
		if !res[0].Duplicate || res[0].Msg.Seq != 1 || string(res[0].Msg.Payload) != "hello bob, edited" {
			t.Errorf("resend of a-1: duplicate %v, seq %d, payload %q; want the original (seq 1)", res[0].Duplicate, res[0].Msg.Seq, res[0].Msg.Payload)
		}
		if res[1].Duplicate || res[1].Msg.Seq != 14 {
			t.Errorf("new message: duplicate %v seq %d, want seq 14", res[1].Duplicate, res[1].Msg.Seq)
		}
		id, err := s.AppendAudit(ctx, store.AuditEntry{Time: at(30), Actor: "admin", Action: "x"})
		if err != nil || id != 4 {
			t.Errorf("AppendAudit after migration = %d, %v; want id 4", id, err)
		}
		if err := s.CreateUser(ctx, store.User{ID: "alice2", NameKey: "alice", PasswordHash: "h"}); err == nil {
			t.Errorf("a second user named alice was created")
		}
		// The target knows which messages carry which files: the file of
		// the disappearing message goes with it, and only then.
		if fs, err := s.OrphanedFiles(ctx, 0, 100); err != nil || len(fs) != 0 {
			t.Errorf("OrphanedFiles before the carrier went = %v, %v; want none", fs, err)
		}
		if _, err := s.DeleteMessages(ctx, []store.MessageRef{{ConversationID: Fading, Seq: 4}}); err != nil {
			t.Fatalf("DeleteMessages: %v", err)
		}
		if fs, err := s.OrphanedFiles(ctx, 0, 100); err != nil || len(fs) != 1 || fs[0].ID != "file-1" {
			t.Errorf("OrphanedFiles after the carrier went = %v, %v; want file-1", fs, err)
		}
		// Key packages are handed out in the order published, then the
		// last resort; the encrypted group's epoch goes on.
		var got []string
		for range 4 {
			kps, err := s.ClaimKeyPackages(ctx, "bob")
			if err != nil || len(kps) != 1 {
				t.Fatalf("ClaimKeyPackages after migration = %v, %v", kps, err)
			}
			got = append(got, fmt.Sprintf("%x/%v", kps[0].Data, kps[0].LastResort))
		}
		if want := []string{"0100ff/false", "02/false", "03/false", "6c617374/true"}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("claims after migration: %v, want %v", got, want)
		}
		if _, err := s.Apply(ctx, store.Change{Event: msg(MLSGroup, "bob", "", "mls-stale", "x"), MLS: &store.MLSStep{Epoch: 0}}); !errors.Is(err, store.ErrStaleEpoch) {
			t.Errorf("a stale Commit after migration: %v, want ErrStaleEpoch", err)
		}
		if _, err := s.Apply(ctx, store.Change{Event: msg(MLSGroup, "bob", "", "mls-2", "x"), MLS: &store.MLSStep{Epoch: 1}}); err != nil {
			t.Errorf("the next Commit after migration: %v", err)
		}
	}
}

// PGURL returns the test database URL, skipping the test without one.
func PGURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv("PARLEY_TEST_PG")
	if url == "" {
		t.Skip("PARLEY_TEST_PG is unset: PostgreSQL tests need a database URL")
	}
	return url
}

// FreshSchema returns a new schema name, dropped when the test ends.
func FreshSchema(t testing.TB, url string) string {
	t.Helper()
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "parley_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

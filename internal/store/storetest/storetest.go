// Package storetest is the conformance suite every store.Store implementation
// must pass. It uses only the store.Store interface, so the embedded store and
// a PostgreSQL store run the same tests unchanged.
//
// Ids used here are valid UTF-8 without NUL bytes (PostgreSQL text cannot hold
// NUL); implementation-specific tests cover stranger ids.
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

// Run runs the conformance suite. open must return a fresh, empty store on
// every call; the suite closes each store it gets (a second Close returning
// store.ErrClosed is expected and ignored), so open may register its own
// cleanup of files or databases with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"AppendAssignsSeqsInOrder", testAppendAssignsSeqs},
		{"AppendEmptyBatch", testAppendEmpty},
		{"SeqsContinueAcrossBatches", testSeqsContinue},
		{"ConversationsAreIndependent", testConversationsIndependent},
		{"SimilarIdsDoNotMix", testSimilarIDs},
		{"DedupAcrossBatches", testDedupAcrossBatches},
		{"DedupWithinBatch", testDedupWithinBatch},
		{"DedupIsPerSender", testDedupPerSender},
		{"DedupMixedBatchStaysGapFree", testDedupMixedBatch},
		{"ConversationLists", testConversationLists},
		{"MessagesPaging", testMessagesPaging},
		{"HistoryPaging", testHistoryPaging},
		{"LastSeq", testLastSeq},
		{"RaiseSeq", testRaiseSeq},
		{"CursorsOnlyGrow", testCursors},
		{"CursorsClampToLastSeq", testCursorsClamp},
		{"Users", testUsers},
		{"UserNamesAreUnique", testUserNames},
		{"ConcurrentUserNames", testConcurrentUserNames},
		{"UserShadowMuted", testShadowMuted},
		{"TokenRevocation", testTokens},
		{"ApplyGroupChange", testApplyGroupChange},
		{"ApplyMembersLeave", testApplyMembersLeave},
		{"ApplyDuplicateWritesNothing", testApplyDuplicate},
		{"ApplyUpdatesMessage", testApplyUpdate},
		{"GetMessage", testGetMessage},
		{"MessageHeads", testMessageHeads},
		{"GroupRecordReplaced", testGroupRecordReplaced},
		{"GroupPolicyAndJoinSeq", testGroupPolicy},
		{"MembersPaging", testMembersPaging},
		{"CursorsOfConversation", testCursorsOfConversation},
		{"ConversationSettings", testConversationSettings},
		{"HiddenMessages", testHiddenMessages},
		{"Contacts", testContacts},
		{"Blocks", testBlocks},
		{"LastSeen", testLastSeen},
		{"UserStorage", testUserStorage},
		{"Files", testFiles},
		{"PushTargets", testPushTargets},
		{"Reports", testReports},
		{"ConcurrentReports", testConcurrentReports},
		{"AuditLog", testAuditLog},
		{"Settings", testSettings},
		{"SwapSetting", testSwapSetting},
		{"ConcurrentSwapSetting", testConcurrentSwapSetting},
		{"Reactions", testReactions},
		{"ReactionLimits", testReactionLimits},
		{"ReactionVersions", testReactionVersions},
		{"ConcurrentReactions", testConcurrentReactions},
		{"Pins", testPins},
		{"Threads", testThreads},
		{"Mentions", testMentions},
		{"BotAndMentionAllRecords", testRichRecords},
		{"ConcurrentAppend", testConcurrentAppend},
		{"ConcurrentApplyAndAppend", testConcurrentApplyAndAppend},
		{"ConcurrentResends", testConcurrentResends},
		{"ListUsersAndGroups", testListing},
		{"DiskSize", testDiskSize},
		{"Retention", testRetention}, {"BelowFloorIsGoneBeforeItsDeletion", testBelowFloorGone}, {"Disappearing", testDisappearing}, {"ConcurrentExpire", testConcurrentExpire},
		{"OrphanedFiles", testOrphanedFiles},
		{"Ping", testPing},
		{"CloseThenErrClosed", testClose},
		{"AccountDeletion", testAccountDeletion},
		{"KeyPackages", testKeyPackages}, {"ConcurrentKeyPackageClaims", testConcurrentKeyPackageClaims},
		{"MLSEpochs", testMLSEpochs}, {"ConcurrentMLSCommits", testConcurrentMLSCommits},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { _ = s.Close() })
			tc.fn(t, s)
		})
	}
}

// msg builds a message as the server would pass it to Append (Seq zero).
func msg(conv, from, to, clientID string) *pb.Message {
	return &pb.Message{
		ConversationId: conv,
		From:           from,
		To:             to,
		ClientMsgId:    clientID,
		ContentType:    "text",
		Payload:        []byte("payload of " + from + "/" + clientID + "\x00\xff"),
		ServerTime:     1700000000000,
		MessageId:      nextMessageID(),
		Kind:           pb.MessageKind_MESSAGE_KIND_NORMAL,
	}
}

var (
	idMu   sync.Mutex
	lastID uint64
)

func nextMessageID() uint64 {
	idMu.Lock()
	defer idMu.Unlock()
	lastID++
	return lastID
}

func appendOK(t *testing.T, s store.Store, msgs ...*pb.Message) []store.AppendResult {
	t.Helper()
	res, err := s.Append(context.Background(), msgs)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if len(res) != len(msgs) {
		t.Fatalf("Append returned %d results for %d messages", len(res), len(msgs))
	}
	for i, r := range res {
		if r.Msg == nil {
			t.Fatalf("result %d has no message", i)
		}
	}
	return res
}

// all returns every message of conv in order.
func all(t *testing.T, s store.Store, conv string) []*pb.Message {
	t.Helper()
	got, err := s.Messages(context.Background(), conv, 0, 1<<30)
	if err != nil {
		t.Fatalf("Messages(%q): %v", conv, err)
	}
	return got
}

func seqs(msgs []*pb.Message) []uint64 {
	out := make([]uint64, len(msgs))
	for i, m := range msgs {
		out[i] = m.Seq
	}
	return out
}

func seqRange(from, to uint64) []uint64 {
	var out []uint64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func wantSeqs(t *testing.T, what string, got []*pb.Message, want []uint64) {
	t.Helper()
	if g := seqs(got); !slices.Equal(g, want) {
		t.Fatalf("%s: seqs %v, want %v", what, g, want)
	}
}

// sameMessage compares everything but Seq, which the caller checks.
func sameMessage(t *testing.T, what string, got, want *pb.Message) {
	t.Helper()
	g, w := proto.Clone(got).(*pb.Message), proto.Clone(want).(*pb.Message)
	g.Seq, w.Seq = 0, 0
	if !proto.Equal(g, w) {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

func lastSeq(t *testing.T, s store.Store, conv string) uint64 {
	t.Helper()
	n, err := s.LastSeq(context.Background(), conv)
	if err != nil {
		t.Fatalf("LastSeq(%q): %v", conv, err)
	}
	return n
}

func conversations(t *testing.T, s store.Store, user string) []string {
	t.Helper()
	got, err := s.Conversations(context.Background(), user)
	if err != nil {
		t.Fatalf("Conversations(%q): %v", user, err)
	}
	slices.Sort(got)
	return got
}

func testAppendAssignsSeqs(t *testing.T, s store.Store) {
	in := []*pb.Message{msg("c1", "alice", "bob", "a1"), msg("c1", "bob", "alice", "b1"), msg("c1", "alice", "bob", "a2")}
	want := make([]*pb.Message, len(in))
	for i, m := range in {
		want[i] = proto.Clone(m).(*pb.Message)
	}
	res := appendOK(t, s, in...)
	for i, r := range res {
		if r.Duplicate {
			t.Fatalf("result %d: Duplicate on a new message", i)
		}
		if r.Msg.Seq != uint64(i+1) {
			t.Fatalf("result %d: seq %d, want %d", i, r.Msg.Seq, i+1)
		}
		sameMessage(t, fmt.Sprintf("result %d", i), r.Msg, want[i])
	}
	got := all(t, s, "c1")
	wantSeqs(t, "stored", got, []uint64{1, 2, 3})
	for i, m := range got {
		sameMessage(t, fmt.Sprintf("stored %d", i), m, want[i])
	}
}

func testAppendEmpty(t *testing.T, s store.Store) {
	res, err := s.Append(context.Background(), nil)
	if err != nil || len(res) != 0 {
		t.Fatalf("Append(nil) = %v, %v; want no results, no error", res, err)
	}
	if n := lastSeq(t, s, "c1"); n != 0 {
		t.Fatalf("LastSeq after empty Append = %d", n)
	}
}

func testSeqsContinue(t *testing.T, s store.Store) {
	var next uint64 = 1
	for batch := 1; batch <= 5; batch++ {
		var in []*pb.Message
		for i := 0; i < batch; i++ {
			in = append(in, msg("c1", "alice", "bob", fmt.Sprintf("b%d-%d", batch, i)))
		}
		for i, r := range appendOK(t, s, in...) {
			if r.Msg.Seq != next {
				t.Fatalf("batch %d msg %d: seq %d, want %d", batch, i, r.Msg.Seq, next)
			}
			next++
		}
	}
	wantSeqs(t, "stored", all(t, s, "c1"), seqRange(1, next-1))
}

func testConversationsIndependent(t *testing.T, s store.Store) {
	in := []*pb.Message{
		msg("c1", "alice", "bob", "1"), msg("c2", "alice", "carol", "2"), msg("c1", "bob", "alice", "3"),
		msg("g1", "alice", "", "4"), msg("c2", "carol", "alice", "5"), msg("c1", "alice", "bob", "6"),
	}
	want := []uint64{1, 1, 2, 1, 2, 3}
	for i, r := range appendOK(t, s, in...) {
		if r.Msg.Seq != want[i] {
			t.Fatalf("msg %d (%s): seq %d, want %d", i, r.Msg.ConversationId, r.Msg.Seq, want[i])
		}
	}
	wantSeqs(t, "c1", all(t, s, "c1"), []uint64{1, 2, 3})
	wantSeqs(t, "c2", all(t, s, "c2"), []uint64{1, 2})
	wantSeqs(t, "g1", all(t, s, "g1"), []uint64{1})
	for _, m := range all(t, s, "c2") {
		if m.ConversationId != "c2" {
			t.Fatalf("Messages(c2) returned a message of %q", m.ConversationId)
		}
	}
}

// testSimilarIDs: ids that are prefixes or extensions of each other must not
// share messages, seqs or lists (a key-encoding mistake shows up here).
func testSimilarIDs(t *testing.T, s store.Store) {
	convs := []string{"c", "c1", "c/1", "c 1", "ç", "c\u00a0"}
	for i, c := range convs {
		var in []*pb.Message
		for j := 0; j <= i; j++ {
			in = append(in, msg(c, "u"+c, "", fmt.Sprintf("m%d", j)))
		}
		appendOK(t, s, in...)
	}
	for i, c := range convs {
		got := all(t, s, c)
		wantSeqs(t, c, got, seqRange(1, uint64(i+1)))
		for _, m := range got {
			if m.ConversationId != c {
				t.Fatalf("Messages(%q) returned a message of %q", c, m.ConversationId)
			}
		}
		if n := lastSeq(t, s, c); n != uint64(i+1) {
			t.Fatalf("LastSeq(%q) = %d, want %d", c, n, i+1)
		}
		h, err := s.History(context.Background(), c, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		wantSeqs(t, "History "+c, h, seqRange(1, uint64(i+1)))
		if got := conversations(t, s, "u"+c); !slices.Equal(got, []string{c}) {
			t.Fatalf("Conversations(%q) = %q, want [%q]", "u"+c, got, c)
		}
	}
}

func testDedupAcrossBatches(t *testing.T, s store.Store) {
	orig := appendOK(t, s, msg("c1", "alice", "bob", "x"), msg("c1", "alice", "bob", "y"))
	origX := proto.Clone(orig[0].Msg).(*pb.Message)

	retry := msg("c1", "alice", "bob", "x")
	retry.Payload = []byte("a different payload")
	res := appendOK(t, s, retry)
	if !res[0].Duplicate {
		t.Fatal("resend not reported as Duplicate")
	}
	if res[0].Msg.Seq != origX.Seq {
		t.Fatalf("resend: seq %d, want the original %d", res[0].Msg.Seq, origX.Seq)
	}
	sameMessage(t, "resend result", res[0].Msg, origX)
	if n := lastSeq(t, s, "c1"); n != 2 {
		t.Fatalf("LastSeq after resend = %d, want 2", n)
	}
	got := all(t, s, "c1")
	wantSeqs(t, "stored", got, []uint64{1, 2})
	sameMessage(t, "stored original", got[0], origX)

	// The next new message continues without a gap.
	res = appendOK(t, s, msg("c1", "alice", "bob", "z"))
	if res[0].Duplicate || res[0].Msg.Seq != 3 {
		t.Fatalf("new message after resend: seq %d duplicate %v, want 3 false", res[0].Msg.Seq, res[0].Duplicate)
	}
}

func testDedupWithinBatch(t *testing.T, s store.Store) {
	first := msg("c1", "alice", "bob", "x")
	again := msg("c1", "alice", "bob", "x")
	again.Payload = []byte("second copy")
	want := proto.Clone(first).(*pb.Message)
	res := appendOK(t, s, first, msg("c1", "alice", "bob", "y"), again, msg("c1", "alice", "bob", "z"))
	if res[0].Duplicate || res[1].Duplicate || res[3].Duplicate {
		t.Fatal("new messages reported as Duplicate")
	}
	if !res[2].Duplicate {
		t.Fatal("repeat within the batch not reported as Duplicate")
	}
	if res[2].Msg.Seq != 1 {
		t.Fatalf("repeat: seq %d, want the first copy's 1", res[2].Msg.Seq)
	}
	sameMessage(t, "repeat result", res[2].Msg, want)
	if res[1].Msg.Seq != 2 || res[3].Msg.Seq != 3 {
		t.Fatalf("seqs %d, %d; want 2, 3 (no seq for the repeat)", res[1].Msg.Seq, res[3].Msg.Seq)
	}
	got := all(t, s, "c1")
	wantSeqs(t, "stored", got, []uint64{1, 2, 3})
	sameMessage(t, "stored first copy", got[0], want)
}

func testDedupPerSender(t *testing.T, s store.Store) {
	res := appendOK(t, s, msg("c1", "alice", "bob", "same"), msg("c1", "bob", "alice", "same"))
	if res[0].Duplicate || res[1].Duplicate {
		t.Fatal("the same client id from two senders was treated as a duplicate")
	}
	res = appendOK(t, s, msg("c2", "carol", "alice", "same"))
	if res[0].Duplicate || res[0].Msg.Seq != 1 {
		t.Fatalf("third sender: seq %d duplicate %v", res[0].Msg.Seq, res[0].Duplicate)
	}
	wantSeqs(t, "c1", all(t, s, "c1"), []uint64{1, 2})
}

func testDedupMixedBatch(t *testing.T, s store.Store) {
	appendOK(t, s, msg("c1", "alice", "bob", "1"), msg("c2", "alice", "carol", "2"))
	// Resends of stored messages interleaved with new ones, across conversations.
	res := appendOK(t, s,
		msg("c1", "alice", "bob", "3"), msg("c1", "alice", "bob", "1"),
		msg("c2", "alice", "carol", "2"), msg("c2", "alice", "carol", "4"),
		msg("c1", "alice", "bob", "3"), msg("c1", "alice", "bob", "5"))
	type want struct {
		seq uint64
		dup bool
	}
	wants := []want{{2, false}, {1, true}, {1, true}, {2, false}, {2, true}, {3, false}}
	for i, w := range wants {
		if res[i].Msg.Seq != w.seq || res[i].Duplicate != w.dup {
			t.Fatalf("msg %d: seq %d duplicate %v, want %d %v", i, res[i].Msg.Seq, res[i].Duplicate, w.seq, w.dup)
		}
	}
	wantSeqs(t, "c1", all(t, s, "c1"), []uint64{1, 2, 3})
	wantSeqs(t, "c2", all(t, s, "c2"), []uint64{1, 2})
}

func testConversationLists(t *testing.T, s store.Store) {
	if got := conversations(t, s, "alice"); len(got) != 0 {
		t.Fatalf("new store: Conversations(alice) = %q", got)
	}
	appendOK(t, s,
		msg("d-ab", "alice", "bob", "1"), msg("d-ab", "bob", "alice", "2"), msg("d-ab", "alice", "bob", "3"),
		msg("d-ac", "carol", "alice", "4"),
		msg("g1", "dave", "", "5"))
	appendOK(t, s, msg("g1", "alice", "", "6"), msg("d-ab", "alice", "bob", "7"))
	cases := map[string][]string{
		"alice": {"d-ab", "d-ac", "g1"}, // From and To; listed once however many messages
		"bob":   {"d-ab"},
		"carol": {"d-ac"},
		"dave":  {"g1"},
		"erin":  nil,
	}
	for user, want := range cases {
		if got := conversations(t, s, user); !slices.Equal(got, want) {
			t.Fatalf("Conversations(%q) = %q, want %q", user, got, want)
		}
	}
}

// tenMessages stores seqs 1..10 in c1.
func tenMessages(t *testing.T, s store.Store) {
	var in []*pb.Message
	for i := 1; i <= 10; i++ {
		in = append(in, msg("c1", "alice", "bob", fmt.Sprint(i)))
	}
	appendOK(t, s, in...)
	appendOK(t, s, msg("c0", "alice", "bob", "other"), msg("c2", "alice", "bob", "other2"))
}

func testMessagesPaging(t *testing.T, s store.Store) {
	tenMessages(t, s)
	cases := []struct {
		after uint64
		limit int
		want  []uint64
	}{
		{0, 3, []uint64{1, 2, 3}},
		{3, 3, []uint64{4, 5, 6}},
		{6, 100, []uint64{7, 8, 9, 10}},
		{9, 3, []uint64{10}},
		{10, 3, nil},
		{50, 3, nil},
		{0, 10, seqRange(1, 10)},
		{0, 1, []uint64{1}},
	}
	for _, c := range cases {
		got, err := s.Messages(context.Background(), "c1", c.after, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		wantSeqs(t, fmt.Sprintf("Messages(after=%d, limit=%d)", c.after, c.limit), got, c.want)
	}
	got, err := s.Messages(context.Background(), "nope", 0, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("Messages of an unknown conversation = %v, %v", got, err)
	}
}

func testHistoryPaging(t *testing.T, s store.Store) {
	tenMessages(t, s)
	cases := []struct {
		before uint64
		limit  int
		want   []uint64
	}{
		{0, 3, []uint64{8, 9, 10}},
		{8, 3, []uint64{5, 6, 7}},
		{5, 3, []uint64{2, 3, 4}},
		{2, 3, []uint64{1}},
		{1, 3, nil},
		{11, 2, []uint64{9, 10}},
		{50, 2, []uint64{9, 10}},
		{0, 100, seqRange(1, 10)},
		{0, 1, []uint64{10}},
	}
	for _, c := range cases {
		got, err := s.History(context.Background(), "c1", c.before, c.limit)
		if err != nil {
			t.Fatal(err)
		}
		wantSeqs(t, fmt.Sprintf("History(before=%d, limit=%d)", c.before, c.limit), got, c.want)
	}
	got, err := s.History(context.Background(), "nope", 0, 10)
	if err != nil || len(got) != 0 {
		t.Fatalf("History of an unknown conversation = %v, %v", got, err)
	}
}

func testLastSeq(t *testing.T, s store.Store) {
	if n := lastSeq(t, s, "c1"); n != 0 {
		t.Fatalf("LastSeq of an empty conversation = %d", n)
	}
	appendOK(t, s, msg("c1", "a", "b", "1"), msg("c1", "a", "b", "2"), msg("c2", "a", "b", "3"))
	if n := lastSeq(t, s, "c1"); n != 2 {
		t.Fatalf("LastSeq(c1) = %d, want 2", n)
	}
	if n := lastSeq(t, s, "c2"); n != 1 {
		t.Fatalf("LastSeq(c2) = %d, want 1", n)
	}
	appendOK(t, s, msg("c1", "a", "b", "4"))
	if n := lastSeq(t, s, "c1"); n != 3 {
		t.Fatalf("LastSeq(c1) = %d, want 3", n)
	}
}

func getCursor(t *testing.T, s store.Store, conv, user string) (delivered, read uint64) {
	t.Helper()
	c, err := s.GetCursor(context.Background(), conv, user)
	if err != nil {
		t.Fatalf("GetCursor(%q, %q): %v", conv, user, err)
	}
	return c.Delivered, c.Read
}

func setCursors(t *testing.T, s store.Store, cs ...store.Cursor) {
	t.Helper()
	if err := s.SetCursors(context.Background(), cs); err != nil {
		t.Fatalf("SetCursors: %v", err)
	}
}

// fill appends n messages to conv, so cursors up to its last seq are valid.
func fill(t *testing.T, s store.Store, conv string, n int) {
	t.Helper()
	for range n {
		appendOK(t, s, msg(conv, "filler", "", fmt.Sprintf("fill-%s-%d", conv, nextMessageID())))
	}
}

func testCursors(t *testing.T, s store.Store) {
	if d, r := getCursor(t, s, "c1", "alice"); d != 0 || r != 0 {
		t.Fatalf("unset cursor = %d/%d, want 0/0", d, r)
	}
	fill(t, s, "c1", 9)
	fill(t, s, "c2", 7)
	steps := []struct {
		delivered, read uint64
		wantD, wantR    uint64
	}{
		{5, 3, 5, 3},
		{4, 6, 5, 6}, // delivered lower: ignored; read higher: raised
		{0, 0, 5, 6},
		{9, 2, 9, 6},
		{9, 9, 9, 9},
	}
	for i, st := range steps {
		setCursors(t, s, store.Cursor{ConversationID: "c1", UserID: "alice", Delivered: st.delivered, Read: st.read})
		if d, r := getCursor(t, s, "c1", "alice"); d != st.wantD || r != st.wantR {
			t.Fatalf("step %d: cursor %d/%d, want %d/%d", i, d, r, st.wantD, st.wantR)
		}
	}
	// Several cursors in one call, one of them twice: each field takes the maximum.
	setCursors(t, s,
		store.Cursor{ConversationID: "c1", UserID: "bob", Delivered: 4, Read: 1},
		store.Cursor{ConversationID: "c2", UserID: "alice", Delivered: 7, Read: 7},
		store.Cursor{ConversationID: "c1", UserID: "bob", Delivered: 2, Read: 3},
	)
	checks := []struct {
		conv, user   string
		wantD, wantR uint64
	}{
		{"c1", "alice", 9, 9},
		{"c1", "bob", 4, 3},
		{"c2", "alice", 7, 7},
		{"c2", "bob", 0, 0},
		{"c1", "alic", 0, 0},
	}
	for _, c := range checks {
		if d, r := getCursor(t, s, c.conv, c.user); d != c.wantD || r != c.wantR {
			t.Fatalf("cursor %s/%s = %d/%d, want %d/%d", c.conv, c.user, d, r, c.wantD, c.wantR)
		}
	}
	setCursors(t, s) // an empty call is fine
}

// testCursorsClamp: a cursor never passes its conversation's last seq, so a
// client claiming to have read "everything, forever" cannot hide later
// messages from its own unread count or mark them read for the sender.
func testCursorsClamp(t *testing.T, s store.Store) {
	const huge = ^uint64(0)
	fill(t, s, "c1", 3)
	setCursors(t, s, store.Cursor{ConversationID: "c1", UserID: "alice", Delivered: huge, Read: huge})
	if d, r := getCursor(t, s, "c1", "alice"); d != 3 || r != 3 {
		t.Fatalf("cursor set to 2^64-1 in a conversation of 3 = %d/%d, want 3/3", d, r)
	}
	// Later messages are unread again, and the cursor can move onto them.
	fill(t, s, "c1", 2)
	setCursors(t, s, store.Cursor{ConversationID: "c1", UserID: "alice", Delivered: 4, Read: 0})
	if d, r := getCursor(t, s, "c1", "alice"); d != 4 || r != 3 {
		t.Fatalf("cursor after 2 more messages = %d/%d, want 4/3", d, r)
	}
	setCursors(t, s, store.Cursor{ConversationID: "c1", UserID: "alice", Delivered: 6, Read: 6})
	if d, r := getCursor(t, s, "c1", "alice"); d != 5 || r != 5 {
		t.Fatalf("cursor past the end of 5 = %d/%d, want 5/5", d, r)
	}
	// A conversation without messages keeps no position at all; repeats in
	// one call and other conversations of the same call are clamped each.
	fill(t, s, "c2", 1)
	setCursors(t, s,
		store.Cursor{ConversationID: "empty", UserID: "alice", Delivered: 10, Read: 10},
		store.Cursor{ConversationID: "c2", UserID: "bob", Delivered: huge, Read: 1},
		store.Cursor{ConversationID: "c2", UserID: "bob", Delivered: 1, Read: huge},
	)
	if d, r := getCursor(t, s, "empty", "alice"); d != 0 || r != 0 {
		t.Fatalf("cursor in a conversation without messages = %d/%d, want 0/0", d, r)
	}
	if d, r := getCursor(t, s, "c2", "bob"); d != 1 || r != 1 {
		t.Fatalf("clamped repeats = %d/%d, want 1/1", d, r)
	}
	if cs, err := s.Cursors(context.Background(), "c2"); err != nil || len(cs) != 1 || cs[0].Delivered != 1 || cs[0].Read != 1 {
		t.Fatalf("Cursors(c2) = %+v, %v; want bob at 1/1", cs, err)
	}
}

func testUsers(t *testing.T, s store.Store) {
	ctx := context.Background()
	if _, err := s.GetUser(ctx, "alice"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetUser of a missing user: %v, want ErrNotFound", err)
	}
	// Microsecond precision: what PostgreSQL timestamps keep.
	created := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	u := store.User{ID: "alice", PasswordHash: "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA", TokenEpoch: 3, CreatedAt: created}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	if err := s.CreateUser(ctx, store.User{ID: "bob", CreatedAt: created}); err != nil {
		t.Fatalf("CreateUser(bob): %v", err)
	}
	if err := s.CreateUser(ctx, store.User{ID: "alice", PasswordHash: "other"}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("CreateUser of an existing user: %v, want ErrExists", err)
	}
	checkUser(t, s, u) // the failed create changed nothing

	u.PasswordHash = "$2a$10$new"
	u.TokenEpoch = 4
	u.Disabled = true
	if err := s.UpdateUser(ctx, u); err != nil {
		t.Fatalf("UpdateUser: %v", err)
	}
	checkUser(t, s, u)
	checkUser(t, s, store.User{ID: "bob", CreatedAt: created})
	if err := s.UpdateUser(ctx, store.User{ID: "carol"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UpdateUser of a missing user: %v, want ErrNotFound", err)
	}
	if _, err := s.GetUser(ctx, "carol"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UpdateUser of a missing user created it: %v", err)
	}
}

func checkUser(t *testing.T, s store.Store, want store.User) {
	t.Helper()
	got, err := s.GetUser(context.Background(), want.ID)
	if err != nil {
		t.Fatalf("GetUser(%q): %v", want.ID, err)
	}
	if got.ID != want.ID || got.PasswordHash != want.PasswordHash || got.TokenEpoch != want.TokenEpoch ||
		got.Disabled != want.Disabled || got.ShadowMuted != want.ShadowMuted || got.Bot != want.Bot || !got.CreatedAt.Equal(want.CreatedAt) {
		t.Fatalf("GetUser(%q) = %+v, want %+v", want.ID, got, want)
	}
}

func tokenRevoked(t *testing.T, s store.Store, id string) bool {
	t.Helper()
	ok, err := s.TokenRevoked(context.Background(), id)
	if err != nil {
		t.Fatalf("TokenRevoked(%q): %v", id, err)
	}
	return ok
}

func testTokens(t *testing.T, s store.Store) {
	ctx := context.Background()
	if tokenRevoked(t, s, "tok1") {
		t.Fatal("unknown token reported revoked")
	}
	exp := time.Now().Add(time.Hour)
	if err := s.RevokeToken(ctx, "tok1", exp); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	if err := s.RevokeToken(ctx, "tok1", exp.Add(time.Minute)); err != nil {
		t.Fatalf("RevokeToken twice: %v", err)
	}
	if !tokenRevoked(t, s, "tok1") {
		t.Fatal("revoked token not reported revoked")
	}
	for _, id := range []string{"tok", "tok10", "tok2"} {
		if tokenRevoked(t, s, id) {
			t.Fatalf("token %q reported revoked; only tok1 was", id)
		}
	}
}

// testConcurrentAppend: many goroutines appending batches to shared and own
// conversations must leave every conversation with seqs 1..n, each message
// stored once, and results matching what is stored.
func testConcurrentAppend(t *testing.T, s store.Store) {
	const workers, batches = 8, 20
	convs := []string{"shared-1", "shared-2", "shared-3"}
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	results := make([][]store.AppendResult, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			from := fmt.Sprintf("user%d", w)
			for b := 0; b < batches; b++ {
				var in []*pb.Message
				for i := 0; i < 1+(w+b)%5; i++ {
					conv := convs[(w+b+i)%len(convs)]
					if i == 2 {
						conv = "own-" + from
					}
					in = append(in, msg(conv, from, "", fmt.Sprintf("%d-%d", b, i)))
				}
				res, err := s.Append(context.Background(), in)
				if err != nil {
					errs <- err
					return
				}
				results[w] = append(results[w], res...)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Append: %v", err)
	}
	// conversation → seq → (from, client id) from the results.
	fromResults := map[string]map[uint64]string{}
	total := 0
	for _, rs := range results {
		for _, r := range rs {
			if r.Duplicate {
				t.Fatalf("fresh message %s/%s reported Duplicate", r.Msg.From, r.Msg.ClientMsgId)
			}
			c := r.Msg.ConversationId
			if fromResults[c] == nil {
				fromResults[c] = map[uint64]string{}
			}
			id := r.Msg.From + "/" + r.Msg.ClientMsgId
			if prev, ok := fromResults[c][r.Msg.Seq]; ok {
				t.Fatalf("%s seq %d given to %s and %s", c, r.Msg.Seq, prev, id)
			}
			fromResults[c][r.Msg.Seq] = id
			total++
		}
	}
	stored := 0
	for c, bySeq := range fromResults {
		got := all(t, s, c)
		wantSeqs(t, c, got, seqRange(1, uint64(len(bySeq))))
		for _, m := range got {
			if id := m.From + "/" + m.ClientMsgId; bySeq[m.Seq] != id {
				t.Fatalf("%s seq %d stored %s, Append reported %s", c, m.Seq, id, bySeq[m.Seq])
			}
		}
		stored += len(got)
	}
	if stored != total {
		t.Fatalf("stored %d messages, appended %d", stored, total)
	}
}

// testConcurrentResends: the same messages sent by several goroutines at
// once are stored once, and every goroutine gets the same seq for each.
func testConcurrentResends(t *testing.T, s store.Store) {
	const workers, n = 6, 30
	var wg sync.WaitGroup
	got := make([][]store.AppendResult, workers)
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < n; i += 3 {
				res, err := s.Append(context.Background(), []*pb.Message{
					msg("c1", "alice", "bob", fmt.Sprint(i)),
					msg("c1", "alice", "bob", fmt.Sprint(i+1)),
					msg("c1", "alice", "bob", fmt.Sprint(i+2)),
				})
				if err != nil {
					errs <- err
					return
				}
				got[w] = append(got[w], res...)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent Append: %v", err)
	}
	stored := all(t, s, "c1")
	wantSeqs(t, "stored", stored, seqRange(1, n))
	seqOf := map[string]uint64{}
	for _, m := range stored {
		if _, dup := seqOf[m.ClientMsgId]; dup {
			t.Fatalf("client id %s stored twice", m.ClientMsgId)
		}
		seqOf[m.ClientMsgId] = m.Seq
	}
	fresh := 0
	for w, rs := range got {
		for _, r := range rs {
			if r.Msg.Seq != seqOf[r.Msg.ClientMsgId] {
				t.Fatalf("worker %d: %s got seq %d, stored as %d", w, r.Msg.ClientMsgId, r.Msg.Seq, seqOf[r.Msg.ClientMsgId])
			}
			if !r.Duplicate {
				fresh++
			}
		}
	}
	if fresh != n {
		t.Fatalf("%d results not marked Duplicate, want %d (one per stored message)", fresh, n)
	}
}

func testPing(t *testing.T, s store.Store) {
	if err := s.Ping(context.Background()); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func testClose(t *testing.T, s store.Store) {
	appendOK(t, s, msg("c1", "alice", "bob", "1"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	ctx := context.Background()
	calls := map[string]func() error{
		"Append": func() error {
			_, err := s.Append(ctx, []*pb.Message{msg("c1", "alice", "bob", "2")})
			return err
		},
		"Messages": func() error { _, err := s.Messages(ctx, "c1", 0, 10); return err },
		"History":  func() error { _, err := s.History(ctx, "c1", 0, 10); return err },
		"LastSeq":  func() error { _, err := s.LastSeq(ctx, "c1"); return err },
		"Conversations": func() error {
			_, err := s.Conversations(ctx, "alice")
			return err
		},
		"SetCursors": func() error {
			return s.SetCursors(ctx, []store.Cursor{{ConversationID: "c1", UserID: "alice", Delivered: 1}})
		},
		"GetCursor":    func() error { _, err := s.GetCursor(ctx, "c1", "alice"); return err },
		"CreateUser":   func() error { return s.CreateUser(ctx, store.User{ID: "zed"}) },
		"GetUser":      func() error { _, err := s.GetUser(ctx, "zed"); return err },
		"UpdateUser":   func() error { return s.UpdateUser(ctx, store.User{ID: "zed"}) },
		"RevokeToken":  func() error { return s.RevokeToken(ctx, "t", time.Now().Add(time.Hour)) },
		"TokenRevoked": func() error { _, err := s.TokenRevoked(ctx, "t"); return err },
		"Ping":         func() error { return s.Ping(ctx) },
		"Close":        s.Close,
		"Apply": func() error {
			_, err := s.Apply(ctx, store.Change{Event: msg("c1", "alice", "bob", "3")})
			return err
		},
		"GetMessage": func() error { _, err := s.GetMessage(ctx, "c1", 1); return err },
		"GetGroup":   func() error { _, err := s.GetGroup(ctx, "g:1"); return err },
		"GetMember":  func() error { _, err := s.GetMember(ctx, "g:1", "alice"); return err },
		"Members":    func() error { _, err := s.Members(ctx, "g:1", "", 10); return err },
		"Cursors":    func() error { _, err := s.Cursors(ctx, "c1"); return err },
		"SetConversationSettings": func() error {
			return s.SetConversationSettings(ctx, "alice", "c1", store.ConversationSettings{Pinned: true})
		},
		"GetConversationSettings": func() error {
			_, err := s.GetConversationSettings(ctx, "alice", "c1")
			return err
		},
		"HideMessages": func() error { return s.HideMessages(ctx, "alice", "c1", []uint64{1}) },
		"HiddenMessages": func() error {
			_, err := s.HiddenMessages(ctx, "alice", "c1", 0, 10)
			return err
		},
		"PutContact":    func() error { return s.PutContact(ctx, "alice", store.Contact{UserID: "bob"}) },
		"DeleteContact": func() error { return s.DeleteContact(ctx, "alice", "bob") },
		"GetContact":    func() error { _, err := s.GetContact(ctx, "alice", "bob"); return err },
		"Contacts":      func() error { _, err := s.Contacts(ctx, "alice"); return err },
		"SetBlocked":    func() error { return s.SetBlocked(ctx, "alice", "bob", true) },
		"Blocked":       func() error { _, err := s.Blocked(ctx, "alice"); return err },
		"IsBlocked":     func() error { _, err := s.IsBlocked(ctx, "alice", "bob"); return err },
		"SetLastSeen":   func() error { return s.SetLastSeen(ctx, "alice", time.Now()) },
		"LastSeen":      func() error { _, err := s.LastSeen(ctx, "alice"); return err },
		"PutPushTarget": func() error {
			return s.PutPushTarget(ctx, store.PushTarget{UserID: "alice", DeviceID: "d", Kind: "fcm", Token: "t"})
		},
		"PushTargets": func() error { _, err := s.PushTargets(ctx, "alice"); return err },
		"SwapSetting": func() error { _, err := s.SwapSetting(ctx, "motd", nil, []byte("x")); return err },
		"DeletePushTarget": func() error {
			_, err := s.DeletePushTarget(ctx, "alice", "d", "")
			return err
		},
	}
	for name, call := range calls {
		if err := call(); !errors.Is(err, store.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
}

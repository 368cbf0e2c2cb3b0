package server_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// Moderation across a cluster: the admin API's word lists, bans and
// reports, each acted on through one node and seen through the others.
// Like the other cluster tests they skip without PARLEY_TEST_PG (NATS is
// embedded in the nodes).

// Named admin API keys every node of these clusters knows, so the audit
// log and closed reports can be checked for the key's name.
const (
	clusterOpsKey  = "cluster-ops-key-0123456789abcdef"
	clusterModsKey = "cluster-mods-key-0123456789abcdef"
)

func withModerationKeys(_ int, c *server.Config) {
	c.AdminAPIKeys = append(c.AdminAPIKeys, "ops:"+clusterOpsKey, "mods:"+clusterModsKey)
}

// wordRejected sends text from c to to and reports whether the word filter
// refused it; any other failure fails t.
func wordRejected(ctx context.Context, t *testing.T, c *client.Client, to, text string) bool {
	t.Helper()
	_, err := sendTo(ctx, c, to, text)
	if err == nil {
		return false
	}
	var pe *client.Error
	if errors.As(err, &pe) && pe.Code == pb.ErrorCode_ERROR_CODE_REJECTED && pe.RejectCode == "word_filter" {
		return true
	}
	t.Fatalf("send %q: %v, want an ACK or REJECTED word_filter", text, err)
	return false
}

// waitFilter has each sender (by node index) send text until the word
// filter's answer on its node is want (rejected or not), and returns how
// long each node took from start. It fails t when a node takes over 5 s.
func waitFilter(ctx context.Context, t *testing.T, senders map[int]*client.Client, text string, want bool, start time.Time) map[int]time.Duration {
	t.Helper()
	const bound = 5 * time.Second
	took := make(map[int]time.Duration, len(senders))
	for len(took) < len(senders) {
		for i, c := range senders {
			if _, done := took[i]; done {
				continue
			}
			if wordRejected(ctx, t, c, "bob", text) == want {
				took[i] = time.Since(start)
			}
		}
		if len(took) < len(senders) {
			if time.Since(start) > bound {
				var late []int
				for i := range senders {
					if _, done := took[i]; !done {
						late = append(late, i)
					}
				}
				t.Fatalf("after %v, nodes %v still answer rejected=%v to %q", bound, late, !want, text)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return took
}

// A word list PUT through node 0's admin API is used by node 0 at once and
// by nodes 1 and 2 within about a second (they poll the store's version
// key every 500 ms); a DELETE through node 1 stops it on every node.
func TestClusterModerationWordListPropagates(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, nil)
	// Room for two waits of up to 5 s each, so that a slow node fails
	// with waitFilter's message rather than a context's.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	senders := map[int]*client.Client{}
	for i, ts := range nodes {
		senders[i], _ = dialObserved(t, ts, fmt.Sprint("sender", i), "d", "phone")
	}
	const text = "get FREE b.i.t.c.o.i.n now"
	for i, c := range senders {
		if wordRejected(ctx, t, c, "bob", text) {
			t.Fatalf("node %d rejects %q before any list", i, text)
		}
	}

	put := time.Now()
	if err := adminClient(nodes[0]).PutWordList(ctx, client.WordList{Name: "scam", Action: "reject",
		Words: []string{"free bitcoin"}, IgnoreSeparators: true}); err != nil {
		t.Fatalf("put list through node 0: %v", err)
	}
	putTook := time.Since(put)
	start := time.Now()
	if !wordRejected(ctx, t, senders[0], "bob", text) {
		t.Error("node 0, which took the PUT, does not use the list at once")
	}
	if lists, err := adminClient(nodes[2]).WordLists(ctx); err != nil || len(lists) != 1 || lists[0].Name != "scam" {
		t.Errorf("lists through node 2: %+v, %v; want scam", lists, err)
	}
	took := waitFilter(ctx, t, map[int]*client.Client{1: senders[1], 2: senders[2]}, text, true, start)
	t.Logf("PUT through node 0 answered in %v; then the list was used on node 1 after %v, on node 2 after %v",
		putTook, took[1].Round(time.Millisecond), took[2].Round(time.Millisecond))
	// Node 2's refusal as the sender sees it.
	_, err := sendTo(ctx, senders[2], "bob", text)
	var pe *client.Error
	if !errors.As(err, &pe) || pe.Code != pb.ErrorCode_ERROR_CODE_REJECTED || pe.RejectCode != "word_filter" || pe.Temporary() {
		t.Fatalf("send on node 2: %v, want a permanent REJECTED word_filter", err)
	}
	// Text without the word still passes everywhere.
	for i, c := range senders {
		if wordRejected(ctx, t, c, "bob", "free tea") {
			t.Errorf("node %d rejects text without a listed word", i)
		}
	}

	del := time.Now()
	if err := adminClient(nodes[1]).DeleteWordList(ctx, "scam"); err != nil {
		t.Fatalf("delete list through node 1: %v", err)
	}
	delTook := time.Since(del)
	start = time.Now()
	if wordRejected(ctx, t, senders[1], "bob", text) {
		t.Error("node 1, which took the DELETE, still uses the list")
	}
	took = waitFilter(ctx, t, map[int]*client.Client{0: senders[0], 2: senders[2]}, text, false, start)
	t.Logf("DELETE through node 1 answered in %v; then the list was dropped on node 0 after %v, on node 2 after %v",
		delTook, took[0].Round(time.Millisecond), took[2].Round(time.Millisecond))
	if lists, err := adminClient(nodes[0]).WordLists(ctx); err != nil || len(lists) != 0 {
		t.Errorf("lists through node 0 after the delete: %+v, %v; want none", lists, err)
	}
}

// A ban through node 0 closes the banned user's sessions on nodes 1 and 2,
// their token is refused on every node, and their recent messages (sent
// through node 2, 1:1 and in a group) are deleted for everyone: the members
// on nodes 0 and 1 get moderated RECALL events, and history through every
// node shows them recalled, the others' messages untouched. The audit log
// read through node 2 names the API key that banned.
func TestClusterModerationBan(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, withModerationKeys)
	ctx := ctx10(t)
	if _, err := adminClient(nodes[0]).CreateUser(ctx, "mallory", ""); err != nil {
		t.Fatal(err)
	}
	token := nodes[1].mint(t, "mallory")
	_, m1 := dialWithToken(t, nodes[1], token, "m1", "phone")
	mallory, m2 := dialWithToken(t, nodes[2], token, "m2", "desktop")
	bob, ob := dialObserved(t, nodes[1], "bob", "b1", "phone")
	carol, oc := dialObserved(t, nodes[0], "carol", "c1", "phone")
	waitKnown(t, nodes, "mallory", "bob", "carol")
	g, err := adminClient(nodes[2]).CreateGroup(ctx, groupSpec("carol", "carol", "bob", "mallory"))
	if err != nil {
		t.Fatal(err)
	}
	group := g.ConversationId

	// Mallory's messages through node 2, and the others' that stay.
	spam := map[string]map[uint64]bool{} // conversation → mallory's seqs
	direct := ""
	for i := range 2 {
		ack, err := sendTo(ctx, mallory, "bob", fmt.Sprint("spam ", i))
		if err != nil {
			t.Fatal(err)
		}
		direct = ack.ConversationId
		ack2, err := mallory.SendToConversation(ctx, group, "text", []byte(fmt.Sprint("group spam ", i)))
		if err != nil {
			t.Fatal(err)
		}
		for conv, seq := range map[string]uint64{direct: ack.Seq, group: ack2.Seq} {
			if spam[conv] == nil {
				spam[conv] = map[uint64]bool{}
			}
			spam[conv][seq] = true
		}
	}
	if _, err := sendTo(ctx, bob, "mallory", "please stop"); err != nil {
		t.Fatal(err)
	}
	if _, err := carol.SendToConversation(ctx, group, "text", []byte("cut it out")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob (node 1) gets mallory's messages", func() bool {
		return len(ob.texts(direct)) == 2 && len(ob.texts(group)) == 3
	})
	eventually(t, "carol (node 0) gets mallory's group messages", func() bool { return len(oc.texts(group)) == 2 })

	res, err := client.NewAdmin(nodes[0].httpBase, clusterOpsKey).Ban(ctx, "mallory", "spam run", 1)
	if err != nil {
		t.Fatalf("ban through node 0: %v", err)
	}
	if res.MessagesRemoved != 4 || res.MoreMessages {
		t.Fatalf("ban: %+v; want mallory's 4 messages removed", res)
	}
	// sessions_closed counts the node asked's (docs/operations.md); none is on node 0.
	t.Logf("ban through node 0: %+v", res)
	waitClosed(t, "mallory's session on node 1", m1, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED)
	waitClosed(t, "mallory's session on node 2", m2, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED)
	for i, ts := range nodes {
		c, err := client.Dial(ctx, client.Options{Addr: ts.wsURL, Token: token, DeviceID: "m3", DeviceType: "web"})
		if err == nil {
			c.Close()
			t.Errorf("node %d accepts the banned user's token", i)
		} else if !client.IsCode(err, pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED) {
			t.Errorf("node %d: the banned user's token: %v, want UNAUTHENTICATED", i, err)
		}
	}
	if _, err := adminClient(nodes[2]).MintToken(ctx, "mallory", 0); !hasCode(err, http.StatusForbidden, "user_disabled") {
		t.Errorf("minting for mallory through node 2: %v, want 403 user_disabled", err)
	}

	// The members get a moderated recall of each of mallory's messages.
	recalls := func(o *recorder) map[string]map[uint64]bool {
		got := map[string]map[uint64]bool{}
		for _, m := range o.messages() {
			if m.Kind != pb.MessageKind_MESSAGE_KIND_RECALL {
				continue
			}
			if !m.GetEvent().GetModerated() {
				t.Fatalf("a recall not marked moderated: %v", m)
			}
			if got[m.ConversationId] == nil {
				got[m.ConversationId] = map[uint64]bool{}
			}
			got[m.ConversationId][m.GetEvent().GetTargetSeq()] = true
		}
		return got
	}
	eventually(t, "bob (node 1) gets moderated recalls of mallory's 4 messages", func() bool {
		got := recalls(ob)
		return len(got[direct]) == 2 && len(got[group]) == 2
	})
	eventually(t, "carol (node 0) gets moderated recalls of mallory's 2 group messages", func() bool {
		return len(recalls(oc)[group]) == 2
	})
	for who, got := range map[string]map[string]map[uint64]bool{"bob": recalls(ob), "carol": recalls(oc)} {
		for conv, seqs := range got {
			for seq := range seqs {
				if !spam[conv][seq] {
					t.Errorf("%s got a recall of %s seq %d, not mallory's", who, conv, seq)
				}
			}
		}
	}

	// History through every node: mallory's recalled, the rest kept.
	readers := []*client.Client{carol}
	for i, dev := range map[int]string{0: "desktop", 1: "web", 2: "tablet"} {
		c, _ := dialObserved(t, nodes[i], "bob", "b-"+dev, dev)
		readers = append(readers, c)
	}
	for _, c := range readers {
		who := fmt.Sprintf("%s on %s", c.AuthOk().UserId, c.AuthOk().SessionId)
		for conv, want := range map[string]int{direct: 3, group: 3} {
			if c.AuthOk().UserId == "carol" && conv == direct {
				continue
			}
			page, err := c.History(ctx, conv, 0, 50)
			if err != nil {
				t.Fatalf("%s: history of %s: %v", who, conv, err)
			}
			n := 0
			for _, m := range page.Messages {
				if m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL {
					continue
				}
				n++
				if m.From == "mallory" && (!m.Recalled || len(m.Payload) > 0 || !spam[conv][m.Seq]) {
					t.Errorf("%s: %s seq %d kept after the ban: %v", who, conv, m.Seq, m)
				}
				if m.From != "mallory" && (m.Recalled || len(m.Payload) == 0) {
					t.Errorf("%s: %s seq %d, not mallory's, removed: %v", who, conv, m.Seq, m)
				}
			}
			if n != want {
				t.Errorf("%s: %d messages in %s, want %d", who, n, conv, want)
			}
		}
	}

	entries, _, err := adminClient(nodes[2]).AuditLog(ctx, 0, 50)
	if err != nil {
		t.Fatalf("audit log through node 2: %v", err)
	}
	var ban *client.AuditEntry
	for i, e := range entries {
		if e.Action == "POST /v1/admin/users/{id}/ban" {
			ban = &entries[i]
		}
	}
	if ban == nil || ban.Actor != "ops" || ban.Target != "/v1/admin/users/mallory/ban" ||
		!strings.Contains(string(ban.Detail), `"reason":"spam run"`) || !strings.Contains(string(ban.Detail), `"messages_removed":4`) {
		t.Errorf("the ban in the audit log through node 2: %+v (entries %+v)", ban, entries)
	}
}

// dialWithToken connects to ts with a given token over WebSocket.
func dialWithToken(t *testing.T, ts *testServer, token, deviceID, deviceType string) (*client.Client, *recorder) {
	t.Helper()
	c, rec, err := dialRecorded(t, client.Options{Addr: ts.wsURL, Token: token, DeviceID: deviceID, DeviceType: deviceType})
	if err != nil {
		t.Fatalf("dial %s on %s: %v", deviceID, ts.httpBase, err)
	}
	return c, rec
}

// A user on node 1 reports a message sent from node 2: the report is
// listed through node 2's admin API with the message as stored, edits after
// it leave it alone, and resolving it through node 0 shows it resolved
// through every node.
func TestClusterModerationReports(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 3, withModerationKeys)
	ctx := ctx10(t)
	alice, _ := dialObserved(t, nodes[2], "alice", "a1", "phone")
	bob, ob := dialObserved(t, nodes[1], "bob", "b1", "phone")
	waitKnown(t, nodes, "alice", "bob")
	ack, err := sendTo(ctx, alice, "bob", "you will regret this")
	if err != nil {
		t.Fatal(err)
	}
	conv := ack.ConversationId
	eventually(t, "bob (node 1) gets alice's message", func() bool { return len(ob.texts(conv)) == 1 })
	page, err := bob.History(ctx, conv, ack.Seq+1, 1)
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("bob reads the message: %v, %v", page, err)
	}
	stored := page.Messages[0]
	if err := bob.ReportMessage(ctx, conv, ack.Seq, "abuse", "threatening me"); err != nil {
		t.Fatalf("report through node 1: %v", err)
	}
	// The sender changes the message afterwards, through node 2.
	if _, err := alice.Edit(ctx, conv, ack.Seq, "text", []byte("have a nice day")); err != nil {
		t.Fatal(err)
	}

	reports, next, err := adminClient(nodes[2]).Reports(ctx, "open", "", 10)
	if err != nil || len(reports) != 1 || next != "" {
		t.Fatalf("open reports through node 2: %+v, %q, %v; want one", reports, next, err)
	}
	r := reports[0]
	var m pb.Message
	if err := protojson.Unmarshal(r.Message, &m); err != nil {
		t.Fatalf("the report's message %s: %v", r.Message, err)
	}
	if r.Reporter != "bob" || r.ConversationID != conv || r.Seq != ack.Seq || r.Reason != "abuse" ||
		r.Note != "threatening me" || r.Status != "open" || r.ClosedAt != nil {
		t.Errorf("report through node 2: %+v", r)
	}
	if !proto.Equal(&m, stored) {
		t.Errorf("the report's message %v\nwant it as stored when reported %v", &m, stored)
	}

	resolved, err := client.NewAdmin(nodes[0].httpBase, clusterModsKey).ResolveReport(ctx, r.ID, "warned alice")
	if err != nil || resolved.Status != "resolved" || resolved.Resolution != "warned alice" || resolved.ClosedBy != "mods" || resolved.ClosedAt == nil {
		t.Fatalf("resolve through node 0: %+v, %v", resolved, err)
	}
	for i, ts := range nodes {
		adm := adminClient(ts)
		if open, _, err := adm.Reports(ctx, "open", "", 10); err != nil || len(open) != 0 {
			t.Errorf("node %d: open reports after resolving: %+v, %v", i, open, err)
		}
		done, _, err := adm.Reports(ctx, "resolved", "", 10)
		if err != nil || len(done) != 1 || done[0].ID != r.ID || done[0].Status != "resolved" ||
			done[0].ClosedBy != "mods" || done[0].Resolution != "warned alice" || done[0].ClosedAt == nil {
			t.Errorf("node %d: resolved reports: %+v, %v", i, done, err)
		}
	}
	if _, err := adminClient(nodes[1]).DismissReport(ctx, r.ID, ""); !isHTTP(err, http.StatusConflict) {
		t.Errorf("dismissing the resolved report through node 1: %v, want 409", err)
	}
}

package server_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/internal/migrate"
	"github.com/parleyim/parley/internal/migrate/migratetest"
	"github.com/parleyim/parley/internal/store/pebblestore"
	"github.com/parleyim/parley/internal/store/pgstore"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// convState is what a user sees of a conversation in its list.
type convState struct {
	LastSeq, Delivered, Read, Unread uint64
}

func convStates(t *testing.T, ctx context.Context, c *client.Client) map[string]convState {
	t.Helper()
	list, err := c.AllConversations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]convState)
	for _, cv := range list {
		out[cv.ConversationId] = convState{cv.LastSeq, cv.DeliveredSeq, cv.ReadSeq, cv.UnreadCount}
	}
	return out
}

// history is a conversation's messages as "seq from payload recalled edited" lines.
func history(t *testing.T, ctx context.Context, c *client.Client, conv string) []string {
	t.Helper()
	page, err := c.SyncMessages(ctx, conv, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range page.Messages {
		out = append(out, fmt.Sprintf("%d %s %q %v %v", m.Seq, m.From, m.Payload, m.Recalled, m.EditedAt != 0))
	}
	return out
}

func members(t *testing.T, ctx context.Context, c *client.Client, conv string) []string {
	t.Helper()
	page, err := c.Members(ctx, conv, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range page.Members {
		out = append(out, fmt.Sprintf("%s %v", m.UserId, m.Role))
	}
	return out
}

// TestMigrateEmbeddedToCluster: a single node on embedded storage takes
// 1:1 and group traffic (ACKed sends, an edit, a recall, read cursors, a
// member leaving), stops, is migrated to PostgreSQL, and a two-node
// cluster with the same secrets serves it all: the same messages at the
// same seqs, old tokens accepted, a resend of an old client id answered as
// a duplicate of the original, a new send at the last seq + 1, unread
// counts and membership unchanged.
func TestMigrateEmbeddedToCluster(t *testing.T) {
	url := migratetest.PGURL(t)
	schema := migratetest.FreshSchema(t, url)
	dir := t.TempDir()
	ts := startServer(t, func(c *server.Config) { c.DataDir = dir; c.TokenKey = testTokenKey })
	tokens := map[string]string{}
	for _, u := range []string{"alice", "bob", "carol"} {
		tokens[u] = ts.mint(t, u)
	}
	ctx := ctx10(t)
	alice, _ := ts.connectToken(t, tokens["alice"], "a1", "phone", transports[0])
	bob, _ := ts.connectToken(t, tokens["bob"], "b1", "phone", transports[2])
	carol, _ := ts.connectToken(t, tokens["carol"], "c1", "phone", transports[1])

	var acks []*pb.SendAck
	for i := range 6 {
		ack, err := alice.Send(ctx, &pb.Send{ClientMsgId: fmt.Sprint("a-", i), To: "bob", ContentType: "text/plain", Payload: []byte(fmt.Sprint("hi ", i))})
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, ack)
	}
	dm := acks[0].ConversationId
	if _, err := bob.SendText(ctx, "alice", "hello alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Edit(ctx, dm, acks[1].Seq, "text/plain", []byte("hi 1, edited")); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Recall(ctx, dm, acks[2].Seq); err != nil {
		t.Fatal(err)
	}
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "team", UserIds: []string{"bob", "carol"}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if _, err := carol.Send(ctx, &pb.Send{ClientMsgId: fmt.Sprint("c-", i), ConversationId: g.ConversationId, ContentType: "text/plain",
			Payload: []byte(fmt.Sprint("group ", i))}); err != nil {
			t.Fatal(err)
		}
	}
	if err := carol.LeaveGroup(ctx, g.ConversationId); err != nil {
		t.Fatal(err)
	}
	if err := bob.MarkRead(ctx, dm, acks[3].Seq); err != nil {
		t.Fatal(err)
	}
	if err := bob.MarkRead(ctx, g.ConversationId, 2); err != nil {
		t.Fatal(err)
	}
	eventually(t, "bob's read cursors stored", func() bool {
		s := convStates(t, ctx, bob)
		return s[dm].Unread == s[dm].LastSeq-acks[3].Seq && s[g.ConversationId].Unread == s[g.ConversationId].LastSeq-2
	})
	for _, c := range []*client.Client{alice, bob, carol} {
		c.Close()
	}
	shutdown(t, ts)

	// What the node serves from its store after a restart is what the
	// cluster must serve (a running node also holds cursor moves not yet
	// written, which its shutdown writes).
	ts = startServer(t, func(c *server.Config) { c.DataDir = dir; c.TokenKey = testTokenKey })
	ctx = ctx10(t)
	alice, _ = ts.connectToken(t, tokens["alice"], "a1", "phone", transports[0])
	bob, _ = ts.connectToken(t, tokens["bob"], "b1", "phone", transports[2])
	before := map[string]map[string]convState{"alice": convStates(t, ctx, alice), "bob": convStates(t, ctx, bob)}
	histories := map[string][]string{dm: history(t, ctx, alice, dm), g.ConversationId: history(t, ctx, alice, g.ConversationId)}
	groupMembers := members(t, ctx, bob, g.ConversationId)
	if before["bob"][g.ConversationId].Unread == 0 || len(histories[g.ConversationId]) < 6 {
		t.Fatalf("nothing to compare: bob's state %v, group history %v", before["bob"], histories[g.ConversationId])
	}
	alice.Close()
	bob.Close()
	shutdown(t, ts)

	// The move.
	quiet := slog.New(slog.DiscardHandler)
	src, err := pebblestore.Open(filepath.Join(dir, "store"), pebblestore.Options{Logger: quiet, MinFreeDisk: -1})
	if err != nil {
		t.Fatal(err)
	}
	dst, err := pgstore.Open(context.Background(), url, pgstore.Options{Schema: schema, Logger: quiet, ConnectTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	im := dst.Importer()
	rep, err := migrate.Run(context.Background(), src.Exporter(), im, migrate.Options{})
	im.Close()
	_ = dst.Close()
	_ = src.Close()
	if err != nil || !rep.OK() {
		t.Fatalf("migrate: %v %v", err, rep.Differences)
	}

	nodes := startCluster(t, 2, func(i int, c *server.Config) { c.PostgresSchema = schema })
	ctx = ctx10(t)
	alice, _ = nodes[0].connectToken(t, tokens["alice"], "a1", "phone", transports[0])
	bob, _ = nodes[1].connectToken(t, tokens["bob"], "b1", "phone", transports[2])
	for u, c := range map[string]*client.Client{"alice": alice, "bob": bob} {
		if got := convStates(t, ctx, c); fmt.Sprint(got) != fmt.Sprint(before[u]) {
			t.Errorf("%s's conversations after the move: %v, before: %v", u, got, before[u])
		}
	}
	for conv, want := range histories {
		if got := history(t, ctx, bob, conv); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("history of %s after the move:\n%v\nbefore:\n%v", conv, got, want)
		}
	}
	if got := members(t, ctx, bob, g.ConversationId); fmt.Sprint(got) != fmt.Sprint(groupMembers) {
		t.Errorf("members after the move: %v, before: %v", got, groupMembers)
	}
	ack, err := alice.Send(ctx, &pb.Send{ClientMsgId: "a-0", To: "bob", ContentType: "text/plain", Payload: []byte("resent")})
	if err != nil || !ack.Duplicate || ack.Seq != acks[0].Seq {
		t.Fatalf("resend of a-0 after the move: %v %v, want a duplicate at seq %d", ack, err, acks[0].Seq)
	}
	ack, err = alice.Send(ctx, &pb.Send{ClientMsgId: "a-new", To: "bob", ContentType: "text/plain", Payload: []byte("new")})
	if err != nil || ack.Duplicate || ack.Seq != before["alice"][dm].LastSeq+1 {
		t.Fatalf("new send after the move: %v %v, want seq %d", ack, err, before["alice"][dm].LastSeq+1)
	}
	// Delivered through the cluster to bob, connected to the other node.
	eventually(t, "bob's unread count grows by the new message", func() bool {
		return convStates(t, ctx, bob)[dm].Unread == before["bob"][dm].Unread+1
	})
}

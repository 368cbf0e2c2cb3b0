package server_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/server"
)

// found returns "conv#seq" of every hit of query for c (all pages).
func found(t *testing.T, c *client.Client, q *pb.Search) []string {
	t.Helper()
	ctx := ctx10(t)
	var out []string
	q.Before = nil
	for range 50 {
		res, err := c.Search(ctx, q)
		if err != nil {
			t.Fatalf("search %q: %v", q.Query, err)
		}
		for _, h := range res.Hits {
			out = append(out, fmt.Sprintf("%s#%d", h.ConversationId, h.Seq))
		}
		if res.Next == nil {
			return out
		}
		q.Before = res.Next
	}
	t.Fatalf("search %q: more than 50 pages", q.Query)
	return nil
}

// waitFound waits until query finds exactly want for c (the index follows
// the store a moment later).
func waitFound(t *testing.T, c *client.Client, query string, want ...string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for {
		got = found(t, c, &pb.Search{Query: query})
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("search %q found %v, want %v", query, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Search shows a user only what they may read: their conversations, in a
// group only after they joined and before they left; never what was
// recalled or deleted for them; an edited message by its current text; a
// shadow-muted sender's message only to the sender.
func TestSearchVisibility(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	tc := transports[0]
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "cli", tc)
	bob, _ := ts.connect(t, "bob", "b1", "cli", tc)
	carol, _ := ts.connect(t, "carol", "c1", "cli", tc)
	eve, _ := ts.connect(t, "eve", "e1", "cli", tc)

	send := func(c *client.Client, conv, to, text string) string {
		t.Helper()
		f := &pb.Send{ClientMsgId: fmt.Sprintf("%p-%s", c, text), ConversationId: conv, To: to, ContentType: "text/plain", Payload: []byte(text)}
		ack, err := c.Do(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Send{Send: f}})
		if err != nil {
			t.Fatalf("send %q: %v", text, err)
		}
		return fmt.Sprintf("%s#%d", ack.GetSendAck().ConversationId, ack.GetSendAck().Seq)
	}
	d1 := send(alice, "", "bob", "the Harbour café opens at nine")
	g, err := alice.CreateGroup(ctx, &pb.CreateGroup{Name: "trip", UserIds: []string{"bob"}})
	if err != nil {
		t.Fatal(err)
	}
	gid := g.ConversationId
	g1 := send(bob, gid, "", "harbour before carol joined")
	if err := alice.AddMembers(ctx, gid, "carol"); err != nil {
		t.Fatal(err)
	}
	g2 := send(alice, gid, "", "harbour after carol joined")
	if err := alice.RemoveMember(ctx, gid, "carol"); err != nil {
		t.Fatal(err)
	}
	g3 := send(bob, gid, "", "harbour after carol left")

	waitFound(t, alice, "harbour", d1, g1, g2, g3)
	waitFound(t, bob, "HARBOUR", d1, g1, g2, g3) // case does not matter
	waitFound(t, carol, "harbour", g2)           // only while she was in
	waitFound(t, eve, "harbour")                 // none of hers
	waitFound(t, bob, "cafe", d1)                // accents do not matter

	// A filter on a conversation one does not read is refused, whether it
	// exists or not.
	for _, conv := range []string{gid, "g:nosuchgroup", "p:alice:bob"} {
		if _, err := eve.Search(ctx, &pb.Search{Query: "harbour", ConversationId: conv}); errCode(err) != pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED {
			t.Fatalf("eve searching %s: %v, want PERMISSION_DENIED", conv, err)
		}
	}
	if got := found(t, bob, &pb.Search{Query: "harbour", ConversationId: gid, From: "alice"}); !slices.Equal(got, []string{g2}) {
		t.Fatalf("filtered by conversation and sender: %v", got)
	}

	// An edit is found by its new text only; a recall by nothing.
	seq := func(ref string) uint64 {
		var n uint64
		fmt.Sscanf(ref[strings.LastIndex(ref, "#")+1:], "%d", &n)
		return n
	}
	if _, err := bob.Edit(ctx, gid, seq(g3), "text/plain", []byte("lighthouse after carol left")); err != nil {
		t.Fatal(err)
	}
	waitFound(t, alice, "lighthouse", g3)
	waitFound(t, alice, "harbour", d1, g1, g2)
	if _, err := alice.Recall(ctx, gid, seq(g2)); err != nil {
		t.Fatal(err)
	}
	waitFound(t, bob, "harbour", d1, g1)

	// Deleted for me: gone for that user only; a cleared conversation too.
	if err := bob.DeleteForMe(ctx, gid, seq(g1)); err != nil {
		t.Fatal(err)
	}
	waitFound(t, bob, "harbour", d1)
	waitFound(t, alice, "harbour", d1, g1)
	if err := alice.ClearConversation(ctx, "p:alice:bob"); err != nil {
		t.Fatal(err)
	}
	waitFound(t, alice, "harbour", g1)
	waitFound(t, bob, "harbour", d1)

	// A shadow-muted sender's message is found by the sender alone.
	if err := adminClient(ts).SetShadowMuted(ctx, "eve", true); err != nil {
		t.Fatal(err)
	}
	eve2, _ := ts.connect(t, "eve", "e2", "cli", tc)
	e1 := send(eve2, "", "alice", "harbour from a muted sender")
	waitFound(t, eve2, "harbour", e1)
	waitFound(t, alice, "harbour", g1)

	// Bad input: one clear code each.
	for name, q := range map[string]*pb.Search{
		"empty":      {},
		"too long":   {Query: strings.Repeat("a", 257)},
		"limit":      {Query: "a", Limit: 101},
		"time range": {Query: "a", Since: 2, Until: 1},
	} {
		if _, err := bob.Search(ctx, q); errCode(err) != pb.ErrorCode_ERROR_CODE_BAD_REQUEST {
			t.Errorf("%s: %v, want BAD_REQUEST", name, err)
		}
	}
}

// Search finds words in every script, and the search text an app sends
// beside a payload the server cannot read (never the payload itself).
func TestSearchLanguagesAndSearchText(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	tc := transports[0]
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "cli", tc)
	bob, _ := ts.connect(t, "bob", "b1", "cli", tc)
	texts := []string{
		"Wir treffen uns an der Straße",  // German
		"Встреча у старого моста",        // Russian
		"Συνάντηση στο λιμάνι",           // Greek
		"我们明天在图书馆门口见面",                   // Chinese
		"明日は東京駅で会いましょう",                  // Japanese
		"내일 도서관 앞에서 만나요",                 // Korean
		"พบกันที่สถานีรถไฟพรุ่งนี้",      // Thai
		"Rendez-vous à l'Hôtel de Ville", // French
	}
	refs := make([]string, len(texts))
	for i, text := range texts {
		ack, err := alice.SendText(ctx, "bob", text)
		if err != nil {
			t.Fatal(err)
		}
		refs[i] = fmt.Sprintf("%s#%d", ack.ConversationId, ack.Seq)
	}
	sealed, err := alice.Do(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_Send{Send: &pb.Send{
		ClientMsgId: "sealed", To: "bob", ContentType: "application/x-sealed", Payload: []byte("plaintext-not-indexed"), SearchText: "quarterly budget"}}})
	if err != nil {
		t.Fatal(err)
	}
	sealedRef := fmt.Sprintf("%s#%d", sealed.GetSendAck().ConversationId, sealed.GetSendAck().Seq)
	for query, want := range map[string]string{
		"strasse": refs[0],
		"МОСТА":   refs[1],
		"λιμανι":  refs[2],
		"图书":      refs[3], // two characters inside a longer run
		"東京":      refs[4],
		"도서관":     refs[5],
		"สถานี":   refs[6],
		"hotel":   refs[7],
		"budget":  sealedRef,
		"东京":      "", // not the same characters
	} {
		if want == "" {
			waitFound(t, bob, query)
		} else {
			waitFound(t, bob, query, want)
		}
	}
	waitFound(t, bob, "plaintext-not-indexed")
	// A phrase must be in order.
	if got := found(t, bob, &pb.Search{Query: "Ville de Hôtel", Phrase: true}); len(got) != 0 {
		t.Fatalf("a phrase out of order matched %v", got)
	}
	if got := found(t, bob, &pb.Search{Query: "hotel de ville", Phrase: true}); !slices.Equal(got, []string{refs[7]}) {
		t.Fatalf("a phrase: %v", got)
	}
	// Snippets hold the match, highlighted.
	res, err := bob.Search(ctx, &pb.Search{Query: "straße"})
	if err != nil || len(res.Hits) != 1 {
		t.Fatalf("snippet search: %v %v", res, err)
	}
	h := res.Hits[0]
	if len(h.Highlights) == 0 || !strings.EqualFold(h.Snippet[h.Highlights[0].Start:h.Highlights[0].End], "Straße") {
		t.Fatalf("highlight of %q: %v", h.Snippet, h.Highlights)
	}
}

// Pages are newest first, without gaps or repeats, and the index catches up
// with what was stored while the server was down.
func TestSearchPagesAndCatchesUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts := startServer(t, func(c *server.Config) { c.DataDir = dir })
	tc := transports[0]
	alice, _ := ts.connect(t, "alice", "a1", "cli", tc)
	ctx := ctx10(t)
	var want []string
	for i := range 45 {
		ack, err := alice.SendText(ctx, "bob", fmt.Sprintf("lantern number %d", i))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%s#%d", ack.ConversationId, ack.Seq))
	}
	waitFound(t, alice, "lantern", want...)
	eventually(t, "the index metrics say it caught up", func() bool {
		return diskMetric(t, ts, "parley_search_index_lag") == 0 && diskMetric(t, ts, "parley_search_indexed_total") >= 45
	})
	got := found(t, alice, &pb.Search{Query: "lantern", Limit: 10})
	rev := slices.Clone(want)
	slices.Reverse(rev)
	if !slices.Equal(got, rev) {
		t.Fatalf("pages of 10: %v, want newest first %v", got, rev)
	}
	alice.Close()
	shutdown(t, ts)

	// Search off: the store keeps its log, the index is not fed.
	off := startServer(t, func(c *server.Config) { c.DataDir = dir; c.Search = "off" })
	a2, _ := off.connect(t, "alice", "a2", "cli", tc)
	for i := range 5 {
		ack, err := a2.SendText(ctx, "bob", fmt.Sprintf("lantern later %d", i))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, fmt.Sprintf("%s#%d", ack.ConversationId, ack.Seq))
	}
	if _, err := a2.SearchText(ctx, "lantern", 0); errCode(err) != pb.ErrorCode_ERROR_CODE_UNAVAILABLE {
		t.Fatalf("search with search off: %v, want UNAVAILABLE", err)
	}
	a2.Close()
	shutdown(t, off)

	again := startServer(t, func(c *server.Config) { c.DataDir = dir })
	a3, _ := again.connect(t, "alice", "a3", "cli", tc)
	waitFound(t, a3, "lantern", want...)
	if n := diskMetric(t, again, "parley_searches_total"); n < 1 {
		t.Fatalf("parley_searches_total %v", n)
	}
}

// kill -9 while the index lags behind a burst of sends: after the restart
// the index catches up from its own position, and every acknowledged
// message is found once.
func TestKill9SearchCatchesUp(t *testing.T) {
	dir := t.TempDir()
	ch := startChild(t, dir)
	ctx := ctx10(t)
	tok, err := client.MintToken(ctx, ch.httpBase, testAPIKey, "alice", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.Dial(ctx, client.Options{Addr: ch.tcp, Token: tok.Token, DeviceID: "d1", DeviceType: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 600
	acks := make([]*pb.SendAck, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			ack, err := c.Send(ctx, &pb.Send{ClientMsgId: fmt.Sprint("m", i), To: fmt.Sprint("peer", i%7), ContentType: "text", Payload: []byte(fmt.Sprintf("beacon %d", i))})
			acks[i] = ack
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	ch.kill9(t)
	c.Close()

	ch = startChild(t, dir)
	c, err = client.Dial(ctx, client.Options{Addr: ch.tcp, Token: tok.Token, DeviceID: "d1", DeviceType: "cli"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var want []string
	for _, a := range acks {
		want = append(want, fmt.Sprintf("%s#%d", a.ConversationId, a.Seq))
	}
	waitFound(t, c, "beacon", want...)
}

// The admin API searches every conversation, a shadow-muted sender's
// messages included, and the search is in the audit log.
func TestAdminSearch(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	tc := transports[0]
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "cli", tc)
	bob, _ := ts.connect(t, "bob", "b1", "cli", tc)
	admin := adminClient(ts)
	a1, err := alice.SendText(ctx, "bob", "cheap watches for sale")
	if err != nil {
		t.Fatal(err)
	}
	ts.mint(t, "carol") // an account to mute
	if err := admin.SetShadowMuted(ctx, "carol", true); err != nil {
		t.Fatal(err)
	}
	carol, _ := ts.connect(t, "carol", "c1", "cli", tc)
	c1, err := carol.SendText(ctx, "dave", "cheap watches, message me")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{fmt.Sprintf("%s#%d", c1.ConversationId, c1.Seq), fmt.Sprintf("%s#%d", a1.ConversationId, a1.Seq)}
	var got []string
	eventually(t, "the admin finds both", func() bool {
		res, err := admin.Search(ctx, &pb.Search{Query: "cheap watches"})
		if err != nil {
			t.Fatal(err)
		}
		got = got[:0]
		for _, h := range res.Hits {
			got = append(got, fmt.Sprintf("%s#%d", h.ConversationId, h.Seq))
		}
		return slices.Equal(got, want)
	})
	// bob sees alice's only; a filter on the conversation narrows the admin's.
	waitFound(t, bob, "cheap watches", want[1])
	res, err := admin.Search(ctx, &pb.Search{Query: "watches", ConversationId: c1.ConversationId})
	if err != nil || len(res.Hits) != 1 || res.Hits[0].From != "carol" {
		t.Fatalf("admin search in one conversation: %v %v", res, err)
	}
	if _, err := admin.Search(ctx, &pb.Search{}); !client.IsCode(err, pb.ErrorCode_ERROR_CODE_BAD_REQUEST) {
		t.Fatalf("an empty admin search: %v", err)
	}
	entries, _, err := admin.AuditLog(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	audited := 0
	for _, e := range entries {
		if e.Action == "POST /v1/admin/search" && strings.Contains(string(e.Detail), "watches") {
			audited++
		}
	}
	if audited < 2 {
		t.Fatalf("admin searches in the audit log: %d of %v", audited, entries)
	}
}

// A block changes what can be sent, not what was: after bob blocks alice
// her new message is refused and found by nobody, and each side still finds
// the earlier messages their history shows.
func TestSearchAfterBlock(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	tc := transports[0]
	ctx := ctx10(t)
	alice, _ := ts.connect(t, "alice", "a1", "cli", tc)
	bob, _ := ts.connect(t, "bob", "b1", "cli", tc)
	ack, err := alice.SendText(ctx, "bob", "see you at the quarry")
	if err != nil {
		t.Fatal(err)
	}
	before := fmt.Sprintf("%s#%d", ack.ConversationId, ack.Seq)
	if err := bob.Block(ctx, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.SendText(ctx, "bob", "quarry again?"); errCode(err) != pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED {
		t.Fatalf("a send to the blocker: %v", err)
	}
	for _, c := range []*client.Client{alice, bob} {
		waitFound(t, c, "quarry", before)
		page, err := c.History(ctx, ack.ConversationId, 0, 10)
		if err != nil || len(page.Messages) != 1 {
			t.Fatalf("history after the block: %v %v", page, err)
		}
	}
}

package server_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parleyim/parley/client"
	"github.com/parleyim/parley/server"
)

// adminJSON GETs an admin URL and decodes its JSON answer into out,
// failing t unless the status is want.
func adminJSON(t *testing.T, u string, want int, out any) {
	t.Helper()
	code, body := adminGet(t, u)
	if code != want {
		t.Fatalf("GET %s: HTTP %d %s, want %d", u, code, body, want)
	}
	if err := json.Unmarshal([]byte(body), out); err != nil {
		t.Fatalf("GET %s: %v in %s", u, err, body)
	}
}

type userPage struct {
	Users []struct {
		UserID   string `json:"user_id"`
		Disabled bool   `json:"disabled"`
	} `json:"users"`
	Next string `json:"next"`
}

// listAllUsers pages through GET /v1/admin/users with prefix and limit.
func listAllUsers(t *testing.T, ts *testServer, prefix string, limit int) []string {
	t.Helper()
	var ids []string
	after := ""
	for range 100 {
		var p userPage
		adminJSON(t, ts.httpBase+"/v1/admin/users?"+url.Values{"prefix": {prefix}, "after": {after}, "limit": {strconv.Itoa(limit)}}.Encode(), 200, &p)
		if len(p.Users) > limit {
			t.Fatalf("page of %d users, limit %d", len(p.Users), limit)
		}
		for _, u := range p.Users {
			ids = append(ids, u.UserID)
		}
		if p.Next == "" {
			return ids
		}
		after = p.Next
	}
	t.Fatal("the listing never ends")
	return nil
}

// Users and groups are found by id prefix, in id order, page by page; a
// user's groups show their role, and that they left once removed.
func TestAdminConsoleListsUsersAndGroups(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	adm := adminClient(ts)
	ctx := ctx10(t)
	// Lengths differ, so an order by length would differ from the id order.
	ids := []string{"zed", "ann", "anna", "annabel", "an", "bo", "ann.x", "annie"}
	for _, id := range ids {
		if _, err := adm.CreateUser(ctx, id, ""); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
	}
	sorted := slices.Clone(ids)
	slices.Sort(sorted)
	if got := listAllUsers(t, ts, "", 3); !slices.Equal(got, sorted) {
		t.Fatalf("all users in pages of 3: %q, want %q", got, sorted)
	}
	want := []string{"ann", "ann.x", "anna", "annabel", "annie"}
	if got := listAllUsers(t, ts, "ann", 2); !slices.Equal(got, want) {
		t.Fatalf("users with prefix ann: %q, want %q", got, want)
	}
	if got := listAllUsers(t, ts, "nobody", 5); len(got) != 0 {
		t.Fatalf("users with prefix nobody: %q", got)
	}
	// Bad input is refused with bad_request, not listed around.
	for _, q := range []string{"prefix=a%20b", "prefix=" + strings.Repeat("a", 65), "after=%2F", "limit=x", "limit=-1"} {
		var e apiError
		adminJSON(t, ts.httpBase+"/v1/admin/users?"+q, 400, &e)
		if e.Error.Code != "bad_request" {
			t.Fatalf("?%s: code %q, want bad_request", q, e.Error.Code)
		}
	}
	if code, _ := httpDo(t, http.MethodGet, ts.httpBase+"/v1/admin/users", nil, nil); code != 401 {
		t.Fatalf("listing users without the API key: HTTP %d, want 401", code)
	}

	g1, err := adm.CreateGroup(ctx, client.GroupSpec{Owner: "ann", Name: "first", UserIDs: []string{"bo", "zed"}})
	if err != nil {
		t.Fatal(err)
	}
	g2, err := adm.CreateGroup(ctx, client.GroupSpec{Owner: "bo", Name: "second", UserIDs: []string{"ann"}})
	if err != nil {
		t.Fatal(err)
	}
	type groupPage struct {
		Groups []struct {
			ConversationID string `json:"conversation_id"`
			Name           string `json:"name"`
			Owner          string `json:"owner"`
			Dissolved      bool   `json:"dissolved"`
			Role           string `json:"role"`
			Left           bool   `json:"left"`
		} `json:"groups"`
		Next string `json:"next"`
	}
	var gp groupPage
	adminJSON(t, ts.httpBase+"/v1/admin/groups?limit=1", 200, &gp)
	first := min(g1.ConversationId, g2.ConversationId)
	if len(gp.Groups) != 1 || gp.Groups[0].ConversationID != first || gp.Next != first {
		t.Fatalf("first page of groups: %+v, want %s alone with next", gp, first)
	}
	adminJSON(t, ts.httpBase+"/v1/admin/groups?limit=5&after="+url.QueryEscape(first), 200, &gp)
	if len(gp.Groups) != 1 || gp.Groups[0].ConversationID != max(g1.ConversationId, g2.ConversationId) || gp.Next != "" {
		t.Fatalf("second page of groups: %+v", gp)
	}
	adminJSON(t, ts.httpBase+"/v1/admin/groups?prefix="+url.QueryEscape(g1.ConversationId), 200, &gp)
	if len(gp.Groups) != 1 || gp.Groups[0].Name != "first" || gp.Groups[0].Owner != "ann" {
		t.Fatalf("groups with prefix %s: %+v", g1.ConversationId, gp)
	}
	var e apiError
	adminJSON(t, ts.httpBase+"/v1/admin/groups?prefix=x:", 400, &e)

	// ann owns g1 and is a member of g2; removed from g2, she has left it.
	adminJSON(t, ts.httpBase+"/v1/admin/users/ann/groups", 200, &gp)
	roles := map[string]string{}
	for _, g := range gp.Groups {
		roles[g.ConversationID] = g.Role
	}
	if roles[g1.ConversationId] != "owner" || roles[g2.ConversationId] != "member" || len(gp.Groups) != 2 {
		t.Fatalf("ann's groups: %+v", gp)
	}
	if err := adm.RemoveMember(ctx, g2.ConversationId, "ann"); err != nil {
		t.Fatal(err)
	}
	if err := adm.Dissolve(ctx, g1.ConversationId); err != nil {
		t.Fatal(err)
	}
	adminJSON(t, ts.httpBase+"/v1/admin/users/ann/groups?limit=1", 200, &gp)
	if len(gp.Groups) != 1 || gp.Next != first {
		t.Fatalf("ann's groups, one a page: %+v", gp)
	}
	adminJSON(t, ts.httpBase+"/v1/admin/users/ann/groups", 200, &gp)
	for _, g := range gp.Groups {
		switch g.ConversationID {
		case g1.ConversationId:
			if !g.Dissolved {
				t.Fatalf("dissolved group listed as %+v", g)
			}
		case g2.ConversationId:
			if !g.Left || g.Role != "" {
				t.Fatalf("group ann was removed from listed as %+v", g)
			}
		}
	}
}

type overview struct {
	UserID       string           `json:"user_id"`
	Disabled     bool             `json:"disabled"`
	Online       []map[string]any `json:"online"`
	LastSeen     *time.Time       `json:"last_seen"`
	PayloadBytes uint64           `json:"payload_bytes"`
	MediaFiles   int64            `json:"media_files"`
}

// A user's overview: devices online, then the time they were last seen,
// and the payload bytes they stored.
func TestAdminConsoleUserOverview(t *testing.T) {
	t.Parallel()
	ts := startServer(t, nil)
	adm := adminClient(ts)
	ctx := ctx10(t)
	for _, id := range []string{"alice", "bob"} {
		if _, err := adm.CreateUser(ctx, id, ""); err != nil {
			t.Fatal(err)
		}
	}
	var o overview
	adminJSON(t, ts.httpBase+"/v1/admin/users/alice/overview", 200, &o)
	if o.UserID != "alice" || len(o.Online) != 0 || o.LastSeen != nil || o.PayloadBytes != 0 {
		t.Fatalf("overview of a new user: %+v", o)
	}
	alice := ts.dialOnly(t, "alice", "a1", "phone")
	if _, err := alice.SendText(ctx, "bob", "hello"); err != nil {
		t.Fatal(err)
	}
	adminJSON(t, ts.httpBase+"/v1/admin/users/alice/overview", 200, &o)
	if len(o.Online) != 1 || o.Online[0]["device_id"] != "a1" || o.PayloadBytes != 5 {
		t.Fatalf("overview with a device online after one send: %+v", o)
	}
	alice.Close()
	eventually(t, "alice's last seen time", func() bool {
		adminJSON(t, ts.httpBase+"/v1/admin/users/alice/overview", 200, &o)
		return len(o.Online) == 0 && o.LastSeen != nil && time.Since(*o.LastSeen) < time.Minute
	})
	var e apiError
	adminJSON(t, ts.httpBase+"/v1/admin/users/nobody/overview", 404, &e)
	adminJSON(t, ts.httpBase+"/v1/admin/users/a%20b/overview", 400, &e)
	adminJSON(t, ts.httpBase+"/v1/admin/users/a%20b/groups", 400, &e)
}

// Storage size, queues and the node's figures come from the running
// server: they move with what it does.
func TestAdminConsoleOperations(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
	defer hook.Close()
	ts := startServer(t, func(c *server.Config) { c.WebhookURLs = []string{hook.URL} })
	ctx := ctx10(t)

	var st struct {
		Bytes int64 `json:"bytes"`
	}
	adminJSON(t, ts.httpBase+"/v1/admin/storage", 200, &st)
	if st.Bytes <= 0 {
		t.Fatalf("storage: %d bytes", st.Bytes)
	}
	before := st.Bytes

	alice := ts.dialOnly(t, "alice", "a1", "phone")
	big := strings.Repeat("x", 30000)
	for range 20 {
		if _, err := alice.SendText(ctx, "bob", big); err != nil {
			t.Fatal(err)
		}
	}
	adminJSON(t, ts.httpBase+"/v1/admin/storage", 200, &st)
	if st.Bytes <= before {
		t.Fatalf("storage after 600 kB of messages: %d bytes, before %d", st.Bytes, before)
	}

	var q struct {
		Webhook struct {
			Queued    int    `json:"queued"`
			Delivered uint64 `json:"delivered"`
			Dropped   uint64 `json:"dropped"`
		} `json:"webhook"`
		PushNotifications struct {
			Platforms []map[string]any `json:"platforms"`
		} `json:"push_notifications"`
	}
	eventually(t, "webhook events delivered", func() bool {
		adminJSON(t, ts.httpBase+"/v1/admin/queues", 200, &q)
		return q.Webhook.Delivered > 0
	})
	if q.Webhook.Dropped != 0 || q.PushNotifications.Platforms == nil {
		t.Fatalf("queues: %+v", q)
	}

	var n struct {
		Nodes []struct {
			NodeID         string `json:"node_id"`
			Self           bool   `json:"self"`
			Connections    int    `json:"connections"`
			Sessions       int    `json:"sessions"`
			MessagesStored uint64 `json:"messages_stored"`
		} `json:"nodes"`
	}
	adminJSON(t, ts.httpBase+"/v1/admin/nodes", 200, &n)
	if len(n.Nodes) != 1 || !n.Nodes[0].Self || n.Nodes[0].NodeID != "0" || n.Nodes[0].Sessions != 1 ||
		n.Nodes[0].Connections != 1 || n.Nodes[0].MessagesStored != 20 {
		t.Fatalf("nodes of a single server: %+v", n)
	}
}

// In a cluster each node reports its own figures: asked on one node, the
// page lists both, each with its own connections.
func TestClusterAdminNodes(t *testing.T) {
	t.Parallel()
	nodes := startCluster(t, 2, nil)
	nodes[1].dialOnly(t, "bob", "b1", "phone")
	nodes[1].dialOnly(t, "carol", "c1", "phone")
	type nodeFig struct {
		NodeID      string `json:"node_id"`
		Self        bool   `json:"self"`
		Connections int    `json:"connections"`
	}
	var n struct {
		Nodes []nodeFig `json:"nodes"`
	}
	eventually(t, "both nodes' figures", func() bool {
		adminJSON(t, nodes[0].httpBase+"/v1/admin/nodes", 200, &n)
		return len(n.Nodes) == 2
	})
	want := []nodeFig{{NodeID: "1", Self: true, Connections: 0}, {NodeID: "2", Connections: 2}}
	if !slices.Equal(n.Nodes, want) {
		t.Fatalf("nodes asked on node 1: %+v, want %+v", n.Nodes, want)
	}
}

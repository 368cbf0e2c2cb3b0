package api

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/notify"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// The admin console's reads (admin.html): finding users and groups, one
// user's whole picture, and the operations figures beyond /v1/admin/stats
// (store size, queues, the nodes of a cluster). Every action the console
// takes goes through the admin routes of admin.go and moderation.go.

// listPageBytes bounds one page of users or groups, well below any
// connection's queue, whatever the limit asked for.
const listPageBytes = 256 << 10

// maxUserGroups bounds one page of a user's groups: each costs two reads.
const maxUserGroups = 200

func (a *API) consoleRoutes() []route {
	return []route{
		{"GET /v1/admin/users", a.admin(a.adminListUsers)},
		{"GET /v1/admin/users/{id}/overview", a.admin(a.adminUserOverview)},
		{"GET /v1/admin/users/{id}/groups", a.admin(a.adminUserGroups)},
		{"GET /v1/admin/groups", a.admin(a.adminListGroups)},
		{"GET /v1/admin/storage", a.admin(a.adminStorage)},
		{"GET /v1/admin/queues", a.admin(a.adminQueues)},
		{"GET /v1/admin/nodes", a.admin(a.adminNodes)},
	}
}

// listQuery reads ?prefix=&after=&limit= of a listing by id; valid checks a
// non-empty prefix or after (a prefix of a valid id is valid). False: it
// has answered.
func listQuery(w http.ResponseWriter, r *http.Request, valid func(string) bool) (store.ListQuery, bool) {
	q := r.URL.Query()
	prefix, after := q.Get("prefix"), q.Get("after")
	if (prefix != "" && !valid(prefix)) || (after != "" && !valid(after)) {
		writeCode(w, codeBadRequest, "prefix and after must be (the start of) a valid id")
		return store.ListQuery{}, false
	}
	n, ok := listLimit(w, r)
	if !ok {
		return store.ListQuery{}, false
	}
	return store.ListQuery{Prefix: prefix, After: after, Limit: n, MaxBytes: listPageBytes}, true
}

// nextAfter is a page's "next": its last id when more may follow (the page
// is full by count or by bytes), else "".
func nextAfter(q store.ListQuery, n, bytes int, last string) string {
	if n > 0 && (n >= q.Limit || bytes >= q.MaxBytes) {
		return last
	}
	return ""
}

// adminListUsers: GET /v1/admin/users?prefix=&after=&limit=: users by id.
func (a *API) adminListUsers(w http.ResponseWriter, r *http.Request) {
	q, ok := listQuery(w, r, auth.ValidUserID)
	if !ok {
		return
	}
	users, err := a.cfg.Store.ListUsers(r.Context(), q)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	out := make([]adminUser, 0, len(users))
	bytes, last := 0, ""
	for _, u := range users {
		out = append(out, a.userJSON(u))
		bytes += u.Size()
		last = u.ID
	}
	writeJSON(w, http.StatusOK, map[string]any{"users": out, "next": nextAfter(q, len(users), bytes, last)})
}

type groupJSON struct {
	ConversationID string    `json:"conversation_id"`
	Name           string    `json:"name"`
	Owner          string    `json:"owner"`
	Dissolved      bool      `json:"dissolved"`
	OpenJoin       bool      `json:"open_join"`
	MuteAll        bool      `json:"mute_all"`
	CreatedAt      time.Time `json:"created_at"`
}

func toGroupJSON(g store.Group) groupJSON {
	return groupJSON{ConversationID: g.ConversationID, Name: g.Name, Owner: g.Owner, Dissolved: g.Dissolved,
		OpenJoin: g.OpenJoin, MuteAll: g.MuteAll, CreatedAt: g.CreatedAt}
}

// validGroupID accepts a group conversation id or the start of one.
func validGroupID(s string) bool {
	if len(s) > 200 || !strings.HasPrefix("g:", s) && !strings.HasPrefix(s, "g:") {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// adminListGroups: GET /v1/admin/groups?prefix=&after=&limit=: groups by
// conversation id, dissolved ones included.
func (a *API) adminListGroups(w http.ResponseWriter, r *http.Request) {
	q, ok := listQuery(w, r, validGroupID)
	if !ok {
		return
	}
	if !strings.HasPrefix(q.Prefix, "g:") {
		q.Prefix = "g:" // "" and "g" select every group
	}
	groups, err := a.cfg.Store.ListGroups(r.Context(), q)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	out := make([]groupJSON, 0, len(groups))
	bytes, last := 0, ""
	for _, g := range groups {
		out = append(out, toGroupJSON(g))
		bytes += g.Size()
		last = g.ConversationID
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": out, "next": nextAfter(q, len(groups), bytes, last)})
}

type userOverview struct {
	adminUser
	// Online: sessions on every node of a cluster (those that answered).
	Online []sessionJSON `json:"online"`
	// LastSeen: when the user's last session ended; null when unknown.
	LastSeen *time.Time `json:"last_seen"`
	// PayloadBytes: message payload the user has sent and the store keeps.
	PayloadBytes uint64 `json:"payload_bytes"`
	MediaFiles   int64  `json:"media_files"`
	MediaBytes   int64  `json:"media_bytes"`
}

// adminUserOverview: GET /v1/admin/users/{id}/overview: the record with
// the user's online devices, last seen time and storage use.
func (a *API) adminUserOverview(w http.ResponseWriter, r *http.Request) {
	u, ok := a.loadUser(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	seen, err1 := a.cfg.Store.LastSeen(ctx, u.ID)
	payload, err2 := a.cfg.Store.UserStorage(ctx, u.ID)
	files, bytes, err3 := a.cfg.Store.MediaUsage(ctx, u.ID)
	if err := errors.Join(err1, err2, err3); err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	o := userOverview{adminUser: a.userJSON(u), Online: a.cfg.Chat.UserSessions(ctx, u.ID),
		PayloadBytes: payload, MediaFiles: files, MediaBytes: bytes}
	if o.Online == nil {
		o.Online = []sessionJSON{}
	}
	if !seen.IsZero() {
		o.LastSeen = &seen
	}
	writeJSON(w, http.StatusOK, o)
}

type userGroupJSON struct {
	groupJSON
	// Role: "owner", "admin" or "member"; "" once the user left.
	Role string `json:"role"`
	// Left: the user left or was removed (the group stays in their list).
	Left bool `json:"left"`
}

var roleNames = map[pb.GroupRole]string{pb.GroupRole_GROUP_ROLE_OWNER: "owner",
	pb.GroupRole_GROUP_ROLE_ADMIN: "admin", pb.GroupRole_GROUP_ROLE_MEMBER: "member"}

// adminUserGroups: GET /v1/admin/users/{id}/groups?after=&limit=: the
// groups in the user's conversation list (by conversation id), with their
// role or that they left; at most 200 a page.
func (a *API) adminUserGroups(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !auth.ValidUserID(id) {
		writeCode(w, codeBadRequest, "invalid user id")
		return
	}
	after := r.URL.Query().Get("after")
	if len(after) > 200 {
		writeCode(w, codeBadRequest, "after must be a conversation id")
		return
	}
	n, ok := listLimit(w, r)
	if !ok {
		return
	}
	n = min(n, maxUserGroups)
	ctx := r.Context()
	convs, err := a.cfg.Store.Conversations(ctx, id)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	var ids []string
	for _, c := range convs {
		if strings.HasPrefix(c, "g:") && c > after {
			ids = append(ids, c)
		}
	}
	slices.Sort(ids)
	next := ""
	if len(ids) > n {
		ids, next = ids[:n], ids[n-1]
	}
	out := make([]userGroupJSON, 0, len(ids))
	for _, c := range ids {
		g, err := a.cfg.Store.GetGroup(ctx, c)
		if errors.Is(err, store.ErrNotFound) {
			continue // listed, never created (a failed create)
		}
		m, merr := a.cfg.Store.GetMember(ctx, c, id)
		if err != nil || (merr != nil && !errors.Is(merr, store.ErrNotFound)) {
			writeCode(w, codeUnavailable, "try again")
			return
		}
		ug := userGroupJSON{groupJSON: toGroupJSON(g), Left: merr != nil || m.Left}
		if !ug.Left {
			ug.Role = roleNames[m.Role]
		}
		out = append(out, ug)
	}
	writeJSON(w, http.StatusOK, map[string]any{"groups": out, "next": next})
}

// adminStorage: GET /v1/admin/storage: the store's size.
func (a *API) adminStorage(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	n, err := a.cfg.Store.DiskSize(ctx)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"bytes": n})
}

type platformQueue struct {
	Kind      string `json:"kind"`
	Queued    int    `json:"queued"`
	Retrying  int    `json:"retrying"`
	Sent      uint64 `json:"sent"`
	Dropped   uint64 `json:"dropped"`
	Exhausted uint64 `json:"exhausted"`
	Invalid   uint64 `json:"invalid"`
	Rejected  uint64 `json:"rejected"`
	Retries   uint64 `json:"retries"`
}

type queuesJSON struct {
	Webhook           webhookQueue `json:"webhook"`
	PushNotifications struct {
		// Waiting: devices with notifications waiting to be coalesced.
		Waiting int `json:"waiting"`
		// SkippedPending: messages not considered because the pending
		// memory was full.
		SkippedPending uint64          `json:"skipped_pending"`
		Platforms      []platformQueue `json:"platforms"`
	} `json:"push_notifications"`
}

type webhookQueue struct {
	Queued    int    `json:"queued"`
	Delivered uint64 `json:"delivered"`
	Dropped   uint64 `json:"dropped"`
	Failures  uint64 `json:"failures"`
}

// adminQueues: GET /v1/admin/queues: this node's webhook and push
// notification queues with what they delivered and dropped.
func (a *API) adminQueues(w http.ResponseWriter, r *http.Request) {
	var q queuesJSON
	if a.cfg.Webhooks != nil {
		ws := a.cfg.Webhooks()
		q.Webhook = webhookQueue{Queued: ws.Queued, Delivered: ws.Delivered, Dropped: ws.Dropped, Failures: ws.Failures}
	}
	ns := a.cfg.Notify.Stats() // a nil Notifier has none
	q.PushNotifications.Waiting, q.PushNotifications.SkippedPending = ns.Waiting, ns.SkippedPending
	q.PushNotifications.Platforms = make([]platformQueue, 0, len(ns.Platforms))
	for _, p := range ns.Platforms {
		q.PushNotifications.Platforms = append(q.PushNotifications.Platforms, platformQueueOf(p))
	}
	writeJSON(w, http.StatusOK, q)
}

func platformQueueOf(p notify.PlatformStats) platformQueue {
	return platformQueue{Kind: p.Kind, Queued: p.Queued, Retrying: p.Retrying, Sent: p.Sent, Dropped: p.Dropped,
		Exhausted: p.Exhausted, Invalid: p.Invalid, Rejected: p.Rejected, Retries: p.Retries}
}

// NodeStats is one node's figures for GET /v1/admin/nodes. Counters count
// since the node started; the console turns them into rates.
type NodeStats struct {
	NodeID string `json:"node_id"`
	// Self: the node that answered the request.
	Self           bool    `json:"self"`
	Connections    int64   `json:"connections"`
	Sessions       int64   `json:"sessions"`
	MessagesStored uint64  `json:"messages_stored"`
	Deliveries     uint64  `json:"deliveries"`
	SendsFailed    uint64  `json:"sends_failed"`
	HeapBytes      uint64  `json:"heap_bytes"`
	Goroutines     int64   `json:"goroutines"`
	UptimeSeconds  float64 `json:"uptime_seconds"`
	WebhookQueued  int64   `json:"webhook_queued"`
	WebhookDropped uint64  `json:"webhook_dropped"`
	PushQueued     int64   `json:"push_queued"`
	PushDropped    uint64  `json:"push_dropped"`
}

// adminNodes: GET /v1/admin/nodes: every node's figures (in a cluster, the
// nodes that answered in time), this node first.
func (a *API) adminNodes(w http.ResponseWriter, r *http.Request) {
	if a.cfg.Nodes == nil {
		writeError(w, http.StatusNotFound, codeNotFound, "node figures are off")
		return
	}
	nodes := a.cfg.Nodes(r.Context())
	writeJSON(w, http.StatusOK, map[string]any{"nodes": nodes})
}

package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Admin calls the admin HTTP API with an API key: what an app's backend
// uses to manage users, groups and messages and to push. Every method maps
// to one route of internal/api/openapi.json.
type Admin struct {
	HTTP HTTPClient
	Key  string
}

// NewAdmin returns an Admin for the server at httpBase (e.g. "http://127.0.0.1:8080").
func NewAdmin(httpBase, apiKey string) *Admin {
	return &Admin{HTTP: HTTPClient{BaseURL: httpBase}, Key: apiKey}
}

func (a *Admin) do(ctx context.Context, method, path string, in, out any) error {
	return a.HTTP.doMethod(ctx, method, path, http.Header{"X-Api-Key": {a.Key}}, in, out)
}

// User is a user record as the admin API shows it.
type User struct {
	UserID      string    `json:"user_id"`
	CreatedAt   time.Time `json:"created_at"`
	Disabled    bool      `json:"disabled"`
	HasPassword bool      `json:"has_password"`
	// ShadowMuted: what the user sends reaches only themselves.
	ShadowMuted bool `json:"shadow_muted"`
	// Bot: the user may stream messages (OpenStream).
	Bot      bool `json:"bot"`
	Sessions int  `json:"sessions"`
	// Deleted: the account was deleted (docs/accounts.md).
	Deleted bool `json:"deleted"`
}

// CreateUser creates a user; password may be empty (token-only users).
func (a *Admin) CreateUser(ctx context.Context, userID, password string) (*User, error) {
	var u User
	err := a.do(ctx, http.MethodPost, "/v1/admin/users", map[string]string{"user_id": userID, "password": password}, &u)
	return retT(&u, err)
}

// GetUser reads a user.
func (a *Admin) GetUser(ctx context.Context, userID string) (*User, error) {
	var u User
	err := a.do(ctx, http.MethodGet, "/v1/admin/users/"+url.PathEscape(userID), nil, &u)
	return retT(&u, err)
}

// SetDisabled disables (revoking tokens, closing sessions) or re-enables a user.
func (a *Admin) SetDisabled(ctx context.Context, userID string, disabled bool) (*User, error) {
	var u User
	err := a.do(ctx, http.MethodPatch, "/v1/admin/users/"+url.PathEscape(userID), map[string]bool{"disabled": disabled}, &u)
	return retT(&u, err)
}

// SetBot gives a user the bot role (they may stream messages) or takes it away.
func (a *Admin) SetBot(ctx context.Context, userID string, bot bool) (*User, error) {
	var u User
	err := a.do(ctx, http.MethodPatch, "/v1/admin/users/"+url.PathEscape(userID), map[string]bool{"bot": bot}, &u)
	return retT(&u, err)
}

// OpenStream starts a streamed message as userID (who must have the bot
// role) through the admin API: the answer names the stream for
// StreamAppend and StreamFinish, which take UserRPC too.
func (a *Admin) OpenStream(ctx context.Context, userID string, o *pb.StreamOpen) (*pb.StreamOpened, error) {
	var out pb.StreamOpened
	err := a.UserRPC(ctx, userID, &pb.ClientFrame{Body: &pb.ClientFrame_StreamOpen{StreamOpen: o}}, &out)
	return retT(&out, err)
}

// StreamAppend adds text to userID's stream.
func (a *Admin) StreamAppend(ctx context.Context, userID, streamID, text string) error {
	return a.UserRPC(ctx, userID, &pb.ClientFrame{Body: &pb.ClientFrame_StreamAppend{
		StreamAppend: &pb.StreamAppend{StreamId: streamID, Text: text}}}, nil)
}

// StreamFinish stores userID's stream as one message (marked incomplete
// with abandon).
func (a *Admin) StreamFinish(ctx context.Context, userID, streamID string, abandon bool) (*pb.SendAck, error) {
	var out pb.SendAck
	err := a.UserRPC(ctx, userID, &pb.ClientFrame{Body: &pb.ClientFrame_StreamFinish{
		StreamFinish: &pb.StreamFinish{StreamId: streamID, Abandon: abandon}}}, &out)
	return retT(&out, err)
}

// SetPassword sets a user's password (revoking their tokens).
func (a *Admin) SetPassword(ctx context.Context, userID, password string) (*User, error) {
	var u User
	err := a.do(ctx, http.MethodPatch, "/v1/admin/users/"+url.PathEscape(userID), map[string]string{"password": password}, &u)
	return retT(&u, err)
}

// MintToken issues a token for a user (ttl 0: the server's default).
func (a *Admin) MintToken(ctx context.Context, userID string, ttl time.Duration) (*Credentials, error) {
	return a.HTTP.MintToken(ctx, a.Key, userID, ttl)
}

// RevokeTokens makes every token issued to the user so far invalid and
// closes their sessions; it returns how many sessions were closed.
func (a *Admin) RevokeTokens(ctx context.Context, userID string) (int, error) {
	var out struct {
		N int `json:"sessions_closed"`
	}
	err := a.do(ctx, http.MethodPost, "/v1/admin/users/"+url.PathEscape(userID)+"/revoke-tokens", nil, &out)
	return out.N, err
}

// SessionInfo is one online session (device).
type SessionInfo struct {
	SessionID   string    `json:"session_id"`
	UserID      string    `json:"user_id"`
	DeviceID    string    `json:"device_id"`
	DeviceType  string    `json:"device_type"`
	ConnectedAt time.Time `json:"connected_at"`
}

// Sessions lists a user's online sessions.
func (a *Admin) Sessions(ctx context.Context, userID string) ([]SessionInfo, error) {
	var out struct {
		Sessions []SessionInfo `json:"sessions"`
	}
	err := a.do(ctx, http.MethodGet, "/v1/admin/users/"+url.PathEscape(userID)+"/sessions", nil, &out)
	return out.Sessions, err
}

// Kick closes a user's sessions (sessionID "": all of them) with DISCONNECT_CODE_KICKED.
func (a *Admin) Kick(ctx context.Context, userID, sessionID string) (int, error) {
	p := "/v1/admin/users/" + url.PathEscape(userID) + "/sessions"
	if sessionID != "" {
		p += "/" + url.PathEscape(sessionID)
	}
	var out struct {
		N int `json:"sessions_closed"`
	}
	err := a.do(ctx, http.MethodDelete, p, nil, &out)
	return out.N, err
}

// Conversations returns a user's conversation list (one page).
func (a *Admin) Conversations(ctx context.Context, userID string, limit uint32) (*pb.ConversationList, error) {
	var out pb.ConversationList
	err := a.do(ctx, http.MethodGet, "/v1/admin/users/"+url.PathEscape(userID)+"/conversations?limit="+strconv.Itoa(int(limit)), nil, &out)
	return retT(&out, err)
}

// Befriend makes two users friends.
func (a *Admin) Befriend(ctx context.Context, userID, other string) error {
	return a.do(ctx, http.MethodPost, "/v1/admin/users/"+url.PathEscape(userID)+"/contacts", map[string]string{"user_id": other}, nil)
}

// Contacts returns a user's contacts.
func (a *Admin) Contacts(ctx context.Context, userID string) (*pb.ContactList, error) {
	var out pb.ContactList
	err := a.do(ctx, http.MethodGet, "/v1/admin/users/"+url.PathEscape(userID)+"/contacts", nil, &out)
	return retT(&out, err)
}

// GroupSpec describes a group to create.
type GroupSpec struct {
	Owner        string   `json:"owner"`
	Name         string   `json:"name,omitempty"`
	AvatarURL    string   `json:"avatar_url,omitempty"`
	Announcement string   `json:"announcement,omitempty"`
	OpenJoin     bool     `json:"open_join,omitempty"`
	UserIDs      []string `json:"user_ids,omitempty"`
	// AddPolicy: who may add members, "admins" (empty: the default) or "everyone".
	AddPolicy string `json:"add_policy,omitempty"`
	// HistoryVisibility: what new and re-added members read, "since_join"
	// (empty: the default) or "all".
	HistoryVisibility string `json:"history_visibility,omitempty"`
}

// CreateGroup creates a group owned by spec.Owner.
func (a *Admin) CreateGroup(ctx context.Context, spec GroupSpec) (*pb.GroupInfo, error) {
	var g pb.GroupInfo
	err := a.do(ctx, http.MethodPost, "/v1/admin/groups", spec, &g)
	return retT(&g, err)
}

// Group reads a group.
func (a *Admin) Group(ctx context.Context, conversationID string) (*pb.GroupInfo, error) {
	var g pb.GroupInfo
	err := a.do(ctx, http.MethodGet, "/v1/admin/groups/"+url.PathEscape(conversationID), nil, &g)
	return retT(&g, err)
}

// AddMembers adds users to a group (at most 1,000 per call).
func (a *Admin) AddMembers(ctx context.Context, conversationID string, userIDs []string) error {
	return a.do(ctx, http.MethodPost, "/v1/admin/groups/"+url.PathEscape(conversationID)+"/members", map[string][]string{"user_ids": userIDs}, nil)
}

// RemoveMember removes a member from a group.
func (a *Admin) RemoveMember(ctx context.Context, conversationID, userID string) error {
	return a.do(ctx, http.MethodDelete, "/v1/admin/groups/"+url.PathEscape(conversationID)+"/members/"+url.PathEscape(userID), nil, nil)
}

// Members lists a group's members after a user id (one page).
func (a *Admin) Members(ctx context.Context, conversationID, after string, limit uint32) (*pb.MemberPage, error) {
	var out pb.MemberPage
	q := url.Values{"after": {after}, "limit": {strconv.Itoa(int(limit))}}
	err := a.do(ctx, http.MethodGet, "/v1/admin/groups/"+url.PathEscape(conversationID)+"/members?"+q.Encode(), nil, &out)
	return retT(&out, err)
}

// SetRole makes a member "admin" or "member".
func (a *Admin) SetRole(ctx context.Context, conversationID, userID, role string) error {
	return a.do(ctx, http.MethodPut, "/v1/admin/groups/"+url.PathEscape(conversationID)+"/members/"+url.PathEscape(userID)+"/role", map[string]string{"role": role}, nil)
}

// Mute mutes a member for d (0 unmutes).
func (a *Admin) Mute(ctx context.Context, conversationID, userID string, d time.Duration) error {
	return a.do(ctx, http.MethodPut, "/v1/admin/groups/"+url.PathEscape(conversationID)+"/members/"+url.PathEscape(userID)+"/mute", map[string]int64{"duration_seconds": int64(d / time.Second)}, nil)
}

// TransferOwnership makes a member the owner.
func (a *Admin) TransferOwnership(ctx context.Context, conversationID, userID string) error {
	return a.do(ctx, http.MethodPost, "/v1/admin/groups/"+url.PathEscape(conversationID)+"/owner", map[string]string{"user_id": userID}, nil)
}

// Dissolve dissolves a group.
func (a *Admin) Dissolve(ctx context.Context, conversationID string) error {
	return a.do(ctx, http.MethodDelete, "/v1/admin/groups/"+url.PathEscape(conversationID), nil, nil)
}

// Message is a message the admin API sends: From empty is a system message (to a group).
type Message struct {
	From           string `json:"from,omitempty"`
	To             string `json:"to,omitempty"`
	ConversationID string `json:"conversation_id,omitempty"`
	ClientMsgID    string `json:"client_msg_id"`
	ContentType    string `json:"content_type,omitempty"`
	Payload        []byte `json:"payload,omitempty"`
}

// Send stores and delivers a message; retries with the same From and
// ClientMsgID return the original ACK.
func (a *Admin) Send(ctx context.Context, m Message) (*pb.SendAck, error) {
	var ack pb.SendAck
	err := a.do(ctx, http.MethodPost, "/v1/admin/messages", m, &ack)
	return retT(&ack, err)
}

// Messages reads any conversation: forward after a seq (forward true) or backward before one (0: newest).
func (a *Admin) Messages(ctx context.Context, conversationID string, seq uint64, forward bool, limit uint32) (*pb.MessagePage, error) {
	dir := "before"
	if forward {
		dir = "after"
	}
	var out pb.MessagePage
	err := a.do(ctx, http.MethodGet, fmt.Sprintf("/v1/admin/conversations/%s/messages?%s=%d&limit=%d", url.PathEscape(conversationID), dir, seq, limit), nil, &out)
	return retT(&out, err)
}

// Recall recalls any message.
func (a *Admin) Recall(ctx context.Context, conversationID string, seq uint64) (*pb.SendAck, error) {
	var ack pb.SendAck
	err := a.do(ctx, http.MethodPost, fmt.Sprintf("/v1/admin/conversations/%s/messages/%d/recall", url.PathEscape(conversationID), seq), nil, &ack)
	return retT(&ack, err)
}

// PushTarget is where a push goes: exactly one of its fields (All: every session online).
type PushTarget struct {
	UserIDs    []string
	DeviceKeys []string // session ids (AuthOk.session_id)
	Room       string
	All        bool
}

// Push sends an unstored push (goim semantics) and returns how many sessions
// took it on the node that answered (see PushCounted for the refusals).
func (a *Admin) Push(ctx context.Context, to PushTarget, op int32, body []byte) (int, error) {
	r, err := a.PushCounted(ctx, to, op, body)
	return r.Pushed, err
}

// PushResult is what a push did on the node that answered.
type PushResult struct {
	// Pushed counts the sessions on that node that took the push.
	Pushed int `json:"pushed"`
	// Refused counts the sessions on that node that refused it because their
	// send queue was backed up (they stay connected; the push is not retried).
	Refused int `json:"refused"`
	// Forwarded reports that the push also went to the cluster's other nodes,
	// whose sessions are not counted here.
	Forwarded bool `json:"forwarded"`
}

// PushCounted is Push returning the whole answer: sessions that took the
// push, sessions that refused it, and whether other nodes got it too.
func (a *Admin) PushCounted(ctx context.Context, to PushTarget, op int32, body []byte) (PushResult, error) {
	var path string
	switch {
	case len(to.UserIDs) > 0:
		path = "/v1/admin/push/users?user_ids=" + url.QueryEscape(strings.Join(to.UserIDs, ","))
	case len(to.DeviceKeys) > 0:
		path = "/v1/admin/push/devices?keys=" + url.QueryEscape(strings.Join(to.DeviceKeys, ","))
	case to.Room != "":
		path = "/v1/admin/push/room?room=" + url.QueryEscape(to.Room)
	case to.All:
		path = "/v1/admin/push/all?"
	default:
		return PushResult{}, fmt.Errorf("parley: push needs a target")
	}
	path += "&op=" + strconv.Itoa(int(op))
	if body == nil {
		body = []byte{}
	}
	var out PushResult
	err := a.do(ctx, http.MethodPost, path, body, &out)
	return out, err
}

func retT[T any](v *T, err error) (*T, error) {
	if err != nil {
		return nil, err
	}
	return v, nil
}

// PushAttempt is one entry of a device's push log.
type PushAttempt struct {
	Time           time.Time     `json:"time"`
	Kind           string        `json:"kind"`
	ConversationID string        `json:"conversation_id"`
	Seq            uint64        `json:"seq,string"`
	Count          int           `json:"count"`
	Outcome        string        `json:"outcome"` // sent, retrying, failed, removed, dropped
	Status         int           `json:"status"`
	Reason         string        `json:"reason"`
	Error          string        `json:"error"`
	Latency        time.Duration `json:"latency_ns"`
}

// PushDevice is a device registered for push notifications, with its log
// (newest first; the attempts made by the node answering).
type PushDevice struct {
	DeviceID  string        `json:"device_id"`
	Kind      string        `json:"kind"`
	Token     string        `json:"token"` // cut short
	Topic     string        `json:"topic"`
	Sandbox   bool          `json:"sandbox"`
	UpdatedAt time.Time     `json:"updated_at"`
	Log       []PushAttempt `json:"log"`
}

// PushDevices lists the user's devices registered for push notifications.
func (a *Admin) PushDevices(ctx context.Context, userID string) ([]PushDevice, error) {
	var out struct {
		Devices []PushDevice `json:"devices"`
	}
	err := a.do(ctx, http.MethodGet, "/v1/admin/users/"+url.PathEscape(userID)+"/push", nil, &out)
	return out.Devices, err
}

// PushTestResult is one device's answer to a test notification.
type PushTestResult struct {
	DeviceID string        `json:"device_id"`
	Kind     string        `json:"kind"`
	Outcome  string        `json:"outcome"`
	Status   int           `json:"status"`
	Reason   string        `json:"reason"`
	Error    string        `json:"error"`
	Latency  time.Duration `json:"latency_ns"`
}

// PushTest sends a test notification to each of the user's devices now and
// returns each platform's answer.
func (a *Admin) PushTest(ctx context.Context, userID string) ([]PushTestResult, error) {
	var out struct {
		Devices []PushTestResult `json:"devices"`
	}
	err := a.do(ctx, http.MethodPost, "/v1/admin/users/"+url.PathEscape(userID)+"/push/test", nil, &out)
	return out.Devices, err
}

// UserRPC runs one client frame as the user would over a connection (POST
// /v1/admin/users/{id}/rpc); an error frame comes back as an *HTTPError.
// out, when not nil, receives the answer's body.
func (a *Admin) UserRPC(ctx context.Context, userID string, f *pb.ClientFrame, out proto.Message) error {
	var o any
	if out != nil {
		o = out
	}
	return a.do(ctx, http.MethodPost, "/v1/admin/users/"+url.PathEscape(userID)+"/rpc", f, o)
}

// RegisterPush registers a push target for one of the user's devices
// (r.DeviceId is required), as an app server that learns devices' tokens
// itself would.
func (a *Admin) RegisterPush(ctx context.Context, userID string, r *pb.RegisterPush) error {
	return a.UserRPC(ctx, userID, &pb.ClientFrame{Body: &pb.ClientFrame_RegisterPush{RegisterPush: r}}, nil)
}

// MediaUsage is a user's uploaded files.
type MediaUsage struct {
	UserID string `json:"user_id"`
	Files  int64  `json:"files"`
	Bytes  int64  `json:"bytes"`
	// QuotaBytes is the server's media_quota_bytes; 0: unlimited.
	QuotaBytes int64 `json:"quota_bytes"`
}

// MediaUsage returns how many files a user has uploaded and their bytes.
func (a *Admin) MediaUsage(ctx context.Context, userID string) (*MediaUsage, error) {
	var out MediaUsage
	if err := a.do(ctx, http.MethodGet, "/v1/admin/users/"+url.PathEscape(userID)+"/media", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

package api

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/chat"
	"github.com/parleyim/parley/internal/session"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// The admin API: what an app's backend does with an API key. Users, tokens
// and sessions are handled here; everything a user can do runs as that user
// through the same handlers as a socket (chat.Service.Call), and group
// management and system messages run as the system (chat.Service.CallSystem),
// so the rules and events are the same whoever asks.

// callTimeout bounds one request run through the chat service (POST /v1/rpc
// and the admin API's group and message calls), store reads included.
const callTimeout = 15 * time.Second

type adminUser struct {
	UserID      string    `json:"user_id"`
	CreatedAt   time.Time `json:"created_at"`
	Disabled    bool      `json:"disabled"`
	HasPassword bool      `json:"has_password"`
	// Sessions is the number of the user's sessions online on this node.
	Sessions int `json:"sessions"`
	// ShadowMuted: what the user sends reaches only themselves.
	ShadowMuted bool `json:"shadow_muted,omitempty"`
	// Bot: the user may stream messages (docs/rich-messages.md).
	Bot bool `json:"bot,omitempty"`
	// Deleted: the account was deleted (docs/accounts.md); the record is
	// its tombstone.
	Deleted bool `json:"deleted,omitempty"`
}

func (a *API) userJSON(u store.User) adminUser {
	return adminUser{UserID: u.ID, CreatedAt: u.CreatedAt, Disabled: u.Disabled, HasPassword: u.PasswordHash != "", ShadowMuted: u.ShadowMuted,
		Bot: u.Bot, Sessions: len(a.cfg.Chat.Sessions().Sessions(u.ID))}
}

type createUser struct {
	UserID   string `json:"user_id"`
	Password string `json:"password"`
	Bot      bool   `json:"bot"`
}

// adminCreateUser: POST /v1/admin/users {"user_id", "password"?, "bot"?}.
func (a *API) adminCreateUser(w http.ResponseWriter, r *http.Request) {
	var c createUser
	if !decodeBody(w, r, &c) {
		return
	}
	u, ok := a.createAccount(w, r, "user_id", c.UserID, c.Password)
	if !ok {
		return
	}
	if c.Bot {
		u.Bot = true
		if err := a.cfg.Store.UpdateUser(r.Context(), u); err != nil {
			writeCode(w, codeUnavailable, "try again")
			return
		}
	}
	writeJSON(w, http.StatusCreated, a.userJSON(u))
}

// loadUser reads the user named in the path; it has answered when false.
func (a *API) loadUser(w http.ResponseWriter, r *http.Request) (store.User, bool) {
	id := r.PathValue("id")
	if !auth.ValidUserID(id) {
		writeCode(w, codeBadRequest, "invalid user id")
		return store.User{}, false
	}
	u, err := a.cfg.Store.GetUser(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, codeNotFound, "no such user")
		return u, false
	}
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return u, false
	}
	return u, true
}

// adminGetUser: GET /v1/admin/users/{id}.
func (a *API) adminGetUser(w http.ResponseWriter, r *http.Request) {
	if u, ok := a.loadUser(w, r); ok {
		j := a.userJSON(u)
		if j.Deleted, ok = a.isDeleted(w, r, u.ID); ok {
			writeJSON(w, http.StatusOK, j)
		}
	}
}

type updateUser struct {
	Password *string `json:"password"`
	Disabled *bool   `json:"disabled"`
	Bot      *bool   `json:"bot"`
}

// adminUpdateUser: PATCH /v1/admin/users/{id} {"password"?, "disabled"?, "bot"?}.
// A new password or disabling revokes every token of the user and closes
// their sessions.
func (a *API) adminUpdateUser(w http.ResponseWriter, r *http.Request) {
	var p updateUser
	if !decodeBody(w, r, &p) {
		return
	}
	if p.Password != nil && (len(*p.Password) < minPasswordLen || len(*p.Password) > auth.MaxPasswordBytes) {
		writeCode(w, codeBadRequest, "password must be 8-256 bytes")
		return
	}
	u, ok := a.loadUser(w, r)
	if !ok || a.refuseDeleted(w, r, u.ID) {
		return
	}
	revoke := false
	if p.Password != nil {
		hash, err := a.hash(r, *p.Password)
		if err != nil {
			writeCode(w, codeUnavailable, "try again")
			return
		}
		u.PasswordHash, revoke = hash, true
	}
	if p.Disabled != nil {
		revoke = revoke || (*p.Disabled && !u.Disabled)
		u.Disabled = *p.Disabled
	}
	if p.Bot != nil {
		u.Bot = *p.Bot
	}
	if revoke {
		u.TokenEpoch++
	}
	if err := a.cfg.Store.UpdateUser(r.Context(), u); err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	if revoke {
		a.cfg.Chat.CloseUserSessions(u.ID, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED, "account changed", "", "")
		if !a.removePushTargets(r, u.ID, "") {
			writeCode(w, codeUnavailable, "try again")
			return
		}
	}
	writeJSON(w, http.StatusOK, a.userJSON(u))
}

// adminRevokeTokens: POST /v1/admin/users/{id}/revoke-tokens: every token
// issued so far stops working and the user's sessions are closed.
func (a *API) adminRevokeTokens(w http.ResponseWriter, r *http.Request) {
	u, ok := a.loadUser(w, r)
	if !ok {
		return
	}
	u.TokenEpoch++
	if err := a.cfg.Store.UpdateUser(r.Context(), u); err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	n := a.cfg.Chat.CloseUserSessions(u.ID, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED, "tokens revoked", "", "")
	if !a.removePushTargets(r, u.ID, "") {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user_id": u.ID, "sessions_closed": n})
}

type sessionJSON = chat.SessionInfo

func toSessionJSON(s *session.Session) sessionJSON {
	return sessionJSON{SessionID: s.ID, UserID: s.UserID, DeviceID: s.DeviceID, DeviceType: s.DeviceType, ConnectedAt: s.Started}
}

// adminSessions: GET /v1/admin/users/{id}/sessions: the user's online
// devices, on every node of a cluster.
func (a *API) adminSessions(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if !auth.ValidUserID(id) {
		writeCode(w, codeBadRequest, "invalid user id")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sessions": a.cfg.Chat.UserSessions(r.Context(), id)})
}

// adminKick: DELETE /v1/admin/users/{id}/sessions[/{session}]: closes the
// user's sessions (or one) with DISCONNECT_CODE_KICKED.
func (a *API) adminKick(w http.ResponseWriter, r *http.Request) {
	id, sid := r.PathValue("id"), r.PathValue("session")
	if !auth.ValidUserID(id) {
		writeCode(w, codeBadRequest, "invalid user id")
		return
	}
	n := a.cfg.Chat.CloseUserSessions(id, pb.DisconnectCode_DISCONNECT_CODE_KICKED, "kicked by the server", sid, "")
	writeJSON(w, http.StatusOK, map[string]int{"sessions_closed": n})
}

// readBody reads a body of at most MaxBodyBytes; it has answered when false.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge, "request body too large")
		} else {
			writeCode(w, codeBadRequest, "unreadable body")
		}
		return nil, false
	}
	return body, true
}

// listLimit reads ?limit= for a listing: default 100, at most 1000; false (answered) when not a number.
func listLimit(w http.ResponseWriter, r *http.Request) (int, bool) {
	limit, ok := queryUint(r, "limit")
	if !ok {
		writeCode(w, codeBadRequest, "limit must be a number")
		return 0, false
	}
	if limit == 0 {
		return 100, true
	}
	return int(min(limit, 1000)), true
}

// adminOnline: GET /v1/admin/online?limit=N: sessions online on this node (at most N, default 100, max 1000).
func (a *API) adminOnline(w http.ResponseWriter, r *http.Request) {
	n, ok := listLimit(w, r)
	if !ok {
		return
	}
	list := make([]sessionJSON, 0, n)
	a.cfg.Chat.Sessions().ForEach(func(s *session.Session) {
		if len(list) < n {
			list = append(list, toSessionJSON(s))
		}
	})
	writeJSON(w, http.StatusOK, map[string]any{"total": a.cfg.Chat.Sessions().Len(), "sessions": list})
}

// adminRooms: GET /v1/admin/rooms?limit=N: the rooms with the most listeners on this node.
func (a *API) adminRooms(w http.ResponseWriter, r *http.Request) {
	n, ok := listLimit(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"rooms": a.cfg.Chat.Rooms(n)})
}

// ---- acting as a user or as the system ----

// asUser runs f as the user named by the path (or uid) and writes the
// answer's body; the user need not exist as a record (app-minted users).
func (a *API) asUser(w http.ResponseWriter, r *http.Request, uid string, f *pb.ClientFrame, status int) {
	if !auth.ValidUserID(uid) {
		writeCode(w, codeBadRequest, "invalid user id")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	out, err := a.cfg.Chat.Call(ctx, auth.Claims{UserID: uid}, f)
	a.writeAnswer(w, r, out, err, status)
}

// asSystem runs f as the system (group management, system messages, recall).
func (a *API) asSystem(w http.ResponseWriter, r *http.Request, f *pb.ClientFrame, status int) {
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	out, err := a.cfg.Chat.CallSystem(ctx, f)
	a.writeAnswer(w, r, out, err, status)
}

// writeAnswer writes a ServerFrame's body (its one-of) as JSON, or its error.
func (a *API) writeAnswer(w http.ResponseWriter, r *http.Request, out *pb.ServerFrame, err error, status int) {
	if err != nil {
		writeCode(w, codeUnavailable, "no answer in time, retry")
		return
	}
	if e := out.GetError(); e != nil {
		writeFrameError(w, e)
		return
	}
	m := out.ProtoReflect()
	fd := m.WhichOneof(m.Descriptor().Oneofs().ByName("body"))
	var body proto.Message = &pb.Ok{}
	if fd != nil {
		body = m.Get(fd).Message().Interface()
	}
	release, ok := a.holdForWrite(w, r, body)
	if !ok {
		return
	}
	defer release()
	b, err := protoJSON.Marshal(body)
	if err != nil {
		writeCode(w, codeInternal, "internal error")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// decodeProto reads a JSON body (at most MaxBodyBytes) into m in the
// protocol's JSON mapping (field names in camelCase or snake_case); unknown
// fields are refused. An empty body leaves m empty.
func decodeProto(w http.ResponseWriter, r *http.Request, m proto.Message) bool {
	body, ok := readBody(w, r)
	if !ok {
		return false
	}
	if len(body) == 0 {
		return true
	}
	if err := (protojson.UnmarshalOptions{}).Unmarshal(body, m); err != nil {
		writeCode(w, codeBadRequest, "malformed JSON body: "+protoErrText(err))
		return false
	}
	return true
}

// protoErrText is protojson's complaint without its unstable prefix: it
// names the field or offset, which helps and reveals nothing.
func protoErrText(err error) string {
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// adminUserRPC: POST /v1/admin/users/{id}/rpc with one ClientFrame in JSON:
// anything the user could do over their socket, done for them.
func (a *API) adminUserRPC(w http.ResponseWriter, r *http.Request) {
	var f pb.ClientFrame
	if !decodeProto(w, r, &f) {
		return
	}
	a.asUser(w, r, r.PathValue("id"), &f, http.StatusOK)
}

// adminConversations: GET /v1/admin/users/{id}/conversations?limit=&page_token=.
func (a *API) adminConversations(w http.ResponseWriter, r *http.Request) {
	limit, ok := queryUint(r, "limit")
	if !ok || limit > 1000 {
		writeCode(w, codeBadRequest, "limit must be a number up to 1000")
		return
	}
	a.asUser(w, r, r.PathValue("id"), &pb.ClientFrame{Body: &pb.ClientFrame_SyncConversations{
		SyncConversations: &pb.SyncConversations{Limit: uint32(limit), PageToken: r.URL.Query().Get("page_token")}}}, http.StatusOK)
}

// adminContacts: GET /v1/admin/users/{id}/contacts.
func (a *API) adminContacts(w http.ResponseWriter, r *http.Request) {
	a.asUser(w, r, r.PathValue("id"), &pb.ClientFrame{Body: &pb.ClientFrame_ListContacts{ListContacts: &pb.ListContacts{}}}, http.StatusOK)
}

type befriend struct {
	UserID string `json:"user_id"`
}

// adminBefriend: POST /v1/admin/users/{id}/contacts {"user_id": B}: makes
// the two users friends at once (a request from the user, accepted by B),
// with the same events their devices get when they do it themselves.
func (a *API) adminBefriend(w http.ResponseWriter, r *http.Request) {
	var b befriend
	if !decodeBody(w, r, &b) {
		return
	}
	uid := r.PathValue("id")
	if !auth.ValidUserID(uid) || !auth.ValidUserID(b.UserID) || uid == b.UserID {
		writeCode(w, codeBadRequest, "two different valid user ids are required")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	out, err := a.cfg.Chat.Call(ctx, auth.Claims{UserID: uid}, &pb.ClientFrame{Body: &pb.ClientFrame_FriendRequest{
		FriendRequest: &pb.FriendRequest{UserId: b.UserID}}})
	if err != nil || out.GetError() != nil {
		a.writeAnswer(w, r, out, err, http.StatusOK)
		return
	}
	a.asUser(w, r, b.UserID, &pb.ClientFrame{Body: &pb.ClientFrame_RespondFriend{
		RespondFriend: &pb.RespondFriend{UserId: uid, Accept: true}}}, http.StatusOK)
}

// adminUnfriend: DELETE /v1/admin/users/{id}/contacts/{other}.
func (a *API) adminUnfriend(w http.ResponseWriter, r *http.Request) {
	a.asUser(w, r, r.PathValue("id"), &pb.ClientFrame{Body: &pb.ClientFrame_RemoveFriend{
		RemoveFriend: &pb.RemoveFriend{UserId: r.PathValue("other")}}}, http.StatusOK)
}

// ---- groups ----

type createGroupReq struct {
	Owner        string   `json:"owner"`
	Name         string   `json:"name"`
	AvatarURL    string   `json:"avatar_url"`
	Announcement string   `json:"announcement"`
	OpenJoin     bool     `json:"open_join"`
	UserIDs      []string `json:"user_ids"`
	// "admins" (the default) or "everyone".
	AddPolicy string `json:"add_policy"`
	// "since_join" (the default) or "all".
	HistoryVisibility string `json:"history_visibility"`
}

var (
	addPolicies = map[string]pb.GroupAddPolicy{"": pb.GroupAddPolicy_GROUP_ADD_POLICY_UNSPECIFIED,
		"admins": pb.GroupAddPolicy_GROUP_ADD_POLICY_ADMINS, "everyone": pb.GroupAddPolicy_GROUP_ADD_POLICY_EVERYONE}
	visibilities = map[string]pb.HistoryVisibility{"": pb.HistoryVisibility_HISTORY_VISIBILITY_UNSPECIFIED,
		"since_join": pb.HistoryVisibility_HISTORY_VISIBILITY_SINCE_JOIN, "all": pb.HistoryVisibility_HISTORY_VISIBILITY_ALL}
)

// adminCreateGroup: POST /v1/admin/groups {"owner", "name", "user_ids", ...}: created by the owner.
func (a *API) adminCreateGroup(w http.ResponseWriter, r *http.Request) {
	var c createGroupReq
	if !decodeBody(w, r, &c) {
		return
	}
	policy, ok1 := addPolicies[c.AddPolicy]
	vis, ok2 := visibilities[c.HistoryVisibility]
	if !ok1 || !ok2 {
		writeCode(w, codeBadRequest, `add_policy must be "admins" or "everyone", history_visibility "since_join" or "all"`)
		return
	}
	a.asUser(w, r, c.Owner, &pb.ClientFrame{Body: &pb.ClientFrame_CreateGroup{CreateGroup: &pb.CreateGroup{
		Name: c.Name, AvatarUrl: c.AvatarURL, Announcement: c.Announcement, OpenJoin: c.OpenJoin, UserIds: c.UserIDs,
		AddPolicy: policy, HistoryVisibility: vis}}},
		http.StatusCreated)
}

func (a *API) adminGetGroup(w http.ResponseWriter, r *http.Request) {
	a.asSystem(w, r, &pb.ClientFrame{Body: &pb.ClientFrame_GetGroup{GetGroup: &pb.GetGroup{ConversationId: r.PathValue("id")}}}, http.StatusOK)
}

// adminUpdateGroup: PATCH /v1/admin/groups/{id} with UpdateGroup's fields.
func (a *API) adminUpdateGroup(w http.ResponseWriter, r *http.Request) {
	var u pb.UpdateGroup
	if !decodeProto(w, r, &u) {
		return
	}
	u.ConversationId = r.PathValue("id")
	a.asSystem(w, r, &pb.ClientFrame{Body: &pb.ClientFrame_UpdateGroup{UpdateGroup: &u}}, http.StatusOK)
}

func (a *API) adminDissolveGroup(w http.ResponseWriter, r *http.Request) {
	a.asSystem(w, r, &pb.ClientFrame{Body: &pb.ClientFrame_DissolveGroup{DissolveGroup: &pb.DissolveGroup{ConversationId: r.PathValue("id")}}}, http.StatusOK)
}

// adminMembers: GET /v1/admin/groups/{id}/members?after=&limit=.
func (a *API) adminMembers(w http.ResponseWriter, r *http.Request) {
	limit, ok := queryUint(r, "limit")
	if !ok || limit > 1000 {
		writeCode(w, codeBadRequest, "limit must be a number up to 1000")
		return
	}
	a.asSystem(w, r, &pb.ClientFrame{Body: &pb.ClientFrame_ListMembers{ListMembers: &pb.ListMembers{
		ConversationId: r.PathValue("id"), AfterUserId: r.URL.Query().Get("after"), Limit: uint32(limit)}}}, http.StatusOK)
}

type userIDs struct {
	UserIDs []string `json:"user_ids"`
}

func (a *API) adminAddMembers(w http.ResponseWriter, r *http.Request) {
	var u userIDs
	if !decodeBody(w, r, &u) {
		return
	}
	a.asSystem(w, r, &pb.ClientFrame{Body: &pb.ClientFrame_AddMembers{AddMembers: &pb.AddMembers{
		ConversationId: r.PathValue("id"), UserIds: u.UserIDs}}}, http.StatusOK)
}

func (a *API) adminRemoveMember(w http.ResponseWriter, r *http.Request) {
	a.asSystem(w, r, &pb.ClientFrame{Body: &pb.ClientFrame_RemoveMember{RemoveMember: &pb.RemoveMember{
		ConversationId: r.PathValue("id"), UserId: r.PathValue("uid")}}}, http.StatusOK)
}

type roleReq struct {
	Role string `json:"role"` // "admin" or "member"
}

func (a *API) adminSetRole(w http.ResponseWriter, r *http.Request) {
	var q roleReq
	if !decodeBody(w, r, &q) {
		return
	}
	role := map[string]pb.GroupRole{"admin": pb.GroupRole_GROUP_ROLE_ADMIN, "member": pb.GroupRole_GROUP_ROLE_MEMBER}[q.Role]
	if role == 0 {
		writeCode(w, codeBadRequest, `role must be "admin" or "member"`)
		return
	}
	a.asSystem(w, r, &pb.ClientFrame{Body: &pb.ClientFrame_SetRole{SetRole: &pb.SetRole{
		ConversationId: r.PathValue("id"), UserId: r.PathValue("uid"), Role: role}}}, http.StatusOK)
}

type muteReq struct {
	DurationSeconds uint32 `json:"duration_seconds"` // 0 unmutes
}

func (a *API) adminMute(w http.ResponseWriter, r *http.Request) {
	var q muteReq
	if !decodeBody(w, r, &q) {
		return
	}
	a.asSystem(w, r, &pb.ClientFrame{Body: &pb.ClientFrame_MuteMember{MuteMember: &pb.MuteMember{
		ConversationId: r.PathValue("id"), UserId: r.PathValue("uid"), DurationSeconds: q.DurationSeconds}}}, http.StatusOK)
}

func (a *API) adminTransfer(w http.ResponseWriter, r *http.Request) {
	var b befriend // {"user_id"}
	if !decodeBody(w, r, &b) {
		return
	}
	a.asSystem(w, r, &pb.ClientFrame{Body: &pb.ClientFrame_TransferOwnership{TransferOwnership: &pb.TransferOwnership{
		ConversationId: r.PathValue("id"), UserId: b.UserID}}}, http.StatusOK)
}

// ---- messages ----

type adminSend struct {
	// From sends as that user; empty sends a system message (groups only).
	From           string `json:"from"`
	To             string `json:"to"`
	ConversationID string `json:"conversation_id"`
	ClientMsgID    string `json:"client_msg_id"`
	ContentType    string `json:"content_type"`
	// Payload is base64; Text is a UTF-8 shorthand for it (one of the two).
	Payload []byte `json:"payload"`
	Text    string `json:"text"`
}

// adminSendMessage: POST /v1/admin/messages. Stored and ACKed like any send
// (de-duplicated by from + client_msg_id); 201 with the SendAck.
func (a *API) adminSendMessage(w http.ResponseWriter, r *http.Request) {
	var m adminSend
	if !decodeBody(w, r, &m) {
		return
	}
	if m.Text != "" && len(m.Payload) > 0 {
		writeCode(w, codeBadRequest, "give payload or text, not both")
		return
	}
	if m.Text != "" {
		m.Payload = []byte(m.Text)
		if m.ContentType == "" {
			m.ContentType = "text"
		}
	}
	send := &pb.Send{ClientMsgId: m.ClientMsgID, To: m.To, ConversationId: m.ConversationID, ContentType: m.ContentType, Payload: m.Payload}
	f := &pb.ClientFrame{Body: &pb.ClientFrame_Send{Send: send}}
	if m.From == "" {
		if m.ConversationID == "" || m.To != "" {
			writeCode(w, codeBadRequest, "a system message (no from) goes to a group's conversation_id; to message a user, send from your app's system account")
			return
		}
		a.asSystem(w, r, f, http.StatusCreated)
		return
	}
	a.asUser(w, r, m.From, f, http.StatusCreated)
}

// adminMessages: GET /v1/admin/conversations/{id}/messages?after=|before=&limit=.
func (a *API) adminMessages(w http.ResponseWriter, r *http.Request) {
	after, ok1 := queryUint(r, "after")
	before, ok2 := queryUint(r, "before")
	limit, ok3 := queryUint(r, "limit")
	if !ok1 || !ok2 || !ok3 || limit > 1000 || (after != 0 && before != 0) {
		writeCode(w, codeBadRequest, "after, before and limit must be numbers; give after or before, not both")
		return
	}
	conv := r.PathValue("id")
	if conv == "" || len(conv) > 200 {
		writeCode(w, codeBadRequest, "invalid conversation id")
		return
	}
	page, err := a.cfg.Chat.AdminMessages(readCtx(r), conv, after, before, uint32(limit), r.URL.Query().Has("after"))
	if err != nil {
		writeChatError(w, err)
		return
	}
	a.writePage(w, r, page)
}

// adminRecall: POST /v1/admin/conversations/{id}/messages/{seq}/recall.
func (a *API) adminRecall(w http.ResponseWriter, r *http.Request) {
	seq, err := strconv.ParseUint(r.PathValue("seq"), 10, 64)
	if err != nil || seq == 0 {
		writeCode(w, codeBadRequest, "seq must be a positive number")
		return
	}
	a.asSystem(w, r, &pb.ClientFrame{Body: &pb.ClientFrame_Recall{Recall: &pb.Recall{
		ConversationId: r.PathValue("id"), Seq: seq}}}, http.StatusOK)
}

// adminSearch: POST /v1/admin/search {Search's fields}: message search
// across every conversation (or the one named), for moderation. Audited
// with the query, as POSTs are.
func (a *API) adminSearch(w http.ResponseWriter, r *http.Request) {
	var q pb.Search
	if !decodeProto(w, r, &q) {
		return
	}
	noteAudit(r, "query", q.Query)
	if q.ConversationId != "" {
		noteAudit(r, "conversation_id", q.ConversationId)
	}
	if q.From != "" {
		noteAudit(r, "from", q.From)
	}
	res, err := a.cfg.Chat.AdminSearch(readCtx(r), &q)
	if err != nil {
		writeChatError(w, err)
		return
	}
	a.writePage(w, r, res)
}

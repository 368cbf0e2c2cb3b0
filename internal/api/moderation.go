package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/parleyim/parley/internal/moderation"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// moderationRoutes are the admin API's reports, bans, word filter lists and
// audit log (docs/moderation.md).
func (a *API) moderationRoutes() []route {
	return []route{
		{"GET /v1/admin/reports", a.admin(a.adminReports)},
		{"GET /v1/admin/reports/{id}", a.admin(a.adminReport)},
		{"POST /v1/admin/reports/{id}/resolve", a.admin(a.adminCloseReport)},
		{"POST /v1/admin/reports/{id}/dismiss", a.admin(a.adminCloseReport)},
		{"POST /v1/admin/users/{id}/ban", a.admin(a.adminBan)},
		{"POST /v1/admin/users/{id}/unban", a.admin(a.adminUnban)},
		{"PUT /v1/admin/users/{id}/shadow-mute", a.admin(a.adminShadowMute)},
		{"DELETE /v1/admin/conversations/{id}/messages/{seq}", a.admin(a.adminRecall)},
		{"GET /v1/admin/word-lists", a.admin(a.adminWordLists)},
		{"PUT /v1/admin/word-lists/{name}", a.admin(a.adminPutWordList)},
		{"DELETE /v1/admin/word-lists/{name}", a.admin(a.adminDeleteWordList)},
		{"GET /v1/admin/audit", a.admin(a.adminAudit)},
	}
}

// notAudited are the admin routes that change something but are the app's
// traffic rather than administration: minting tokens, sending messages and
// pushes, acting as a user. Every other non-GET admin route is audited.
var notAudited = map[string]bool{
	"POST /v1/admin/tokens":               true,
	"POST /v1/admin/messages":             true,
	"POST /v1/admin/users/{id}/rpc":       true,
	"POST /v1/admin/push/users":           true,
	"POST /v1/admin/push/devices":         true,
	"POST /v1/admin/push/room":            true,
	"POST /v1/admin/push/all":             true,
	"POST /v1/admin/users/{id}/push/test": true,
}

func audited(pattern string) bool { return !notAudited[pattern] }

// auditKey is the context key of a request's auditNote.
type auditKey struct{}

// auditNote collects what a handler adds to its audit entry.
type auditNote struct{ detail map[string]any }

// noteAudit adds key=value to the audit entry of r (a no-op for routes not
// audited).
func noteAudit(r *http.Request, key string, value any) {
	if n, _ := r.Context().Value(auditKey{}).(*auditNote); n != nil {
		if n.detail == nil {
			n.detail = make(map[string]any)
		}
		n.detail[key] = value
	}
}

// heldWriter keeps a handler's answer until the audit entry of what it did
// is written: a client that has the answer finds the action in the log.
// Audited answers are small (no listing is audited).
type heldWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (h *heldWriter) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}

func (h *heldWriter) Write(b []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return h.body.Write(b)
}

func (h *heldWriter) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// audit runs h and, when it succeeded, appends who did what to the audit
// log before the answer goes out: the API key's name, the route, the path
// it acted on, and what the handler noted. A failure to append is logged:
// the action is done.
func (a *API) audit(w http.ResponseWriter, r *http.Request, keyName string, h http.HandlerFunc) {
	note := &auditNote{}
	r = r.WithContext(context.WithValue(r.Context(), auditKey{}, note))
	hw := &heldWriter{ResponseWriter: w}
	h(hw, r)
	if hw.status == 0 {
		hw.status = http.StatusOK
	}
	if hw.status >= 200 && hw.status <= 299 {
		var detail any
		if note.detail != nil {
			detail = note.detail
		}
		// Not the request's context: the client may have gone, the action is done.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := a.cfg.Moderation.Audit(ctx, keyName, r.Pattern, r.URL.Path, detail); err != nil {
			a.log.Error("audit log append failed", "action", r.Pattern, "target", r.URL.Path, "key", keyName, "err", err)
		}
		cancel()
	}
	w.WriteHeader(hw.status)
	_, _ = w.Write(hw.body.Bytes())
}

// reportJSON is a report as the admin API shows it.
type reportJSON struct {
	ID             string          `json:"id"`
	Reporter       string          `json:"reporter"`
	ConversationID string          `json:"conversation_id"`
	Seq            uint64          `json:"seq"`
	Reason         string          `json:"reason"`
	Note           string          `json:"note,omitempty"`
	Message        json.RawMessage `json:"message"` // as stored when reported (protocol JSON)
	CreatedAt      time.Time       `json:"created_at"`
	Status         string          `json:"status"`
	ClosedBy       string          `json:"closed_by,omitempty"`
	ClosedAt       *time.Time      `json:"closed_at,omitempty"`
	Resolution     string          `json:"resolution,omitempty"`
}

var reportStatuses = map[string]store.ReportStatus{
	"open": store.ReportOpen, "resolved": store.ReportResolved, "dismissed": store.ReportDismissed, "all": 0,
}

func statusName(s store.ReportStatus) string {
	for n, v := range reportStatuses {
		if v == s && n != "all" {
			return n
		}
	}
	return "unknown"
}

func toReportJSON(rp store.Report) reportJSON {
	out := reportJSON{ID: rp.ID, Reporter: rp.Reporter, ConversationID: rp.ConversationID, Seq: rp.Seq,
		Reason: rp.Reason, Note: rp.Note, CreatedAt: rp.CreatedAt, Status: statusName(rp.Status),
		ClosedBy: rp.ClosedBy, Resolution: rp.Resolution, Message: json.RawMessage("null")}
	if rp.Message != nil {
		if b, err := protojson.Marshal(rp.Message); err == nil {
			out.Message = b
		}
	}
	if !rp.ClosedAt.IsZero() {
		t := rp.ClosedAt
		out.ClosedAt = &t
	}
	return out
}

// adminReports: GET /v1/admin/reports?status=open|resolved|dismissed|all&after=&limit=:
// the moderators' queue, oldest first (status default open).
func (a *API) adminReports(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	st := q.Get("status")
	if st == "" {
		st = "open"
	}
	status, ok := reportStatuses[st]
	if !ok {
		writeCode(w, codeBadRequest, "status must be open, resolved, dismissed or all")
		return
	}
	limit, ok := listLimit(w, r)
	if !ok {
		return
	}
	after := q.Get("after")
	if len(after) > 64 {
		writeCode(w, codeBadRequest, "after is not a report id")
		return
	}
	list, err := a.cfg.Moderation.Reports(r.Context(), status, after, limit)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	out := struct {
		Reports []reportJSON `json:"reports"`
		Next    string       `json:"next,omitempty"`
	}{Reports: make([]reportJSON, 0, len(list))}
	for _, rp := range list {
		out.Reports = append(out.Reports, toReportJSON(rp))
	}
	if len(list) == limit {
		out.Next = list[len(list)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// adminReport: GET /v1/admin/reports/{id}.
func (a *API) adminReport(w http.ResponseWriter, r *http.Request) {
	rp, err := a.cfg.Moderation.GetReport(r.Context(), r.PathValue("id"))
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, codeNotFound, "no such report")
	case err != nil:
		writeCode(w, codeUnavailable, "try again")
	default:
		writeJSON(w, http.StatusOK, toReportJSON(rp))
	}
}

// adminCloseReport: POST /v1/admin/reports/{id}/resolve|dismiss {"note"?}.
// An empty body is an empty note.
func (a *API) adminCloseReport(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Note string `json:"note"`
	}
	if r.ContentLength != 0 && !decodeBody(w, r, &body) {
		return
	}
	if len(body.Note) > 1000 {
		writeCode(w, codeBadRequest, "note must be at most 1000 bytes")
		return
	}
	status := store.ReportResolved
	if strings.HasSuffix(r.URL.Path, "/dismiss") {
		status = store.ReportDismissed
	}
	id := r.PathValue("id")
	name, _ := a.adminKey(requestKey(r))
	noteAudit(r, "note", body.Note)
	err := a.cfg.Moderation.CloseReport(r.Context(), id, status, name, body.Note)
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, codeNotFound, "no such report")
		return
	case errors.Is(err, store.ErrConflict):
		writeCode(w, pb.ErrorCode_ERROR_CODE_CONFLICT, "the report is already closed")
		return
	case err != nil:
		writeCode(w, codeUnavailable, "try again")
		return
	}
	rp, err := a.cfg.Moderation.GetReport(r.Context(), id)
	if err != nil {
		writeJSON(w, http.StatusOK, map[string]string{"id": id, "status": statusName(status)})
		return
	}
	writeJSON(w, http.StatusOK, toReportJSON(rp))
}

// requestKey is the admin API key a request carries.
func requestKey(r *http.Request) string {
	key := r.Header.Get("X-Api-Key")
	if key == "" {
		key, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	}
	return key
}

// maxRemoveHours bounds remove_messages_hours (a week); maxRemoved the
// messages one ban removes.
const (
	maxRemoveHours = 24 * 7
	maxRemoved     = 10_000
)

// adminBan: POST /v1/admin/users/{id}/ban {"reason"?, "remove_messages_hours"?}:
// disables the user, revokes every token, closes their sessions on every
// node and removes their push registrations; with remove_messages_hours,
// deletes for everyone their messages of the last that many hours.
func (a *API) adminBan(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Reason              string `json:"reason"`
		RemoveMessagesHours int    `json:"remove_messages_hours"`
	}
	if r.ContentLength != 0 && !decodeBody(w, r, &body) {
		return
	}
	if len(body.Reason) > 1000 || body.RemoveMessagesHours < 0 || body.RemoveMessagesHours > maxRemoveHours {
		writeCode(w, codeBadRequest, "reason is at most 1000 bytes; remove_messages_hours is 0-168")
		return
	}
	u, ok := a.loadUser(w, r)
	if !ok {
		return
	}
	noteAudit(r, "reason", body.Reason)
	noteAudit(r, "remove_messages_hours", body.RemoveMessagesHours)
	u.Disabled = true
	u.TokenEpoch++
	if err := a.cfg.Store.UpdateUser(r.Context(), u); err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	closed := a.cfg.Chat.CloseUserSessions(u.ID, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED, "account disabled", "", "")
	if !a.removePushTargets(r, u.ID, "") {
		writeCode(w, codeUnavailable, "banned; removing push registrations failed, try again")
		return
	}
	out := map[string]any{"user_id": u.ID, "disabled": true, "sessions_closed": closed}
	if h := body.RemoveMessagesHours; h > 0 {
		removed, more, err := a.cfg.Chat.RemoveUserMessages(r.Context(), u.ID, time.Now().Add(-time.Duration(h)*time.Hour), maxRemoved)
		noteAudit(r, "messages_removed", removed)
		out["messages_removed"] = removed
		if more {
			out["more_messages"] = true // past maxRemoved: ban again to go on
		}
		if err != nil {
			a.log.Warn("ban: removing messages failed part way", "user", u.ID, "removed", removed, "err", err)
			writeCode(w, codeUnavailable, "banned; removing messages failed part way, ban again to go on")
			return
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// adminUnban: POST /v1/admin/users/{id}/unban: enables the user again (their
// old tokens stay revoked).
func (a *API) adminUnban(w http.ResponseWriter, r *http.Request) {
	u, ok := a.loadUser(w, r)
	if !ok || a.refuseDeleted(w, r, u.ID) {
		return
	}
	u.Disabled = false
	if err := a.cfg.Store.UpdateUser(r.Context(), u); err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	writeJSON(w, http.StatusOK, a.userJSON(u))
}

// adminShadowMute: PUT /v1/admin/users/{id}/shadow-mute {"muted": bool}:
// from now on what the user sends reaches only themselves (or, muted false,
// everyone again; what they sent while muted stays theirs alone). Their
// sessions reconnect (closed as for a server restart) to take it up.
func (a *API) adminShadowMute(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Muted *bool `json:"muted"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if body.Muted == nil {
		writeCode(w, codeBadRequest, "muted (true or false) is required")
		return
	}
	u, ok := a.loadUser(w, r)
	if !ok {
		return
	}
	noteAudit(r, "muted", *body.Muted)
	u.ShadowMuted = *body.Muted
	if err := a.cfg.Store.UpdateUser(r.Context(), u); err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	// A neutral close: the clients reconnect with the same token.
	a.cfg.Chat.CloseUserSessions(u.ID, pb.DisconnectCode_DISCONNECT_CODE_SERVER_SHUTDOWN, "please reconnect", "", "")
	writeJSON(w, http.StatusOK, a.userJSON(u))
}

// maxWordListBody bounds a PUT of a word list (the filter's own bounds
// apply after).
const maxWordListBody = 4 << 20

// adminWordLists: GET /v1/admin/word-lists.
func (a *API) adminWordLists(w http.ResponseWriter, r *http.Request) {
	lists, err := a.cfg.Moderation.FilterLists(r.Context())
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	if lists.Admin == nil {
		lists.Admin = []moderation.FilterList{}
	}
	writeJSON(w, http.StatusOK, lists)
}

// adminPutWordList: PUT /v1/admin/word-lists/{name} {"action", "words", ...}.
func (a *API) adminPutWordList(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "" || len(name) > 128 {
		writeCode(w, codeBadRequest, "a list name is 1-128 bytes")
		return
	}
	var l moderation.FilterList
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxWordListBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeError(w, http.StatusRequestEntityTooLarge, codeTooLarge, "a word list body is at most 4 MiB")
		} else {
			writeCode(w, codeBadRequest, "malformed JSON body")
		}
		return
	}
	if dec.More() {
		writeCode(w, codeBadRequest, "malformed JSON body")
		return
	}
	if l.Name != "" && l.Name != name {
		writeCode(w, codeBadRequest, "the body's name differs from the path's")
		return
	}
	l.Name = name
	noteAudit(r, "action", l.Action)
	noteAudit(r, "words", len(l.Words))
	err := a.cfg.Moderation.PutFilterList(r.Context(), l)
	var invalid *moderation.ErrInvalidList
	switch {
	case errors.As(err, &invalid):
		writeCode(w, codeBadRequest, invalid.Reason)
	case err != nil:
		writeCode(w, codeUnavailable, "try again")
	default:
		writeJSON(w, http.StatusOK, map[string]any{"name": l.Name, "action": l.Action, "words": len(l.Words)})
	}
}

// adminDeleteWordList: DELETE /v1/admin/word-lists/{name}.
func (a *API) adminDeleteWordList(w http.ResponseWriter, r *http.Request) {
	err := a.cfg.Moderation.DeleteFilterList(r.Context(), r.PathValue("name"))
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, codeNotFound, "no such list (lists of the configuration are changed there)")
	case err != nil:
		writeCode(w, codeUnavailable, "try again")
	default:
		writeJSON(w, http.StatusOK, map[string]string{"deleted": r.PathValue("name")})
	}
}

// auditJSON is an audit log entry as the admin API shows it.
type auditJSON struct {
	ID     uint64          `json:"id"`
	Time   time.Time       `json:"time"`
	Actor  string          `json:"actor"`
	Action string          `json:"action"`
	Target string          `json:"target"`
	Detail json.RawMessage `json:"detail,omitempty"`
}

// adminAudit: GET /v1/admin/audit?before=&limit=: newest first.
func (a *API) adminAudit(w http.ResponseWriter, r *http.Request) {
	before, ok := queryUint(r, "before")
	if !ok {
		writeCode(w, codeBadRequest, "before must be a number")
		return
	}
	limit, ok := listLimit(w, r)
	if !ok {
		return
	}
	list, err := a.cfg.Moderation.AuditLog(r.Context(), before, limit)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	out := struct {
		Entries []auditJSON `json:"entries"`
		Next    string      `json:"next,omitempty"`
	}{Entries: make([]auditJSON, 0, len(list))}
	for _, e := range list {
		j := auditJSON{ID: e.ID, Time: e.Time, Actor: e.Actor, Action: e.Action, Target: e.Target}
		if e.Detail != "" {
			j.Detail = json.RawMessage(e.Detail)
		}
		out.Entries = append(out.Entries, j)
	}
	if len(list) == limit {
		out.Next = strconv.FormatUint(list[len(list)-1].ID, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

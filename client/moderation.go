package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// ReportMessage reports message seq of a conversation you can read to the
// app's moderators, with a reason code (1-32 bytes of a-z, 0-9, "_": "spam",
// "abuse", "other") and an optional note (at most 1000 bytes). The report
// keeps the message as it is now. Reporting it again changes nothing.
func (c *Client) ReportMessage(ctx context.Context, conversationID string, seq uint64, reason, note string) error {
	return c.expectOk(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_ReportMessage{ReportMessage: &pb.ReportMessage{
		ConversationId: conversationID, Seq: seq, Reason: reason, Note: note}}}))
}

// Report is a user's report as the admin API shows it.
type Report struct {
	ID             string `json:"id"`
	Reporter       string `json:"reporter"`
	ConversationID string `json:"conversation_id"`
	Seq            uint64 `json:"seq"`
	Reason         string `json:"reason"`
	Note           string `json:"note"`
	// Message is the reported message as it was stored when reported
	// (protocol JSON; decode with protojson into a *pb.Message).
	Message    json.RawMessage `json:"message"`
	CreatedAt  time.Time       `json:"created_at"`
	Status     string          `json:"status"` // open, resolved or dismissed
	ClosedBy   string          `json:"closed_by"`
	ClosedAt   *time.Time      `json:"closed_at"`
	Resolution string          `json:"resolution"`
}

// Reports lists reports, oldest first: status "open" (""), "resolved",
// "dismissed" or "all"; after is the last id of the previous page ("" for
// the first). next is the id to pass as after for the next page ("" at
// the end).
func (a *Admin) Reports(ctx context.Context, status, after string, limit int) (reports []Report, next string, err error) {
	q := url.Values{}
	if status != "" {
		q.Set("status", status)
	}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Reports []Report `json:"reports"`
		Next    string   `json:"next"`
	}
	err = a.do(ctx, http.MethodGet, "/v1/admin/reports?"+q.Encode(), nil, &out)
	return out.Reports, out.Next, err
}

// ResolveReport closes an open report as acted on; DismissReport as
// nothing to do. note is kept with it.
func (a *Admin) ResolveReport(ctx context.Context, id, note string) (*Report, error) {
	return a.closeReport(ctx, id, "resolve", note)
}

// DismissReport: see ResolveReport.
func (a *Admin) DismissReport(ctx context.Context, id, note string) (*Report, error) {
	return a.closeReport(ctx, id, "dismiss", note)
}

func (a *Admin) closeReport(ctx context.Context, id, verb, note string) (*Report, error) {
	var r Report
	err := a.do(ctx, http.MethodPost, "/v1/admin/reports/"+url.PathEscape(id)+"/"+verb, map[string]string{"note": note}, &r)
	return retT(&r, err)
}

// BanResult is what a ban did.
type BanResult struct {
	SessionsClosed  int  `json:"sessions_closed"`
	MessagesRemoved int  `json:"messages_removed"`
	MoreMessages    bool `json:"more_messages"` // more than one ban removes: ban again
}

// Ban disables a user, revokes their tokens, closes their sessions on every
// node and, with removeMessagesHours > 0 (at most 168), deletes for everyone
// their messages of that many last hours.
func (a *Admin) Ban(ctx context.Context, userID, reason string, removeMessagesHours int) (*BanResult, error) {
	var out BanResult
	err := a.do(ctx, http.MethodPost, "/v1/admin/users/"+url.PathEscape(userID)+"/ban",
		map[string]any{"reason": reason, "remove_messages_hours": removeMessagesHours}, &out)
	return retT(&out, err)
}

// Unban enables a banned user again (their old tokens stay revoked).
func (a *Admin) Unban(ctx context.Context, userID string) error {
	return a.do(ctx, http.MethodPost, "/v1/admin/users/"+url.PathEscape(userID)+"/unban", nil, nil)
}

// DeleteMessage deletes a message for everyone, any age, as the app's
// moderators: a RECALL event with event.moderated set.
func (a *Admin) DeleteMessage(ctx context.Context, conversationID string, seq uint64) error {
	return a.do(ctx, http.MethodDelete, "/v1/admin/conversations/"+url.PathEscape(conversationID)+"/messages/"+strconv.FormatUint(seq, 10), nil, nil)
}

// WordList is one list of the word filter kept by the admin API.
type WordList struct {
	Name             string   `json:"name"`
	Action           string   `json:"action"` // mask or reject
	Words            []string `json:"words"`
	Leet             bool     `json:"leet,omitempty"`
	IgnoreSeparators bool     `json:"ignore_separators,omitempty"`
	WholeWords       bool     `json:"whole_words,omitempty"`
}

// PutWordList adds or replaces a word filter list; every node uses it
// within a second.
func (a *Admin) PutWordList(ctx context.Context, l WordList) error {
	return a.do(ctx, http.MethodPut, "/v1/admin/word-lists/"+url.PathEscape(l.Name), l, nil)
}

// DeleteWordList removes a list the admin API added.
func (a *Admin) DeleteWordList(ctx context.Context, name string) error {
	return a.do(ctx, http.MethodDelete, "/v1/admin/word-lists/"+url.PathEscape(name), nil, nil)
}

// WordLists returns the admin API's lists.
func (a *Admin) WordLists(ctx context.Context) ([]WordList, error) {
	var out struct {
		Lists []WordList `json:"lists"`
	}
	err := a.do(ctx, http.MethodGet, "/v1/admin/word-lists", nil, &out)
	return out.Lists, err
}

// AuditEntry is one admin action of the audit log.
type AuditEntry struct {
	ID     uint64          `json:"id"`
	Time   time.Time       `json:"time"`
	Actor  string          `json:"actor"`  // the API key's name
	Action string          `json:"action"` // the route, e.g. "POST /v1/admin/users/{id}/ban"
	Target string          `json:"target"` // the path it acted on
	Detail json.RawMessage `json:"detail"`
}

// AuditLog lists the audit log newest first: entries with ids below before
// (0: from the newest). next is the before of the next page (0 at the end).
func (a *Admin) AuditLog(ctx context.Context, before uint64, limit int) (entries []AuditEntry, next uint64, err error) {
	q := url.Values{}
	if before > 0 {
		q.Set("before", strconv.FormatUint(before, 10))
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out struct {
		Entries []AuditEntry `json:"entries"`
		Next    string       `json:"next"`
	}
	if err = a.do(ctx, http.MethodGet, "/v1/admin/audit?"+q.Encode(), nil, &out); err != nil {
		return nil, 0, err
	}
	if out.Next != "" {
		next, _ = strconv.ParseUint(out.Next, 10, 64)
	}
	return out.Entries, next, nil
}

// SetShadowMuted shadow-mutes a user (what they send then reaches only
// themselves) or lifts it; their sessions reconnect to take it up.
func (a *Admin) SetShadowMuted(ctx context.Context, userID string, muted bool) error {
	return a.do(ctx, http.MethodPut, "/v1/admin/users/"+url.PathEscape(userID)+"/shadow-mute", map[string]bool{"muted": muted}, nil)
}

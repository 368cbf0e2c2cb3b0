package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Disappearing-message timers a conversation may have (docs/retention.md);
// any other duration is refused with BAD_REQUEST.
var DisappearingTimers = []time.Duration{
	30 * time.Second, 5 * time.Minute, time.Hour, 24 * time.Hour, 7 * 24 * time.Hour, 28 * 24 * time.Hour,
}

// SetDisappearing sets the conversation's disappearing-messages timer (0:
// off): either side of a 1:1, a group's owner or admins. It is stored as a
// DISAPPEARING_SET event in the conversation (its SendAck); messages sent
// after it carry Message.ExpiresAt and are never served after that time.
func (c *Client) SetDisappearing(ctx context.Context, conversationID string, d time.Duration) (*pb.SendAck, error) {
	return c.sendAck(c.roundTrip(ctx, &pb.ClientFrame{Body: &pb.ClientFrame_SetDisappearing{SetDisappearing: &pb.SetDisappearing{
		ConversationId: conversationID, Seconds: uint32(d / time.Second), ClientMsgId: c.ids.next()}}}))
}

// Disappearing returns a conversation's timer as a conversation list gives
// it (0: off).
func Disappearing(conv *pb.Conversation) time.Duration {
	return time.Duration(conv.GetDisappearingSeconds()) * time.Second
}

// ExpiresAt returns when a message disappears (zero time: it does not).
func ExpiresAt(m *pb.Message) time.Time {
	if m.GetExpiresAt() == 0 {
		return time.Time{}
	}
	return time.UnixMilli(m.GetExpiresAt())
}

// Expired reports whether a message held by the client has disappeared by
// now: a client drops it from view (the server no longer serves it).
func Expired(m *pb.Message, now time.Time) bool {
	return m.GetExpiresAt() != 0 && m.GetExpiresAt() <= now.UnixMilli()
}

// RetentionPolicy is how long a conversation keeps its messages (0 fields:
// no limit of that kind).
type RetentionPolicy struct {
	Days     int `json:"days,omitempty"`
	Messages int `json:"messages,omitempty"`
}

// Retention is a conversation's retention as the admin API shows it.
type Retention struct {
	ConversationID string `json:"conversation_id"`
	// Policy is the conversation's own policy (nil: Default applies).
	Policy              *RetentionPolicy `json:"policy"`
	Default             RetentionPolicy  `json:"default"`
	FirstSeq            uint64           `json:"first_seq"`
	DisappearingSeconds uint32           `json:"disappearing_seconds"`
}

// SweepResult is what a sweep deleted.
type SweepResult struct {
	Disappeared   int `json:"disappeared"`
	Expired       int `json:"expired"`
	Conversations int `json:"conversations"`
	// Files deleted because no stored message carries them any more.
	Files int `json:"files"`
}

// GetRetention reads a conversation's retention.
func (a *Admin) GetRetention(ctx context.Context, conversationID string) (*Retention, error) {
	var r Retention
	err := a.do(ctx, http.MethodGet, "/v1/admin/conversations/"+url.PathEscape(conversationID)+"/retention", nil, &r)
	return retT(&r, err)
}

// SetRetention gives a conversation a policy of its own (audited).
func (a *Admin) SetRetention(ctx context.Context, conversationID string, p RetentionPolicy) (*Retention, error) {
	var r Retention
	err := a.do(ctx, http.MethodPut, "/v1/admin/conversations/"+url.PathEscape(conversationID)+"/retention", p, &r)
	return retT(&r, err)
}

// DeleteRetention removes a conversation's own policy (the default applies).
func (a *Admin) DeleteRetention(ctx context.Context, conversationID string) (*Retention, error) {
	var r Retention
	err := a.do(ctx, http.MethodDelete, "/v1/admin/conversations/"+url.PathEscape(conversationID)+"/retention", nil, &r)
	return retT(&r, err)
}

// SweepRetention runs a sweep now and says what it deleted.
func (a *Admin) SweepRetention(ctx context.Context) (*SweepResult, error) {
	var r SweepResult
	err := a.do(ctx, http.MethodPost, "/v1/admin/retention/sweep", nil, &r)
	return retT(&r, err)
}

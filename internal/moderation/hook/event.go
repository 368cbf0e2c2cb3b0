package hook

import (
	"encoding/json"
	"strconv"
	"strings"
)

// EventType is what a hook is asked about.
type EventType string

// The event types a hook can register for.
const (
	// EventDirectSend: a 1:1 message (Recipient set).
	EventDirectSend EventType = "message.direct"
	// EventGroupSend: a message to a group conversation.
	EventGroupSend EventType = "message.group"
	// EventEdit: a new content for the sender's message TargetSeq.
	EventEdit EventType = "message.edit"
	// EventGroupChange: a change to a group (members, roles, settings; Change
	// says which). It has no content, so a hook cannot replace it.
	EventGroupChange EventType = "group.change"
)

func (t EventType) valid() bool {
	switch t {
	case EventDirectSend, EventGroupSend, EventEdit, EventGroupChange:
		return true
	}
	return false
}

// Attachment is a file a message carries, as the hook sees it.
type Attachment struct {
	ID          string `json:"id"`
	Name        string `json:"name"`
	Size        int64  `json:"size"` // bytes
	ContentType string `json:"content_type"`
}

// Event is what a hook is asked about. Decide does not modify it or keep it.
type Event struct {
	Type EventType
	// MessageID is the id the message will be stored under; 0 when not yet
	// assigned (omitted from the request).
	MessageID uint64
	// ClientMsgID is the sender's id for the send (the retry key); empty
	// when the event has none.
	ClientMsgID    string
	Sender         string
	ConversationID string
	// Recipient is the other user of a 1:1 message.
	Recipient string
	// TargetSeq is the seq of the message an EventEdit replaces.
	TargetSeq   uint64
	ContentType string
	Payload     []byte
	Attachments []Attachment
	// Change describes an EventGroupChange as a JSON object the caller
	// renders (see the package doc); it must be valid JSON when set.
	Change json.RawMessage
}

// Action is what a decision does with the message.
type Action uint8

// The actions.
const (
	Allow Action = iota
	Reject
	Replace
)

func (a Action) String() string {
	switch a {
	case Allow:
		return "allow"
	case Reject:
		return "reject"
	case Replace:
		return "replace"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// CodeUnavailable is the rejection code of a FailClosed hook that could not
// decide: a temporary error, not the app's verdict.
const CodeUnavailable = "hook_unavailable"

// Failure names why a hook did not decide (its Policy did).
type Failure string

// The failures.
const (
	FailureTimeout     Failure = "timeout"      // no answer within the hook's Timeout
	FailureError       Failure = "error"        // the request failed (connection refused, reset, TLS)
	FailureMalformed   Failure = "malformed"    // the answer broke the rules of the package doc
	FailureBreakerOpen Failure = "breaker_open" // the circuit breaker kept the call from being made
	FailureNoSlot      Failure = "no_slot"      // MaxInFlight requests were in flight for the whole Timeout
)

// Decision is the outcome of Decide.
type Decision struct {
	Action Action
	// Code and Reason are a Reject's: the app's code ([a-z0-9_], ≤ 64 bytes)
	// and the text the sender sees (≤ 256 bytes, may be empty); or
	// CodeUnavailable and no reason when a FailClosed hook failed.
	Code   string
	Reason string
	// ContentType and Payload are a Replace's: the content after every hook
	// of the chain. Payload may share memory with Event.Payload or with
	// other callers' decisions (DecisionCache): read it, do not modify it.
	ContentType string
	Payload     []byte
	// Failure is set when a hook's Policy made (part of) the decision: with
	// Reject, the FailClosed hook's failure; with Allow or Replace, the
	// first FailOpen hook that failed.
	Failure Failure
	// Hook names the hook that rejected, or whose failure Failure is.
	Hook string
}

// Temporary reports whether d is a FailClosed hook's rejection: the sender
// should be told to retry, and the decision not be remembered.
func (d Decision) Temporary() bool { return d.Action == Reject && d.Failure != "" }

func isText(contentType string) bool {
	return contentType == "text" || strings.HasPrefix(contentType, "text/")
}

// idempotencyKey is the Idempotency-Key header's value ("" when ev has no
// client message id): sender and client message id percent-encoded, so
// the ":" between them is unambiguous and the value is a legal header.
func idempotencyKey(ev *Event) string {
	if ev.ClientMsgID == "" {
		return ""
	}
	var b strings.Builder
	b.Grow(len(ev.Sender) + 1 + len(ev.ClientMsgID))
	escapeKey(&b, ev.Sender)
	b.WriteByte(':')
	escapeKey(&b, ev.ClientMsgID)
	return b.String()
}

func escapeKey(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
}

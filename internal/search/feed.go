package search

import (
	"context"
	"errors"
	"strings"
	"unicode/utf8"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// MessageGetter reads one stored message (store.Store has it).
type MessageGetter interface {
	GetMessage(ctx context.Context, conversationID string, seq uint64) (*pb.Message, error)
}

// IsTextType reports whether a message of this content type is indexed by
// its payload: "" and anything starting with "text" ("text",
// "text/plain", "text/markdown"...).
func IsTextType(contentType string) bool {
	return contentType == "" || contentType == "text" || strings.HasPrefix(contentType, "text/")
}

// DocOf returns the document of a stored message, or nil when it has
// nothing to search: not a NORMAL message, recalled, or neither search
// text nor a UTF-8 text payload. SearchText wins over the payload whatever
// the content type. The text is cut to MaxTextBytes at a character
// boundary.
func DocOf(m *pb.Message) *Doc {
	if m.Kind != pb.MessageKind_MESSAGE_KIND_NORMAL || m.Recalled {
		return nil
	}
	text := m.SearchText
	if text == "" && IsTextType(m.ContentType) && utf8.Valid(m.Payload) {
		text = string(m.Payload)
	}
	if strings.TrimSpace(text) == "" {
		return nil
	}
	var members []string
	if m.To != "" { // a 1:1 message: its conversation is From and To's alone
		members = []string{m.From, m.To}
	}
	return &Doc{
		Members:        members,
		ConversationID: m.ConversationId,
		Seq:            m.Seq,
		From:           m.From,
		ContentType:    m.ContentType,
		Text:           CutText(text, MaxTextBytes),
		Time:           m.ServerTime,
		HasAttachment:  len(m.Attachments) > 0,
		SenderOnly:     m.SenderOnly,
	}
}

// CutText returns at most n bytes of s, ending at a character boundary.
func CutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Changes turns stored messages, in log order, into index changes:
//   - a NORMAL message puts its document (DocOf; as stored now, so one
//     edited since is indexed with its new text, and a recalled or erased
//     one is deleted);
//   - an EDIT event puts its target's document as stored now (read with
//     get: it carries the target's sender, time and attachments and the
//     newest text), or deletes it when the target is gone, recalled, or
//     left with nothing to search;
//   - a RECALL event deletes its target;
//   - group events and other kinds change nothing.
func Changes(ctx context.Context, get MessageGetter, msgs []*pb.Message) ([]Change, error) {
	var out []Change
	for _, m := range msgs {
		switch m.Kind {
		case pb.MessageKind_MESSAGE_KIND_NORMAL:
			if d := DocOf(m); d != nil {
				out = append(out, Change{Put: d})
			} else if m.Recalled {
				// Erased in place (a deleted account's message, logged
				// again by the store) or recalled since: out of the index.
				out = append(out, Change{ConversationID: m.ConversationId, Seq: m.Seq})
			}
		case pb.MessageKind_MESSAGE_KIND_EDIT:
			target := m.GetEvent().GetTargetSeq()
			if target == 0 {
				continue
			}
			t, err := get.GetMessage(ctx, m.ConversationId, target)
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrCorrupt) {
				t = nil // nothing (readable) to index
			} else if err != nil {
				return nil, err
			}
			if d := docOrNil(t); d != nil {
				out = append(out, Change{Put: d})
			} else {
				out = append(out, Change{ConversationID: m.ConversationId, Seq: target})
			}
		case pb.MessageKind_MESSAGE_KIND_RECALL:
			if target := m.GetEvent().GetTargetSeq(); target != 0 {
				out = append(out, Change{ConversationID: m.ConversationId, Seq: target})
			}
		}
	}
	return out, nil
}

func docOrNil(m *pb.Message) *Doc {
	if m == nil {
		return nil
	}
	return DocOf(m)
}

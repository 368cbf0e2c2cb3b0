package store

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// MessageHead is what counting a user's unread messages needs of a stored
// message: no payload, no event (a group's "members added" event names up
// to a thousand users, and decoding it whole for a count is most of the
// cost of a badge).
type MessageHead struct {
	Seq      uint64
	From     string
	Kind     pb.MessageKind
	Recalled bool
	// SenderOnly: a shadow-muted sender's message, for nobody but them.
	SenderOnly bool
	// ThreadRoot: the message is a reply in that root's thread.
	ThreadRoot uint64
	// Mentions and MentionAll: who the message mentions.
	Mentions   []string
	MentionAll bool
	// ExpiresAt: when a disappearing message disappears (unix ms, 0: never).
	ExpiresAt int64
}

// Field numbers of pb.Message that DecodeHead reads.
const (
	headFieldFrom     = 4
	headFieldKind     = 10
	headFieldRecalled = 12
	headFieldSender   = 15 // sender_only
	headFieldMentions = 17
	headFieldAll      = 18 // mention_all
	headFieldThread   = 19 // thread_root
	headFieldExpires  = 27 // expires_at
)

var errBadHead = errors.New("malformed message encoding")

// DecodeHead reads From, Kind and Recalled out of the protobuf encoding of a
// pb.Message, skipping every other field unparsed. Seq is left to the
// caller (the stores key messages by it).
func DecodeHead(body []byte) (MessageHead, error) {
	var h MessageHead
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return h, errBadHead
		}
		body = body[n:]
		switch {
		case num == headFieldFrom && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(body)
			if n < 0 {
				return h, errBadHead
			}
			h.From = string(v)
			body = body[n:]
		case num == headFieldMentions && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(body)
			if n < 0 {
				return h, errBadHead
			}
			h.Mentions = append(h.Mentions, string(v))
			body = body[n:]
		case (num == headFieldAll || num == headFieldThread) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(body)
			if n < 0 {
				return h, errBadHead
			}
			if num == headFieldAll {
				h.MentionAll = v != 0
			} else {
				h.ThreadRoot = v
			}
			body = body[n:]
		case num == headFieldKind && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(body)
			if n < 0 {
				return h, errBadHead
			}
			h.Kind = pb.MessageKind(int32(v))
			body = body[n:]
		case num == headFieldSender && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(body)
			if n < 0 {
				return h, errBadHead
			}
			h.SenderOnly = v != 0
			body = body[n:]
		case num == headFieldExpires && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(body)
			if n < 0 {
				return h, errBadHead
			}
			h.ExpiresAt = int64(v)
			body = body[n:]
		case num == headFieldRecalled && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(body)
			if n < 0 {
				return h, errBadHead
			}
			h.Recalled = v != 0
			body = body[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, body)
			if n < 0 {
				return h, errBadHead
			}
			body = body[n:]
		}
	}
	return h, nil
}

package chat

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Shadow muting: what a shadow-muted user sends is stored with sender_only
// set and reaches only them (docs/moderation.md). These are the read-side
// rules; the send side sets the flag (handleSend, edit, recall) and
// delivery sends such messages to their sender alone (deliverHeld).

// senderView is m as its sender sees it: without the flag, which no client
// is shown.
func senderView(m *pb.Message) *pb.Message {
	c := proto.Clone(m).(*pb.Message)
	c.SenderOnly = false
	return c
}

// viewFor is msgs as uid may see them: others' sender-only messages left
// out, uid's own without the flag. msgs is not modified.
func viewFor(uid string, msgs []*pb.Message) []*pb.Message {
	n := 0
	now := time.Now().UnixMilli()
	for _, m := range msgs {
		if m.SenderOnly || expired(m, now) {
			n++
		}
	}
	if n == 0 {
		return msgs
	}
	out := make([]*pb.Message, 0, len(msgs))
	for _, m := range msgs {
		switch {
		case expired(m, now): // disappeared (retention.go): never served
		case !m.SenderOnly:
			out = append(out, m)
		case m.From == uid:
			out = append(out, senderView(m))
		}
	}
	return out
}

// lastLookback bounds how far back lastVisible looks past others'
// sender-only messages for a conversation's last message.
const lastLookback = 32

// lastVisible returns the newest message of conv before `before` (0: the
// newest) that uid may see, or nil; all is true when every message it read
// was another's sender-only one and it read back to the first (the
// conversation holds nothing for uid).
func (s *Service) lastVisible(ctx context.Context, uid, conv string, before uint64) (last *pb.Message, all bool, err error) {
	page, err := s.store.History(ctx, conv, before, 1)
	if err != nil || len(page) == 0 {
		return nil, false, err
	}
	if v := viewFor(uid, page); len(v) == 1 {
		return v[0], false, nil
	}
	page, err = s.store.History(ctx, conv, page[0].Seq, lastLookback)
	if err != nil {
		return nil, false, err
	}
	v := viewFor(uid, page)
	if len(v) > 0 {
		return v[len(v)-1], false, nil
	}
	return nil, len(page) == 0 || page[0].Seq == 1, nil
}

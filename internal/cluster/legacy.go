package cluster

import (
	"encoding/binary"
	"strconv"

	"github.com/parleyim/parley/internal/cluster/clusterpb"
)

// The previous release's layout: a kind byte, the except session, a
// uvarint count of keys and each key (uvarint length, bytes), then the data
// (a frame). Kinds and keys by position, as that release sent them:
const (
	legacyFrame        = 0   // except, keys: users to skip; data: the frame
	legacyKick         = 1   // user, device type, device id, session id, start (Unix ns, decimal)
	legacyClose        = 2   // user, code (decimal), reason, session id, token id
	legacyGroupChanged = 3   // conversation, then "+uid" (joined) or "-uid" (left)
	legacyPresence     = 4   // "1" (online) or "0", node
	legacySessions     = 5   // session ids; data: the frame
	legacyNodeAlive    = 6   // node
	legacyListSessions = 7   // a question
	legacyRoomOnline   = 8   // a question
	legacyUserOnline   = 255 // a question, answered with the node id alone
)

// decodeLegacy reads the previous release's layout into the typed events.
func (d *Decoder) decodeLegacy(b []byte) (*clusterpb.Envelope, error) {
	kind := b[0]
	b = b[1:]
	except, b, ok := readString(b)
	if !ok {
		return nil, ErrMalformed
	}
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)) {
		return nil, ErrMalformed
	}
	b = b[w:]
	var keys []string
	if n > 0 {
		keys = make([]string, 0, n)
	}
	for range n {
		var k string
		if k, b, ok = readString(b); !ok {
			return nil, ErrMalformed
		}
		keys = append(keys, k)
	}
	data := b
	var m clusterpb.Envelope
	switch kind {
	case legacyFrame:
		f := &d.frame
		f.ExceptSession, f.SkipUsers, f.Frame = except, keys, data
		d.event.Frame = f
		d.env.Event = &d.event
		return &d.env, nil
	case legacyKick:
		if len(keys) != 5 {
			return nil, ErrMalformed
		}
		ns, err := strconv.ParseInt(keys[4], 10, 64)
		if err != nil {
			return nil, ErrMalformed
		}
		m.Event = &clusterpb.Envelope_Kick{Kick: &clusterpb.Kick{UserId: keys[0], DeviceType: keys[1],
			DeviceId: keys[2], SessionId: keys[3], StartedUnixNano: ns}}
	case legacyClose:
		if len(keys) != 5 {
			return nil, ErrMalformed
		}
		code, err := strconv.ParseInt(keys[1], 10, 32)
		if err != nil {
			return nil, ErrMalformed
		}
		m.Event = &clusterpb.Envelope_Close{Close: &clusterpb.Close{UserId: keys[0], Code: int32(code),
			Reason: keys[2], SessionId: keys[3], TokenId: keys[4]}}
	case legacyGroupChanged:
		if len(keys) == 0 {
			return nil, ErrMalformed
		}
		g := &clusterpb.GroupChanged{ConversationId: keys[0]}
		for _, k := range keys[1:] {
			switch {
			case len(k) < 2:
			case k[0] == '-':
				g.Left = append(g.Left, k[1:])
			default:
				g.Joined = append(g.Joined, k[1:])
			}
		}
		m.Event = &clusterpb.Envelope_GroupChanged{GroupChanged: g}
	case legacyPresence:
		if len(keys) != 2 {
			return nil, ErrMalformed
		}
		m.Event = &clusterpb.Envelope_Presence{Presence: &clusterpb.Presence{Online: keys[0] == "1", Node: keys[1]}}
	case legacySessions:
		m.Event = &clusterpb.Envelope_Sessions{Sessions: &clusterpb.Sessions{SessionIds: keys, Frame: data}}
	case legacyNodeAlive:
		if len(keys) != 1 {
			return nil, ErrMalformed
		}
		m.Event = &clusterpb.Envelope_NodeAlive{NodeAlive: &clusterpb.NodeAlive{Node: keys[0]}}
	case legacyListSessions:
		m.Event = &clusterpb.Envelope_SessionsQuestion{SessionsQuestion: &clusterpb.SessionsQuestion{}}
	case legacyRoomOnline:
		m.Event = &clusterpb.Envelope_RoomOnlineQuestion{RoomOnlineQuestion: &clusterpb.RoomOnlineQuestion{}}
	case legacyUserOnline:
		m.Event = &clusterpb.Envelope_UserOnlineQuestion{UserOnlineQuestion: &clusterpb.UserOnlineQuestion{}}
	default:
		return nil, ErrMalformed
	}
	return &m, nil
}

func readString(b []byte) (string, []byte, bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return "", nil, false
	}
	return string(b[w : w+int(n)]), b[w+int(n):], true
}

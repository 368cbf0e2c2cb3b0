package bench

import (
	"encoding/binary"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// The checks of the conversation scenarios (group, send-rate, fanout,
// mixed) key on (sender stream → receiver): every message a stream's sender
// got acked must reach every online member of the conversation but the
// sending session, once, in order. Receivers may be in other processes than
// the stream's sender, so each stream ends with an end marker — a last
// message saying how many were sent and which of them were not acked — and
// each receiver settles its account with the marker when it arrives: no
// receiver needs to hear from the sender's process.
//
// A receiver's state per stream is a few words (received numbers form a
// prefix 1..pre in the normal case); only a gap costs a map, so 5,000
// receivers × hundreds of streams stay cheap.

// endMagic marks an end marker's payload (bench messages use payloadMagic).
var endMagic = [4]byte{'p', 'b', 'n', 'e'}

// maxEndFailed bounds the failed sends an end marker lists.
const maxEndFailed = 4000

// streamEnd is what a stream's end marker says: messages 1..last were
// sent, and those in failed got no ack (they may still have been stored).
type streamEnd struct {
	last   uint64
	failed []uint64
}

// makeEnd encodes stream id's end marker.
func makeEnd(id uint32, end *streamEnd) []byte {
	failed := end.failed[:min(len(end.failed), maxEndFailed)]
	b := makePayload(make([]byte, 0, payloadHeader+12+8*len(failed)), payloadHeader, id, end.last+1)
	copy(b[20:24], endMagic[:])
	b = binary.BigEndian.AppendUint64(b, end.last)
	b = binary.BigEndian.AppendUint32(b, uint32(len(failed)))
	for _, k := range failed {
		b = binary.BigEndian.AppendUint64(b, k)
	}
	return b
}

// parseBench reads a bench payload: a message or an end marker.
func parseBench(p []byte) (id uint32, k uint64, sentAt int64, end, ok bool) {
	if len(p) < payloadHeader {
		return 0, 0, 0, false, false
	}
	switch [4]byte(p[20:24]) {
	case payloadMagic:
	case endMagic:
		end = true
	default:
		return 0, 0, 0, false, false
	}
	return binary.BigEndian.Uint32(p), binary.BigEndian.Uint64(p[4:]), int64(binary.BigEndian.Uint64(p[12:])), end, true
}

func parseEnd(p []byte) (*streamEnd, bool) {
	p = p[payloadHeader:]
	if len(p) < 12 {
		return nil, false
	}
	e := &streamEnd{last: binary.BigEndian.Uint64(p)}
	n := int(binary.BigEndian.Uint32(p[8:]))
	p = p[12:]
	if len(p) != 8*n {
		return nil, false
	}
	for i := range n {
		e.failed = append(e.failed, binary.BigEndian.Uint64(p[8*i:]))
	}
	return e, true
}

// rxTrack is one receiver's account of one stream. Owned by the
// receiver's reader goroutine; read once it has ended.
type rxTrack struct {
	pre   uint64              // 1..pre all received
	maxK  uint64              // highest number received
	extra map[uint64]struct{} // numbers > pre+1 received (after a gap only)
	recvN uint64              // distinct numbers received
	dup   uint64
	ooo   uint64
	ended bool // the end marker arrived
}

// add records number k; true when it was received before.
func (t *rxTrack) add(k uint64) (dup bool) {
	switch {
	case k == t.pre+1:
		t.pre++
		for len(t.extra) > 0 {
			if _, ok := t.extra[t.pre+1]; !ok {
				break
			}
			delete(t.extra, t.pre+1)
			t.pre++
		}
	case k <= t.pre:
		return true
	default:
		if _, ok := t.extra[k]; ok {
			return true
		}
		if t.extra == nil {
			t.extra = map[uint64]struct{}{}
		}
		t.extra[k] = struct{}{}
	}
	t.recvN++
	t.maxK = max(t.maxK, k)
	return false
}

func (t *rxTrack) has(k uint64) bool {
	if k <= t.pre {
		return true
	}
	_, ok := t.extra[k]
	return ok
}

// gconv is one conversation of the run as this process sees it: every
// stream sent into it (by this or another process) and what is known of
// their ends.
type gconv struct {
	id       string   // conversation id: "g:…", or the 1:1 conversation
	to       string   // 1:1: the receiver (sends name it); groups: ""
	part     *part    // mixed: the part it belongs to; nil otherwise
	from     []string // stream index → its sender's user id
	ends     []atomic.Pointer[streamEnd]
	interval time.Duration // pause between one stream's sends (0: none)
}

func newConv(id, to string, p *part, senders []string, perSender int, interval time.Duration) *gconv {
	c := &gconv{id: id, to: to, part: p, interval: interval}
	for _, s := range senders {
		for range perSender {
			c.from = append(c.from, s)
		}
	}
	c.ends = make([]atomic.Pointer[streamEnd], len(c.from))
	return c
}

// rxState is one receiving session: a member of one conversation.
type rxState struct {
	conv    *gconv
	user    string
	tracks  []rxTrack // by stream index; the user's own streams stay empty
	lastSeq uint64    // the conversation's seq must only grow
	echo    uint64    // the user's own messages pushed back to its sending session
	lat     []uint64  // e2e latencies (ns) not yet recorded
	endsGot *atomic.Int64
}

func newRx(c *gconv, user string, endsGot *atomic.Int64) *rxState {
	return &rxState{conv: c, user: user, tracks: make([]rxTrack, len(c.from)), endsGot: endsGot}
}

// wantEnds is the number of end markers this receiver waits for.
func (rx *rxState) wantEnds() int64 {
	var n int64
	for _, f := range rx.conv.from {
		if f != rx.user {
			n++
		}
	}
	return n
}

// handle checks one pushed message. conv, from and payload are only read
// during the call.
func (rx *rxState) handle(e *Env, conv, from, payload []byte, seq uint64, kind pb.MessageKind, now time.Time) {
	if kind != pb.MessageKind_MESSAGE_KIND_NORMAL {
		return // the group's events (members added and the like)
	}
	c := rx.conv
	id, k, sentAt, end, ok := parseBench(payload)
	if string(conv) != c.id || !ok || int(id) >= len(c.from) || string(from) != c.from[id] {
		e.Note("messages that were not this run's arrived (counted nowhere)")
		return
	}
	if string(from) == rx.user {
		rx.echo++
		return
	}
	t := &rx.tracks[id]
	disorder := seq <= rx.lastSeq
	rx.lastSeq = max(rx.lastSeq, seq)
	if end {
		if t.ended {
			t.dup++
			return
		}
		t.ended = true
		if disorder {
			t.ooo++
		}
		if c.ends[id].Load() == nil {
			if se, ok := parseEnd(payload); ok {
				c.ends[id].CompareAndSwap(nil, se)
			}
		}
		rx.endsGot.Add(1)
		return
	}
	disorder = disorder || k < t.maxK || t.ended
	if t.add(k) {
		t.dup++
		return
	}
	if disorder {
		t.ooo++
	}
	rx.lat = append(rx.lat, uint64(max(now.UnixNano()-sentAt, 0)))
	if len(rx.lat) >= 256 {
		rx.flush(e, now)
	}
}

// flush records the deliveries handled since the last flush.
func (rx *rxState) flush(e *Env, now time.Time) {
	if len(rx.lat) == 0 {
		return
	}
	ns := now.UnixNano()
	e.M.delivered.Add(uint64(len(rx.lat)))
	e.M.lastRecv.Store(ns)
	e.M.E2E.recordBatch(rx.lat)
	if p := rx.conv.part; p != nil {
		p.e2e.recordBatch(rx.lat)
		p.lastRecv.Store(ns)
	}
	rx.lat = rx.lat[:0]
}

// settle adds this receiver's account to d, once its reader has ended.
func (rx *rxState) settle(d *Delivery) {
	d.Receivers++
	bad := rx.echo > 0
	d.Duplicated += rx.echo
	for id := range rx.tracks {
		if rx.conv.from[id] == rx.user {
			continue
		}
		t := &rx.tracks[id]
		d.Duplicated += t.dup
		d.OutOfOrder += t.ooo
		d.Received += t.recvN
		if !t.ended {
			d.EndsMissing++
		}
		bad = bad || t.dup > 0 || t.ooo > 0 || !t.ended
		end := rx.conv.ends[id].Load()
		if end == nil {
			continue // nothing says what was sent: EndsMissing fails the run
		}
		var unacked uint64
		for _, k := range end.failed {
			if t.has(k) {
				unacked++
			}
		}
		want := end.last - uint64(len(end.failed))
		got := t.recvN - unacked
		d.Expected += want
		d.ReceivedUnacked += unacked
		if got < want {
			d.Lost += want - got
			bad = true
		}
	}
	if bad {
		d.ReceiversFailed++
	}
}

// pushedMsg is the part of a pushed Message the checks read.
type pushedMsg struct {
	conv, from, payload []byte
	seq                 uint64
	kind                pb.MessageKind
}

// parsePushed reads a protobuf ServerFrame carrying a pushed Message without
// decoding the whole frame (no allocation: a big fan-out's receivers share
// the machine with the server). False for any other frame.
func parsePushed(b []byte, m *pushedMsg) bool {
	var body []byte
	found := false
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == 5 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return false
			}
			body, found, b = v, true, b[n:]
			continue
		}
		if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
			return false
		}
		b = b[n:]
	}
	if !found {
		return false
	}
	*m = pushedMsg{}
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return false
		}
		body = body[n:]
		switch {
		case typ == protowire.BytesType && (num == 1 || num == 4 || num == 8):
			v, n := protowire.ConsumeBytes(body)
			if n < 0 {
				return false
			}
			switch num {
			case 1:
				m.conv = v
			case 4:
				m.from = v
			case 8:
				m.payload = v
			}
			body = body[n:]
		case typ == protowire.VarintType && (num == 2 || num == 10):
			v, n := protowire.ConsumeVarint(body)
			if n < 0 {
				return false
			}
			if num == 2 {
				m.seq = v
			} else {
				m.kind = pb.MessageKind(v)
			}
			body = body[n:]
		default:
			if n = protowire.ConsumeFieldValue(num, typ, body); n < 0 {
				return false
			}
			body = body[n:]
		}
	}
	return true
}

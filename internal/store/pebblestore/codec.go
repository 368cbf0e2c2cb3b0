package pebblestore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Every stored value is framed as
//
//	format(1) body crc(4, little-endian)
//
// where crc is CRC-32C over the key, the format byte and the body. Covering
// the key as well catches a value that ends up under the wrong key, not only
// flipped bits. Pebble checksums its WAL chunks and table blocks while the
// bytes sit in its files; this check goes end to end, from Append to every
// read, and is done on every read.
const (
	formatV1   byte = 1
	frameExtra      = 1 + 4
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// sealValue writes the format byte and the checksum into v, whose body
// (v[1:len(v)-4]) has already been filled.
func sealValue(key, v []byte) {
	v[0] = formatV1
	n := len(v) - 4
	c := crc32.Update(crc32.Update(0, castagnoli, key), castagnoli, v[:n])
	binary.LittleEndian.PutUint32(v[n:], c)
}

// frame returns body framed and sealed for key.
func frame(key, body []byte) []byte {
	v := make([]byte, len(body)+frameExtra)
	copy(v[1:], body)
	sealValue(key, v)
	return v
}

// unframe verifies v against key and returns its body (aliasing v).
func unframe(key, v []byte) ([]byte, error) {
	if len(v) < frameExtra || v[0] != formatV1 {
		return nil, corruptf(key, "bad value framing")
	}
	n := len(v) - 4
	c := crc32.Update(crc32.Update(0, castagnoli, key), castagnoli, v[:n])
	if c != binary.LittleEndian.Uint32(v[n:]) {
		return nil, corruptf(key, "checksum mismatch")
	}
	return v[1:n], nil
}

func corruptf(key []byte, format string, args ...any) error {
	return fmt.Errorf("%w: key %q: %s", store.ErrCorrupt, key, fmt.Sprintf(format, args...))
}

// dedup values: lp(conversation) seq(8).
func encodeDedup(conv string, seq uint64) []byte {
	b := appendLP(make([]byte, 0, lpLen(conv)+8), conv)
	return binary.BigEndian.AppendUint64(b, seq)
}

func decodeDedup(key, body []byte) (string, uint64, error) {
	conv, rest, err := readLP(body)
	if err != nil || len(rest) != 8 {
		return "", 0, corruptf(key, "bad de-dup record")
	}
	return conv, binary.BigEndian.Uint64(rest), nil
}

// cursor values: uvarint delivered, uvarint read.
func encodeCursor(delivered, read uint64) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(make([]byte, 0, 20), delivered), read)
}

func decodeCursor(key, body []byte) (delivered, read uint64, err error) {
	d, n := binary.Uvarint(body)
	if n <= 0 {
		return 0, 0, corruptf(key, "bad cursor record")
	}
	r, m := binary.Uvarint(body[n:])
	if m <= 0 || n+m != len(body) {
		return 0, 0, corruptf(key, "bad cursor record")
	}
	return d, r, nil
}

// user values: lp(password hash) uvarint(epoch) flags(disabled, shadow
// muted, bot) varint(unix s) uvarint(ns). The flags byte was a bare disabled
// byte (0 or 1) before shadow muting, and a flag added later is a bit that
// older records leave zero, so they read the same.
// Seconds and nanoseconds rather than UnixNano so any time.Time, including
// the zero value, round-trips.
func encodeUser(u store.User) []byte {
	b := appendLP(make([]byte, 0, 32+len(u.PasswordHash)), u.PasswordHash)
	b = binary.AppendUvarint(b, u.TokenEpoch)
	b = append(b, flags(u.Disabled, u.ShadowMuted, u.Bot))
	b = binary.AppendVarint(b, u.CreatedAt.Unix())
	return binary.AppendUvarint(b, uint64(u.CreatedAt.Nanosecond()))
}

func decodeUser(key []byte, id string, body []byte) (store.User, error) {
	bad := func() (store.User, error) { return store.User{}, corruptf(key, "bad user record") }
	hash, rest, err := readLP(body)
	if err != nil {
		return bad()
	}
	epoch, n := binary.Uvarint(rest)
	if n <= 0 || len(rest) < n+1 {
		return bad()
	}
	f := rest[n]
	rest = rest[n+1:]
	sec, n := binary.Varint(rest)
	if n <= 0 || f > 7 {
		return bad()
	}
	nsec, m := binary.Uvarint(rest[n:])
	if m <= 0 || n+m != len(rest) || nsec >= 1e9 {
		return bad()
	}
	return store.User{
		ID:           id,
		PasswordHash: hash,
		TokenEpoch:   epoch,
		Disabled:     f&1 != 0,
		ShadowMuted:  f&2 != 0,
		Bot:          f&4 != 0,
		CreatedAt:    time.Unix(sec, int64(nsec)).UTC(),
	}, nil
}

// token values: varint expiry in unix nanoseconds.
func encodeToken(expires time.Time) []byte {
	return binary.AppendVarint(nil, expires.UnixNano())
}

func decodeToken(key, body []byte) (time.Time, error) {
	ns, n := binary.Varint(body)
	if n <= 0 || n != len(body) {
		return time.Time{}, corruptf(key, "bad token record")
	}
	return time.Unix(0, ns), nil
}

// appendTime appends t as varint(unix s) uvarint(ns), so any time.Time,
// including the zero value, round-trips (in UTC).
func appendTime(b []byte, t time.Time) []byte {
	b = binary.AppendVarint(b, t.Unix())
	return binary.AppendUvarint(b, uint64(t.Nanosecond()))
}

// flags packs bools into one byte, first argument in the lowest bit.
func flags(bs ...bool) byte {
	var f byte
	for i, b := range bs {
		if b {
			f |= 1 << i
		}
	}
	return f
}

// bodyReader decodes a record body field by field; any malformed field
// sets bad, and later reads return zero values.
type bodyReader struct {
	b   []byte
	bad bool
}

func (r *bodyReader) uvarint() uint64 {
	x, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *bodyReader) varint() int64 {
	x, n := binary.Varint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return x
}

func (r *bodyReader) str() string {
	s, rest, err := readLP(r.b)
	if err != nil {
		r.bad = true
		return ""
	}
	r.b = rest
	return s
}

// flags reads a flags byte with at most n bits used.
func (r *bodyReader) flags(n int) byte {
	if len(r.b) == 0 || r.b[0]>>n != 0 {
		r.bad = true
		return 0
	}
	f := r.b[0]
	r.b = r.b[1:]
	return f
}

func (r *bodyReader) time() time.Time {
	sec := r.varint()
	nsec := r.uvarint()
	if nsec >= 1e9 {
		r.bad = true
	}
	if r.bad {
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

// ok reports whether everything was read without error and nothing is left.
func (r *bodyReader) ok() bool { return !r.bad && len(r.b) == 0 }

// group values: lp(name) lp(avatar) lp(announcement) lp(owner)
// flags(open join, mute all, dissolved, members mention all) time(created)
// [varint(add policy) varint(history visibility)]. The bracketed fields
// are absent in records written before they existed (read as zero), as is
// the members-mention-all bit (written later: older records leave it 0).
func encodeGroup(g *store.Group) []byte {
	b := make([]byte, 0, 32+len(g.Name)+len(g.AvatarURL)+len(g.Announcement)+len(g.Owner))
	b = appendLP(appendLP(appendLP(appendLP(b, g.Name), g.AvatarURL), g.Announcement), g.Owner)
	b = append(b, flags(g.OpenJoin, g.MuteAll, g.Dissolved, g.MembersMentionAll))
	b = appendTime(b, g.CreatedAt)
	b = binary.AppendVarint(b, int64(g.AddPolicy))
	return binary.AppendVarint(b, int64(g.HistoryVisibility))
}

func decodeGroup(key []byte, conv string, body []byte) (store.Group, error) {
	r := bodyReader{b: body}
	g := store.Group{ConversationID: conv, Name: r.str(), AvatarURL: r.str(), Announcement: r.str(), Owner: r.str()}
	f := r.flags(4)
	g.OpenJoin, g.MuteAll, g.Dissolved, g.MembersMentionAll = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0
	g.CreatedAt = r.time()
	if len(r.b) > 0 {
		g.AddPolicy, g.HistoryVisibility = pb.GroupAddPolicy(r.varint()), pb.HistoryVisibility(r.varint())
	}
	if !r.ok() {
		return store.Group{}, corruptf(key, "bad group record")
	}
	return g, nil
}

// member values: varint(role) time(muted until) time(joined) flags(left)
// uvarint(left seq) [uvarint(join seq)]; join seq is absent in records
// written before it existed (read as 0).
// The user id is the key's; whether the record is under the current or the
// past members' namespace must agree with the left flag.
func encodeMember(m *store.Member) []byte {
	b := binary.AppendVarint(make([]byte, 0, 40), int64(m.Role))
	b = appendTime(appendTime(b, m.MutedUntil), m.JoinedAt)
	b = append(b, flags(m.Left))
	b = binary.AppendUvarint(b, m.LeftSeq)
	return binary.AppendUvarint(b, m.JoinSeq)
}

func decodeMember(key []byte, user string, body []byte) (store.Member, error) {
	r := bodyReader{b: body}
	m := store.Member{UserID: user, Role: pb.GroupRole(r.varint()), MutedUntil: r.time(), JoinedAt: r.time()}
	m.Left = r.flags(1) != 0
	m.LeftSeq = r.uvarint()
	if len(r.b) > 0 {
		m.JoinSeq = r.uvarint()
	}
	if !r.ok() || m.Left != (key[0] == nsPastMember) {
		return store.Member{}, corruptf(key, "bad member record")
	}
	return m, nil
}

// settings values: flags(pinned, muted) uvarint(cleared seq).
func encodeSettings(cs store.ConversationSettings) []byte {
	return binary.AppendUvarint([]byte{flags(cs.Pinned, cs.Muted)}, cs.ClearedSeq)
}

func decodeSettings(key, body []byte) (store.ConversationSettings, error) {
	r := bodyReader{b: body}
	f := r.flags(2)
	cs := store.ConversationSettings{Pinned: f&1 != 0, Muted: f&2 != 0, ClearedSeq: r.uvarint()}
	if !r.ok() {
		return store.ConversationSettings{}, corruptf(key, "bad conversation settings record")
	}
	return cs, nil
}

// contact values: varint(state) lp(note) time(updated).
func encodeContact(c store.Contact) []byte {
	b := binary.AppendVarint(make([]byte, 0, 24+len(c.Note)), int64(c.State))
	return appendTime(appendLP(b, c.Note), c.UpdatedAt)
}

func decodeContact(key []byte, user string, body []byte) (store.Contact, error) {
	r := bodyReader{b: body}
	c := store.Contact{UserID: user, State: pb.ContactState(r.varint()), Note: r.str(), UpdatedAt: r.time()}
	if !r.ok() {
		return store.Contact{}, corruptf(key, "bad contact record")
	}
	return c, nil
}

// last-seen values: time.
func decodeLastSeen(key, body []byte) (time.Time, error) {
	r := bodyReader{b: body}
	t := r.time()
	if !r.ok() {
		return time.Time{}, corruptf(key, "bad last-seen record")
	}
	return t, nil
}

// pin values: lp(by) time(at) uvarint(order): order is the seq of the event
// that pinned, so pins list in the order they were made whatever the clocks.
func encodePin(by string, at time.Time, order uint64) []byte {
	b := appendTime(appendLP(make([]byte, 0, 24+len(by)), by), at)
	return binary.AppendUvarint(b, order)
}

func decodePin(key []byte, seq uint64, body []byte) (store.Pin, uint64, error) {
	r := bodyReader{b: body}
	p := store.Pin{Seq: seq, By: r.str(), At: r.time()}
	order := r.uvarint()
	if !r.ok() {
		return store.Pin{}, 0, corruptf(key, "bad pin record")
	}
	return p, order, nil
}

// thread summary values: uvarint(reply count) uvarint(last reply seq)
// varint(last reply at, unix ms).
func encodeThreadSummary(t store.ThreadSummary) []byte {
	b := binary.AppendUvarint(make([]byte, 0, 24), uint64(t.ReplyCount))
	b = binary.AppendUvarint(b, t.LastReplySeq)
	return binary.AppendVarint(b, t.LastReplyAt)
}

func decodeThreadSummary(key, body []byte) (store.ThreadSummary, error) {
	r := bodyReader{b: body}
	n := r.uvarint()
	t := store.ThreadSummary{LastReplySeq: r.uvarint(), LastReplyAt: r.varint()}
	if !r.ok() || n == 0 || n > math.MaxUint32 {
		return store.ThreadSummary{}, corruptf(key, "bad thread summary record")
	}
	t.ReplyCount = uint32(n)
	return t, nil
}

// reaction count values: uvarint(count) uvarint(order), count > 0 (a count
// that falls to zero deletes the row).
func encodeReactCount(count, order uint64) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(make([]byte, 0, 20), count), order)
}

func decodeReactCount(key, body []byte) (count, order uint64, err error) {
	r := bodyReader{b: body}
	count, order = r.uvarint(), r.uvarint()
	if !r.ok() || count == 0 || count > math.MaxUint32 {
		return 0, 0, corruptf(key, "bad reaction count record")
	}
	return count, order, nil
}

// decodeUint64 decodes an 8-byte big-endian value (versions, seqs).
func decodeUint64(key, body []byte, what string) (uint64, error) {
	if len(body) != 8 {
		return 0, corruptf(key, "bad %s record", what)
	}
	return binary.BigEndian.Uint64(body), nil
}

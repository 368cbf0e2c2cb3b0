package pebblestore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/parleyim/parley/store"
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

// user values: lp(password hash) uvarint(epoch) byte(disabled) varint(unix s) uvarint(ns).
// Seconds and nanoseconds rather than UnixNano so any time.Time, including
// the zero value, round-trips.
func encodeUser(u store.User) []byte {
	b := appendLP(make([]byte, 0, 32+len(u.PasswordHash)), u.PasswordHash)
	b = binary.AppendUvarint(b, u.TokenEpoch)
	var dis byte
	if u.Disabled {
		dis = 1
	}
	b = append(b, dis)
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
	dis := rest[n]
	rest = rest[n+1:]
	sec, n := binary.Varint(rest)
	if n <= 0 || dis > 1 {
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
		Disabled:     dis == 1,
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

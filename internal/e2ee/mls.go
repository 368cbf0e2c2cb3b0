// Package e2ee is Parley's side of end-to-end encryption with MLS (RFC
// 9420): the Delivery Service. It keeps and hands out KeyPackages, and reads
// the plaintext framing of MLS messages (group id, epoch, content type) so
// that the messaging service can order a group's Commits: one per epoch,
// the first wins. It parses; it does no cryptography and holds no key.
// Clients verify everything cryptographic themselves (docs/e2ee.md).
package e2ee

import (
	"encoding/binary"
	"errors"
)

// MediaType is the content type of a Parley message carrying an
// MLSMessage (RFC 9420 section 17.9).
const MediaType = "message/mls"

// WireFormat is an MLSMessage's wire_format (RFC 9420 section 6).
type WireFormat uint16

const (
	WirePublicMessage  WireFormat = 1
	WirePrivateMessage WireFormat = 2
	WireWelcome        WireFormat = 3
	WireGroupInfo      WireFormat = 4
	WireKeyPackage     WireFormat = 5
)

// ContentType is a framed message's content_type.
type ContentType uint8

const (
	ContentApplication ContentType = 1
	ContentProposal    ContentType = 2
	ContentCommit      ContentType = 3
)

const mls10 = 1 // ProtocolVersion mls10

// errMalformed: the bytes are not an MLSMessage of the kind expected.
var errMalformed = errors.New("e2ee: malformed MLS message")

// Framing is the plaintext header of a PublicMessage or PrivateMessage.
type Framing struct {
	WireFormat  WireFormat
	GroupID     []byte
	Epoch       uint64
	ContentType ContentType
}

// reader reads the TLS presentation language of RFC 9420 section 2.1:
// fixed-size big-endian integers and vectors with a variable-length
// (QUIC-style, RFC 9000 section 16) length prefix.
type reader struct {
	b   []byte
	bad bool
}

func (r *reader) u8() uint8 {
	if len(r.b) < 1 {
		r.bad = true
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) u16() uint16 {
	if len(r.b) < 2 {
		r.bad = true
		return 0
	}
	v := binary.BigEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

func (r *reader) u32() uint32 {
	if len(r.b) < 4 {
		r.bad = true
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) u64() uint64 {
	if len(r.b) < 8 {
		r.bad = true
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

// vec reads a variable-size vector<V>. RFC 9420 section 2.1.2: the length
// is 1, 2 or 4 bytes (the top two bits of the first byte say which; the
// 8-byte form is invalid), and must use the shortest form.
func (r *reader) vec() []byte {
	if len(r.b) < 1 {
		r.bad = true
		return nil
	}
	var n uint32
	switch r.b[0] >> 6 {
	case 0:
		n = uint32(r.b[0] & 0x3f)
		r.b = r.b[1:]
	case 1:
		if len(r.b) < 2 {
			r.bad = true
			return nil
		}
		n = uint32(binary.BigEndian.Uint16(r.b) & 0x3fff)
		r.b = r.b[2:]
		if n < 64 {
			r.bad = true // not minimal
			return nil
		}
	case 2:
		if len(r.b) < 4 {
			r.bad = true
			return nil
		}
		n = binary.BigEndian.Uint32(r.b) & 0x3fffffff
		r.b = r.b[4:]
		if n < 16384 {
			r.bad = true
			return nil
		}
	default:
		r.bad = true
		return nil
	}
	if uint64(n) > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// header reads an MLSMessage's version and wire_format.
func (r *reader) header() WireFormat {
	if r.u16() != mls10 {
		r.bad = true
	}
	return WireFormat(r.u16())
}

// ParseMessage reads the framing of an MLSMessage carrying a PublicMessage
// or a PrivateMessage. A PrivateMessage is read to its end (every field is
// a vector); of a PublicMessage the sender and authenticated data are read
// and its content must follow.
func ParseMessage(b []byte) (Framing, error) {
	r := reader{b: b}
	f := Framing{WireFormat: r.header()}
	switch f.WireFormat {
	case WirePrivateMessage:
		f.GroupID = r.vec()
		f.Epoch = r.u64()
		f.ContentType = ContentType(r.u8())
		r.vec() // authenticated_data
		r.vec() // encrypted_sender_data
		if len(r.vec()) == 0 {
			r.bad = true // ciphertext
		}
		if len(r.b) != 0 {
			r.bad = true
		}
	case WirePublicMessage:
		f.GroupID = r.vec()
		f.Epoch = r.u64()
		switch st := r.u8(); st { // Sender
		case 1, 2: // member: leaf_index; external: sender_index
			r.u32()
		case 3, 4: // new_member_proposal, new_member_commit
		default:
			r.bad = true
		}
		r.vec() // authenticated_data
		f.ContentType = ContentType(r.u8())
		if len(r.b) == 0 {
			r.bad = true
		}
	default:
		r.bad = true
	}
	if f.ContentType < ContentApplication || f.ContentType > ContentCommit {
		r.bad = true
	}
	if r.bad || len(f.GroupID) == 0 {
		return Framing{}, errMalformed
	}
	return f, nil
}

// CheckKeyPackage checks that b is an MLSMessage carrying a KeyPackage of
// MLS 1.0 (version, cipher suite, init key; the rest must follow). The
// signature is for the devices that use it to check.
func CheckKeyPackage(b []byte) error {
	r := reader{b: b}
	if r.header() != WireKeyPackage {
		return errMalformed
	}
	if r.u16() != mls10 || r.u16() == 0 || len(r.vec()) == 0 || len(r.b) == 0 || r.bad {
		return errMalformed
	}
	return nil
}

// CheckWelcome checks that b is an MLSMessage carrying a Welcome, read to
// its end.
func CheckWelcome(b []byte) error {
	r := reader{b: b}
	if r.header() != WireWelcome {
		return errMalformed
	}
	r.u16() // cipher_suite
	if len(r.vec()) == 0 || len(r.vec()) == 0 || len(r.b) != 0 || r.bad {
		return errMalformed // secrets, encrypted_group_info
	}
	return nil
}

package rich

import (
	"unicode/utf8"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// SnippetBytes bounds a reply preview's snippet.
const SnippetBytes = 256

// Preview is the short view of m shown on a message that answers it; nil m
// is a missing original (seq names it).
func Preview(seq uint64, m *pb.Message) *pb.MessagePreview {
	if m == nil {
		return &pb.MessagePreview{Seq: seq, Missing: true}
	}
	p := &pb.MessagePreview{Seq: m.Seq, From: m.From, Recalled: m.Recalled, EditedAt: m.EditedAt}
	if m.Recalled {
		return p
	}
	p.ContentType, p.Attachments = m.ContentType, uint32(len(m.Attachments))
	p.Snippet, p.Truncated = Snippet(m.Payload)
	return p
}

// Snippet is the start of payload, at most SnippetBytes, cut at a UTF-8
// character boundary when the payload is text (a payload that is not
// UTF-8 is cut at the byte bound). It copies: the preview must not pin the
// original's buffer.
func Snippet(payload []byte) ([]byte, bool) {
	if len(payload) <= SnippetBytes {
		return append([]byte(nil), payload...), false
	}
	cut := SnippetBytes
	for cut > SnippetBytes-utf8.UTFMax && !utf8.RuneStart(payload[cut]) {
		cut--
	}
	if !utf8.Valid(payload[:cut]) {
		cut = SnippetBytes // not text: no characters to keep whole
	}
	return append([]byte(nil), payload[:cut]...), true
}

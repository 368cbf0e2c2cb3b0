package hook

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"
)

// appendRequest appends ev's request body to dst: the JSON encodeRequest
// makes with encoding/json, without reflection (it is on every hooked
// send's path). TestAppendRequestMatchesJSON holds the two together.
func appendRequest(dst []byte, ev *Event) []byte {
	dst = append(dst, `{"type":`...)
	dst = appendJSONString(dst, string(ev.Type))
	if ev.MessageID != 0 {
		dst = append(dst, `,"message_id":"`...)
		dst = strconv.AppendUint(dst, ev.MessageID, 10)
		dst = append(dst, '"')
	}
	dst = appendField(dst, "client_msg_id", ev.ClientMsgID)
	dst = append(dst, `,"sender":`...)
	dst = appendJSONString(dst, ev.Sender)
	dst = appendField(dst, "conversation_id", ev.ConversationID)
	dst = appendField(dst, "recipient", ev.Recipient)
	if ev.TargetSeq != 0 {
		dst = append(dst, `,"target_seq":"`...)
		dst = strconv.AppendUint(dst, ev.TargetSeq, 10)
		dst = append(dst, '"')
	}
	dst = appendField(dst, "content_type", ev.ContentType)
	if ev.Type != EventGroupChange {
		if isText(ev.ContentType) && utf8.Valid(ev.Payload) {
			dst = append(dst, `,"text":`...)
			dst = appendJSONString(dst, string(ev.Payload))
		} else {
			dst = append(dst, `,"payload":"`...)
			dst = base64.StdEncoding.AppendEncode(dst, ev.Payload)
			dst = append(dst, '"')
		}
	}
	if len(ev.Attachments) > 0 {
		dst = append(dst, `,"attachments":[`...)
		for i, a := range ev.Attachments {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"id":`...)
			dst = appendJSONString(dst, a.ID)
			dst = append(dst, `,"name":`...)
			dst = appendJSONString(dst, a.Name)
			dst = append(dst, `,"size":`...)
			dst = strconv.AppendInt(dst, a.Size, 10)
			dst = append(dst, `,"content_type":`...)
			dst = appendJSONString(dst, a.ContentType)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	if len(ev.Change) > 0 {
		dst = append(dst, `,"change":`...)
		dst = append(dst, ev.Change...)
	}
	if ev.ClientMsgID != "" {
		dst = append(dst, `,"idempotency_key":`...)
		dst = appendJSONString(dst, idempotencyKey(ev)) // ASCII only
	}
	return append(dst, '}')
}

// appendField appends ,"name":"value" when value is not empty (omitempty).
func appendField(dst []byte, name, value string) []byte {
	if value == "" {
		return dst
	}
	dst = append(dst, ',', '"')
	dst = append(dst, name...)
	dst = append(dst, '"', ':')
	return appendJSONString(dst, value)
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string as encoding/json writes it:
// invalid UTF-8 becomes U+FFFD; <, >, & and U+2028/U+2029 are escaped.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

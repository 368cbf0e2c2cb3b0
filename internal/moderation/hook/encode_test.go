package hook

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"testing"
	"unicode/utf8"
)

// requestJSON is a request body (the package doc is its specification),
// encoded by encoding/json: the reference appendRequest must match.
type requestJSON struct {
	Type           EventType       `json:"type"`
	MessageID      string          `json:"message_id,omitempty"`
	ClientMsgID    string          `json:"client_msg_id,omitempty"`
	Sender         string          `json:"sender"`
	ConversationID string          `json:"conversation_id,omitempty"`
	Recipient      string          `json:"recipient,omitempty"`
	TargetSeq      string          `json:"target_seq,omitempty"`
	ContentType    string          `json:"content_type,omitempty"`
	Text           *string         `json:"text,omitempty"`    // a pointer so that "" is sent
	Payload        *string         `json:"payload,omitempty"` // base64
	Attachments    []Attachment    `json:"attachments,omitempty"`
	Change         json.RawMessage `json:"change,omitempty"`
	// IdempotencyKey is the Idempotency-Key header's value, in the body
	// too: a batch carries several.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// encodeRequest renders ev as a request body. ev was validated by Decide
// (Change is valid JSON), so Marshal cannot fail.
func encodeRequest(ev *Event) []byte {
	j := requestJSON{
		Type:           ev.Type,
		ClientMsgID:    ev.ClientMsgID,
		Sender:         ev.Sender,
		ConversationID: ev.ConversationID,
		Recipient:      ev.Recipient,
		ContentType:    ev.ContentType,
		Attachments:    ev.Attachments,
		Change:         ev.Change,
		IdempotencyKey: idempotencyKey(ev),
	}
	if ev.MessageID != 0 {
		j.MessageID = strconv.FormatUint(ev.MessageID, 10)
	}
	if ev.TargetSeq != 0 {
		j.TargetSeq = strconv.FormatUint(ev.TargetSeq, 10)
	}
	if ev.Type != EventGroupChange {
		if isText(ev.ContentType) && utf8.Valid(ev.Payload) {
			s := string(ev.Payload)
			j.Text = &s
		} else {
			s := base64.StdEncoding.EncodeToString(ev.Payload)
			j.Payload = &s
		}
	}
	b, err := json.Marshal(&j)
	if err != nil {
		panic("hook: encoding a validated event: " + err.Error())
	}
	return b
}

// appendRequest writes exactly what encoding/json writes for the request.
func TestAppendRequestMatchesJSON(t *testing.T) {
	events := []Event{
		textEvent("m-1", "hello"),
		{Type: EventDirectSend, ClientMsgID: "a\"b\\c\n\x01<>&\u2028é\xff", Sender: "bob", ConversationID: "p:a:b",
			Recipient: "a", ContentType: "text", Payload: []byte("tab\there \"quoted\" \u2029 日本")},
		{Type: EventGroupSend, Sender: "s", ConversationID: "g:1", ContentType: "image", Payload: []byte{0, 1, 2, 0xff},
			Attachments: []Attachment{{ID: "f1", Name: "a<b>.jpg", Size: 3, ContentType: "image/jpeg"}}},
		{Type: EventEdit, MessageID: 99, Sender: "s", ConversationID: "g:1", TargetSeq: 7, ContentType: "text/plain", Payload: []byte("\xc3")},
		{Type: EventGroupChange, Sender: "s", ConversationID: "g:1", Change: json.RawMessage(`{"kind":"MESSAGE_KIND_GROUP_UPDATED","event":{}}`)},
	}
	for i, ev := range events {
		want := encodeRequest(&ev)
		got := appendRequest(nil, &ev)
		if !bytes.Equal(got, want) {
			t.Errorf("event %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func FuzzAppendRequest(f *testing.F) {
	f.Add("m-1", "alice", "p:alice:bob", "text", []byte("hi"))
	f.Add("\xff\"", "b\u2028", "g:\x00", "text/x", []byte("\xe2\x80"))
	f.Fuzz(func(t *testing.T, id, sender, conv, ct string, payload []byte) {
		ev := Event{Type: EventDirectSend, ClientMsgID: id, Sender: sender, ConversationID: conv, ContentType: ct, Payload: payload}
		if got, want := appendRequest(nil, &ev), encodeRequest(&ev); !bytes.Equal(got, want) {
			t.Fatalf("\n got %s\nwant %s", got, want)
		}
	})
}

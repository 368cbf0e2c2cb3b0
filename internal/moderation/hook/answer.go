package hook

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
)

// Limits on an answer's fields (the package doc states them).
const (
	maxCodeBytes        = 64
	maxReasonBytes      = 256
	maxContentTypeBytes = 64 // Send's own limit on content_type
)

// answerJSON is an answer body. Pointers tell an absent field from an empty one.
type answerJSON struct {
	Action      string  `json:"action"`
	Code        string  `json:"code"`
	Reason      string  `json:"reason"`
	ContentType *string `json:"content_type"`
	Text        *string `json:"text"`
	Payload     *string `json:"payload"`
}

// parseAnswer turns a 2xx answer's body to the request about ev into a
// decision; an error says why the answer is malformed (for the log, never
// for the sender). A Replace's content is the content after this hook.
func parseAnswer(body []byte, ev *Event) (Decision, error) {
	var a answerJSON
	if err := json.Unmarshal(body, &a); err != nil {
		return Decision{}, errors.New("not a JSON object: " + err.Error())
	}
	switch a.Action {
	case "allow":
		return Decision{Action: Allow}, nil
	case "reject":
		if !validCode(a.Code) {
			return Decision{}, errors.New("reject: code must be 1-64 bytes of [a-z0-9_]")
		}
		if strings.HasPrefix(a.Code, "hook_") {
			return Decision{}, errors.New(`reject: codes starting "hook_" are Parley's`)
		}
		if len(a.Reason) > maxReasonBytes {
			return Decision{}, errors.New("reject: reason longer than 256 bytes")
		}
		return Decision{Action: Reject, Code: a.Code, Reason: a.Reason}, nil
	case "replace":
		if ev.Type == EventGroupChange {
			return Decision{}, errors.New("replace: a group change has no content")
		}
		if a.ContentType == nil && a.Text == nil && a.Payload == nil {
			return Decision{}, errors.New("replace: none of content_type, text, payload")
		}
		if a.Text != nil && a.Payload != nil {
			return Decision{}, errors.New("replace: both text and payload")
		}
		d := Decision{Action: Replace, ContentType: ev.ContentType, Payload: ev.Payload}
		if a.ContentType != nil {
			if n := len(*a.ContentType); n == 0 || n > maxContentTypeBytes {
				return Decision{}, errors.New("replace: content_type must be 1-64 bytes")
			}
			d.ContentType = *a.ContentType
		}
		switch {
		case a.Text != nil:
			d.Payload = []byte(*a.Text)
		case a.Payload != nil:
			p, err := base64.StdEncoding.DecodeString(*a.Payload)
			if err != nil {
				return Decision{}, errors.New("replace: payload is not standard base64")
			}
			d.Payload = p
		}
		return d, nil
	case "":
		return Decision{}, errors.New("no action")
	}
	return Decision{}, errors.New("unknown action")
}

func validCode(s string) bool {
	if len(s) == 0 || len(s) > maxCodeBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

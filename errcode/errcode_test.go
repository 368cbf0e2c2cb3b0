package errcode

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Every value of the proto enum has a row: a code added to the schema
// without one fails here.
func TestEveryCodeHasARow(t *testing.T) {
	for n, name := range pb.ErrorCode_name {
		c := pb.ErrorCode(n)
		i, ok := Lookup(c)
		if !ok {
			t.Errorf("%s has no row in the error table", name)
			continue
		}
		if i.Text == "" || i.APICode == "" || i.HTTPStatus < 400 || i.HTTPStatus > 599 {
			t.Errorf("%s: incomplete row %+v", name, i)
		}
	}
	if _, ok := Lookup(pb.ErrorCode(len(pb.ErrorCode_name) + 100)); ok {
		t.Error("Lookup knows a code the schema does not have")
	}
}

// Codes share an API code only where the HTTP API has always answered them
// alike; any other sharing would make two codes indistinguishable to HTTP
// clients.
func TestAPICodesAreDistinct(t *testing.T) {
	shared := map[string]bool{
		// BAD_REQUEST, MALFORMED_FRAME and UNKNOWN_FRAME: a bad /v1/rpc body.
		"bad_request": true,
		// TOO_LARGE and FRAME_TOO_LARGE.
		"too_large": true,
		// INTERNAL and UNSPECIFIED (never sent).
		"internal": true,
	}
	seen := map[string]pb.ErrorCode{}
	for n := range pb.ErrorCode_name {
		c := pb.ErrorCode(n)
		api := Of(c).APICode
		if prev, dup := seen[api]; dup && !shared[api] {
			t.Errorf("%s and %s share the API code %q", prev, c, api)
		}
		seen[api] = c
	}
}

// The HTTP API's answers today: clients match on these strings and statuses,
// so the table must not change them.
func TestAPIAnswersUnchanged(t *testing.T) {
	want := map[pb.ErrorCode]struct {
		status int
		code   string
	}{
		pb.ErrorCode_ERROR_CODE_BAD_REQUEST:            {http.StatusBadRequest, "bad_request"},
		pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME:        {http.StatusBadRequest, "bad_request"},
		pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME:          {http.StatusBadRequest, "bad_request"},
		pb.ErrorCode_ERROR_CODE_TOO_LARGE:              {http.StatusBadRequest, "too_large"},
		pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE:        {http.StatusBadRequest, "too_large"},
		pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED:        {http.StatusUnauthorized, "unauthenticated"},
		pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED:      {http.StatusForbidden, "permission_denied"},
		pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS:      {http.StatusTooManyRequests, "too_many_requests"},
		pb.ErrorCode_ERROR_CODE_UNAVAILABLE:            {http.StatusServiceUnavailable, "unavailable"},
		pb.ErrorCode_ERROR_CODE_MUTED:                  {http.StatusForbidden, "muted"},
		pb.ErrorCode_ERROR_CODE_RECALL_WINDOW_PASSED:   {http.StatusConflict, "recall_window_passed"},
		pb.ErrorCode_ERROR_CODE_GROUP_FULL:             {http.StatusConflict, "group_full"},
		pb.ErrorCode_ERROR_CODE_CONFLICT:               {http.StatusConflict, "conflict"},
		pb.ErrorCode_ERROR_CODE_QUOTA_EXCEEDED:         {http.StatusInsufficientStorage, "quota_exceeded"},
		pb.ErrorCode_ERROR_CODE_INTERNAL:               {http.StatusInternalServerError, "internal"},
		pb.ErrorCode_ERROR_CODE_UNSUPPORTED_MEDIA_TYPE: {http.StatusUnsupportedMediaType, "unsupported_media_type"},
		pb.ErrorCode_ERROR_CODE_REJECTED:               {http.StatusUnprocessableEntity, "rejected"},
	}
	for c, w := range want {
		if i := Of(c); i.HTTPStatus != w.status || i.APICode != w.code {
			t.Errorf("%s: HTTP %d %q, want %d %q", c, i.HTTPStatus, i.APICode, w.status, w.code)
		}
	}
}

// Exactly the codes that mean "not now" are temporary; a client retries
// those and gives up on the rest (QUOTA_EXCEEDED and INTERNAL would loop
// forever).
func TestTemporaryCodes(t *testing.T) {
	for n := range pb.ErrorCode_name {
		c := pb.ErrorCode(n)
		want := c == pb.ErrorCode_ERROR_CODE_UNAVAILABLE || c == pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS
		if got := Of(c).Temporary; got != want {
			t.Errorf("%s: temporary %v, want %v", c, got, want)
		}
		if e := New(c); e.Temporary == nil || *e.Temporary != want || e.GetMessage() != Of(c).Text {
			t.Errorf("New(%s) = %v", c, e)
		}
	}
}

// A server older than Error.temporary sends none: the table decides. A
// server that sends it is believed.
func TestTemporaryFromWire(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		e    *pb.Error
		want bool
	}{
		{&pb.Error{Code: pb.ErrorCode_ERROR_CODE_UNAVAILABLE}, true},
		{&pb.Error{Code: pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED}, false},
		{&pb.Error{Code: pb.ErrorCode_ERROR_CODE_UNAVAILABLE, Temporary: &no}, false},
		{&pb.Error{Code: pb.ErrorCode_ERROR_CODE_BAD_REQUEST, Temporary: &yes}, true},
		{&pb.Error{Code: pb.ErrorCode(9999)}, false},
	} {
		if got := Temporary(tc.e); got != tc.want {
			t.Errorf("Temporary(%v) = %v, want %v", tc.e, got, tc.want)
		}
	}
}

// docs/protocol.md's code table states every code's temporary flag and HTTP
// form; it must say what the table does.
func TestProtocolDocMatchesTable(t *testing.T) {
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `ERROR_CODE_") {
			continue
		}
		cells := strings.Split(line, " | ")
		if len(cells) < 5 {
			t.Fatalf("docs/protocol.md: a code row without the temporary and HTTP columns: %s", line)
		}
		rows[strings.Trim(cells[0], "| `")] = cells
	}
	for n, name := range pb.ErrorCode_name {
		c := pb.ErrorCode(n)
		if c == pb.ErrorCode_ERROR_CODE_UNSPECIFIED {
			continue
		}
		cells, ok := rows[name]
		if !ok {
			t.Errorf("docs/protocol.md does not list %s", name)
			continue
		}
		i := Of(c)
		temp := map[bool]string{true: "yes", false: "no"}[i.Temporary]
		httpForm := fmt.Sprintf("%d `%s`", i.HTTPStatus, i.APICode)
		if cells[2] != temp || cells[3] != httpForm {
			t.Errorf("docs/protocol.md: %s is %q, %q; the table says %q, %q", name, cells[2], cells[3], temp, httpForm)
		}
	}
}

// Every code an HTTP client can see maps back to the wire code a socket
// client would get for the same refusal.
func TestFromAPICode(t *testing.T) {
	for n := range pb.ErrorCode_name {
		c := pb.ErrorCode(n)
		switch c {
		case pb.ErrorCode_ERROR_CODE_UNSPECIFIED, pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME,
			pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE, pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME:
			continue
		}
		if got, ok := FromAPICode(Of(c).APICode); !ok || got != c {
			t.Errorf("FromAPICode(%q) = %s, %v; want %s", Of(c).APICode, got, ok, c)
		}
	}
	for api, want := range map[string]pb.ErrorCode{
		"body_too_large":        pb.ErrorCode_ERROR_CODE_TOO_LARGE,
		"invalid_credentials":   pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED,
		"registration_disabled": pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
		"user_disabled":         pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
		"not_found":             pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED,
	} {
		if got, ok := FromAPICode(api); !ok || got != want {
			t.Errorf("FromAPICode(%q) = %s, %v; want %s", api, got, ok, want)
		}
	}
	if got, ok := FromAPICode("no_such_code"); ok || got != pb.ErrorCode_ERROR_CODE_UNSPECIFIED {
		t.Errorf("an unknown code: %s, %v", got, ok)
	}
}

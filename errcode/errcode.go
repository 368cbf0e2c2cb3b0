// Package errcode is the one table of Parley's wire error codes: for each
// [pb.ErrorCode], the fixed text sent as Error.message, the HTTP status and
// API code string the HTTP API answers with, and whether the code is
// temporary (the same request may succeed later). The server builds every
// Error frame and HTTP error body from it; the Go SDK falls back to it when a
// server does not send Error.temporary.
//
// It imports only the generated protocol package, so the server packages and
// the SDK can both use it.
package errcode

import (
	"net/http"

	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Info is what is known about one error code.
type Info struct {
	// Text is the fixed, client-facing description (Error.message on a
	// socket). Internal error strings never reach clients.
	Text string
	// HTTPStatus is the status of an HTTP API answer carrying this code.
	HTTPStatus int
	// APICode is the "code" of the HTTP API's error body (snake_case).
	APICode string
	// Temporary: the same request may succeed later (for a send: retried
	// with the same client_msg_id). Sent on the wire as Error.temporary.
	Temporary bool
}

// Lookup returns the row of c, and false for a code the table does not know
// (a newer server's code, or UNSPECIFIED).
func Lookup(c pb.ErrorCode) (Info, bool) {
	switch c {
	case pb.ErrorCode_ERROR_CODE_BAD_REQUEST:
		return Info{"bad request", http.StatusBadRequest, "bad_request", false}, true
	case pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED:
		return Info{"not authenticated", http.StatusUnauthorized, "unauthenticated", false}, true
	case pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED:
		return Info{"permission denied", http.StatusForbidden, "permission_denied", false}, true
	case pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS:
		return Info{"too many requests", http.StatusTooManyRequests, "too_many_requests", true}, true
	case pb.ErrorCode_ERROR_CODE_UNAVAILABLE:
		return Info{"temporarily unavailable, retry", http.StatusServiceUnavailable, "unavailable", true}, true
	// The three frame-level codes end a socket session; over HTTP the body
	// is the frame, so they are plain bad requests.
	case pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME:
		return Info{"malformed frame", http.StatusBadRequest, "bad_request", false}, true
	case pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE:
		return Info{"frame too large", http.StatusBadRequest, "too_large", false}, true
	case pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME:
		return Info{"unknown frame", http.StatusBadRequest, "bad_request", false}, true
	// INTERNAL is answered for damaged storage, which retrying cannot mend.
	case pb.ErrorCode_ERROR_CODE_INTERNAL:
		return Info{"internal error", http.StatusInternalServerError, "internal", false}, true
	case pb.ErrorCode_ERROR_CODE_TOO_LARGE:
		return Info{"field too large", http.StatusBadRequest, "too_large", false}, true
	case pb.ErrorCode_ERROR_CODE_MUTED:
		return Info{"muted", http.StatusForbidden, "muted", false}, true
	case pb.ErrorCode_ERROR_CODE_RECALL_WINDOW_PASSED:
		return Info{"recall window passed", http.StatusConflict, "recall_window_passed", false}, true
	case pb.ErrorCode_ERROR_CODE_GROUP_FULL:
		return Info{"group is full", http.StatusConflict, "group_full", false}, true
	case pb.ErrorCode_ERROR_CODE_CONFLICT:
		return Info{"not allowed in this state", http.StatusConflict, "conflict", false}, true
	// Not temporary: the quota frees only when the user's messages are
	// deleted, so a retry loop would never end.
	case pb.ErrorCode_ERROR_CODE_QUOTA_EXCEEDED:
		return Info{"storage quota exceeded", http.StatusInsufficientStorage, "quota_exceeded", false}, true
	case pb.ErrorCode_ERROR_CODE_UNSUPPORTED_MEDIA_TYPE:
		return Info{"unsupported media type", http.StatusUnsupportedMediaType, "unsupported_media_type", false}, true
	// Not temporary: the app refused this content; the same content is
	// refused again.
	case pb.ErrorCode_ERROR_CODE_REJECTED:
		return Info{"rejected by moderation", http.StatusUnprocessableEntity, "rejected", false}, true
	case pb.ErrorCode_ERROR_CODE_NO_SUCH_USER:
		return Info{"no such user", http.StatusNotFound, "no_such_user", false}, true
	case pb.ErrorCode_ERROR_CODE_MLS_STALE_EPOCH:
		return Info{"stale MLS epoch: process the newer commit first", http.StatusConflict, "mls_stale_epoch", false}, true
	case pb.ErrorCode_ERROR_CODE_MLS_REQUIRED:
		return Info{"the conversation is end-to-end encrypted: MLS message required", http.StatusBadRequest, "mls_required", false}, true
	case pb.ErrorCode_ERROR_CODE_MLS_INVALID:
		return Info{"not a valid MLS message for this conversation", http.StatusBadRequest, "mls_invalid", false}, true
	case pb.ErrorCode_ERROR_CODE_UNSPECIFIED:
		// Never sent by this server; a row so that every enum value has one.
		return unknownRow(), true
	}
	return unknownRow(), false
}

// FromAPICode returns the wire code of an HTTP API error body's "code", so
// that clients test one set of codes whatever the transport. The HTTP API's
// own codes map to the wire code closest in meaning: body_too_large to
// TOO_LARGE, invalid_credentials to UNAUTHENTICATED, and
// registration_disabled, user_disabled and not_found (an endpoint that is
// off or does not exist) to PERMISSION_DENIED, the code the protocol also
// answers for targets that do not exist. An unknown string gives
// UNSPECIFIED and false.
func FromAPICode(apiCode string) (pb.ErrorCode, bool) {
	switch apiCode {
	case "body_too_large":
		return pb.ErrorCode_ERROR_CODE_TOO_LARGE, true
	case "invalid_credentials":
		return pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED, true
	case "registration_disabled", "user_disabled", "not_found":
		return pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED, true
	}
	for n := range pb.ErrorCode_name {
		c := pb.ErrorCode(n)
		switch c {
		case pb.ErrorCode_ERROR_CODE_UNSPECIFIED, pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME,
			pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE, pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME:
			continue // socket-only codes share their string with a general one
		}
		if i, ok := Lookup(c); ok && i.APICode == apiCode {
			return c, true
		}
	}
	return pb.ErrorCode_ERROR_CODE_UNSPECIFIED, false
}

// unknownRow is the row of a code this table does not know: an error, not
// worth a retry.
func unknownRow() Info {
	return Info{"error", http.StatusInternalServerError, "internal", false}
}

// Of returns the row of c; a code the table does not know gets a
// non-temporary internal error.
func Of(c pb.ErrorCode) Info {
	i, _ := Lookup(c)
	return i
}

// New returns the wire Error for c: its fixed text and its temporary flag.
func New(c pb.ErrorCode) *pb.Error {
	i := Of(c)
	return &pb.Error{Code: c, Message: i.Text, Temporary: &i.Temporary}
}

// Frame returns an Error frame answering request id with code c.
func Frame(id uint64, c pb.ErrorCode) *pb.ServerFrame {
	return &pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Error{Error: New(c)}}
}

// Temporary reports whether e's request may succeed later: the server's
// Error.temporary, or, from a server that does not send it, the table's
// answer for e's code.
func Temporary(e *pb.Error) bool {
	if e.Temporary != nil {
		return *e.Temporary
	}
	return Of(e.GetCode()).Temporary
}

// Package reqerr holds the errors a client request is answered with: each
// carries a wire error code, whose text, HTTP form and temporary flag come
// from the error table (package errcode). The chat service and the packages
// it calls (contacts, presence) return these, so a handler passes them on
// unchanged.
package reqerr

import (
	"errors"

	"github.com/parleyim/parley/errcode"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Error is a failure with a client-facing code.
type Error struct {
	Code pb.ErrorCode
	// RejectCode and Reason are a REJECTED's: the app's code for the rule
	// and the text the sender sees.
	RejectCode, Reason string
}

// Rejected is the app's moderation refusing a message.
func Rejected(code, reason string) *Error {
	return &Error{Code: pb.ErrorCode_ERROR_CODE_REJECTED, RejectCode: code, Reason: reason}
}

// Frame is the Error frame answering request id with e.
func (e *Error) Frame(id uint64) *pb.ServerFrame {
	f := errcode.Frame(id, e.Code)
	if e.RejectCode != "" || e.Reason != "" {
		pe := f.GetError()
		pe.RejectCode, pe.Reason = e.RejectCode, e.Reason
	}
	return f
}

func (e *Error) Error() string { return errcode.Of(e.Code).Text }

func code(c pb.ErrorCode) *Error { return &Error{Code: c} }

// The values are compared by identity (err == reqerr.Denied), so they are
// never copied or wrapped by the packages returning them.
var (
	BadRequest = code(pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
	Denied     = code(pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	Unavail    = code(pb.ErrorCode_ERROR_CODE_UNAVAILABLE)
	Internal   = code(pb.ErrorCode_ERROR_CODE_INTERNAL)
	TooLarge   = code(pb.ErrorCode_ERROR_CODE_TOO_LARGE)
	Unauth     = code(pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED)
	Muted      = code(pb.ErrorCode_ERROR_CODE_MUTED)
	Window     = code(pb.ErrorCode_ERROR_CODE_RECALL_WINDOW_PASSED)
	GroupFull  = code(pb.ErrorCode_ERROR_CODE_GROUP_FULL)
	Conflict   = code(pb.ErrorCode_ERROR_CODE_CONFLICT)
	TooMany    = code(pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS)
	Quota      = code(pb.ErrorCode_ERROR_CODE_QUOTA_EXCEEDED)
	// NoSuchUser: a 1:1 message to a user id without an account, where
	// every user has one.
	NoSuchUser = code(pb.ErrorCode_ERROR_CODE_NO_SUCH_USER)
	// MLS (internal/e2ee): see the codes' comments in parley.proto.
	MLSStaleEpoch = code(pb.ErrorCode_ERROR_CODE_MLS_STALE_EPOCH)
	MLSRequired   = code(pb.ErrorCode_ERROR_CODE_MLS_REQUIRED)
	MLSInvalid    = code(pb.ErrorCode_ERROR_CODE_MLS_INVALID)
	// UnsupportedType: an upload's sniffed type is not allowed.
	UnsupportedType = code(pb.ErrorCode_ERROR_CODE_UNSUPPORTED_MEDIA_TYPE)
	// UnknownFrame: a frame without a body this server knows; a socket
	// session is closed for it.
	UnknownFrame = code(pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME)
)

// Store maps a store failure to what the client is told: damaged storage is
// an internal error (a retry cannot mend it), anything else is temporary.
func Store(err error) error {
	if errors.Is(err, store.ErrCorrupt) {
		return Internal
	}
	return Unavail
}

package chat

import (
	"github.com/parleyim/parley/errcode"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Error is a failure with a client-facing code; its text, HTTP form and
// whether it is temporary come from the error table (package errcode).
type Error struct{ Code pb.ErrorCode }

func (e *Error) Error() string { return errcode.Of(e.Code).Text }

func errCode(c pb.ErrorCode) *Error { return &Error{Code: c} }

var (
	errBadRequest = errCode(pb.ErrorCode_ERROR_CODE_BAD_REQUEST)
	errDenied     = errCode(pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED)
	errUnavail    = errCode(pb.ErrorCode_ERROR_CODE_UNAVAILABLE)
	errInternal   = errCode(pb.ErrorCode_ERROR_CODE_INTERNAL)
	errTooLarge   = errCode(pb.ErrorCode_ERROR_CODE_TOO_LARGE)
	errUnauth     = errCode(pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED)
	errMuted      = errCode(pb.ErrorCode_ERROR_CODE_MUTED)
	errWindow     = errCode(pb.ErrorCode_ERROR_CODE_RECALL_WINDOW_PASSED)
	errGroupFull  = errCode(pb.ErrorCode_ERROR_CODE_GROUP_FULL)
	errConflict   = errCode(pb.ErrorCode_ERROR_CODE_CONFLICT)
	errTooMany    = errCode(pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS)
	errQuota      = errCode(pb.ErrorCode_ERROR_CODE_QUOTA_EXCEEDED)
	// errUnknownFrame: a frame without a body this server knows; a socket
	// session is closed for it.
	errUnknownFrame = errCode(pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME)
)

// errorFrame answers request id with code: the table's text and temporary
// flag, never an internal error string.
func errorFrame(id uint64, code pb.ErrorCode) *pb.ServerFrame { return errcode.Frame(id, code) }

package chat

import pb "github.com/parleyim/parley/proto/parleyv1"

// errorText is the fixed, client-facing description of each code. Internal
// error strings never reach clients.
var errorText = map[pb.ErrorCode]string{
	pb.ErrorCode_ERROR_CODE_BAD_REQUEST:          "bad request",
	pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED:      "not authenticated",
	pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED:    "permission denied",
	pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS:    "too many requests",
	pb.ErrorCode_ERROR_CODE_UNAVAILABLE:          "temporarily unavailable, retry",
	pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME:      "malformed frame",
	pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE:      "frame too large",
	pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME:        "unknown frame",
	pb.ErrorCode_ERROR_CODE_INTERNAL:             "internal error",
	pb.ErrorCode_ERROR_CODE_TOO_LARGE:            "field too large",
	pb.ErrorCode_ERROR_CODE_MUTED:                "muted",
	pb.ErrorCode_ERROR_CODE_RECALL_WINDOW_PASSED: "recall window passed",
	pb.ErrorCode_ERROR_CODE_GROUP_FULL:           "group is full",
	pb.ErrorCode_ERROR_CODE_CONFLICT:             "not allowed in this state",
}

// Error is a failure with a client-facing code.
type Error struct{ Code pb.ErrorCode }

func (e *Error) Error() string { return errorText[e.Code] }

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
	// errUnknownFrame: a frame without a body this server knows; a socket
	// session is closed for it.
	errUnknownFrame = errCode(pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME)
)

func errorFrame(id uint64, code pb.ErrorCode) *pb.ServerFrame {
	return &pb.ServerFrame{Id: id, Body: &pb.ServerFrame_Error{Error: &pb.Error{Code: code, Message: errorText[code]}}}
}

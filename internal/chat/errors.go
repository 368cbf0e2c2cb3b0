package chat

import (
	"github.com/parleyim/parley/errcode"
	"github.com/parleyim/parley/internal/reqerr"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Error is a failure with a client-facing code; its text, HTTP form and
// whether it is temporary come from the error table (package errcode). It is
// package reqerr's, shared with the contacts and presence packages.
type Error = reqerr.Error

var (
	errBadRequest = reqerr.BadRequest
	errDenied     = reqerr.Denied
	errUnavail    = reqerr.Unavail
	errInternal   = reqerr.Internal
	errTooLarge   = reqerr.TooLarge
	errUnauth     = reqerr.Unauth
	errMuted      = reqerr.Muted
	errWindow     = reqerr.Window
	errGroupFull  = reqerr.GroupFull
	errConflict   = reqerr.Conflict
	errTooMany    = reqerr.TooMany
	errQuota      = reqerr.Quota
	// errUnknownFrame: a frame without a body this server knows; a socket
	// session is closed for it.
	errUnknownFrame = reqerr.UnknownFrame
)

// errorFrame answers request id with code: the table's text and temporary
// flag, never an internal error string.
func errorFrame(id uint64, code pb.ErrorCode) *pb.ServerFrame { return errcode.Frame(id, code) }

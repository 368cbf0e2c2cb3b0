package client

import (
	"errors"
	"fmt"
	"time"

	"github.com/parleyim/parley/errcode"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

var (
	// ErrClosed is returned by requests on a connection that is closed or
	// closes before the reply arrives. Errors that carry a cause (a
	// [*DisconnectError], a network error) match it with errors.Is.
	ErrClosed = errors.New("parley: connection closed")

	// ErrTimeout is returned when no reply arrived within the request timeout
	// (Options.RequestTimeout). The connection stays open.
	ErrTimeout = errors.New("parley: request timed out")

	// ErrProtocol reports a reply whose body does not match the request.
	ErrProtocol = errors.New("parley: unexpected reply")

	// errFrameTooLarge: a frame the server's limit would refuse (the
	// caller gets an *Error with ERROR_CODE_TOO_LARGE).
	errFrameTooLarge = errors.New("parley: frame too large")
)

// Error is an error frame the server answered a request with.
type Error struct {
	Code    pb.ErrorCode
	Message string
	// Reason and RejectCode are an ERROR_CODE_REJECTED's: the text the
	// app's moderation wants the sender to see (may be empty) and the rule
	// that refused the message ("word_filter" for the built-in filter).
	Reason, RejectCode string
	// temporary is the frame's Error.temporary when sent (said): servers
	// older than the field, and Errors built by hand, do not say. Plain
	// values, so that Errors compare with ==.
	temporary, said bool
}

func (e *Error) Error() string {
	if e.Code == pb.ErrorCode_ERROR_CODE_REJECTED {
		return fmt.Sprintf("parley: %s (%s): %s", e.Code, e.RejectCode, e.Reason)
	}
	if e.Message == "" {
		return fmt.Sprintf("parley: %s", e.Code)
	}
	return fmt.Sprintf("parley: %s: %s", e.Code, e.Message)
}

// Temporary reports whether the same request may succeed later (for a send:
// retried with the same client_msg_id), as the server said in the error
// frame; from a server that does not say, the error table (package errcode)
// decides by the code.
func (e *Error) Temporary() bool {
	if e.said {
		return e.temporary
	}
	return errcode.Of(e.Code).Temporary
}

// IsCode reports whether err is (or wraps) a refusal with the given code:
// an [*Error] of a socket request, or an [*HTTPError] of the HTTP API, whose
// code strings map to the same codes (see [HTTPError.ErrorCode]). One test
// then holds whichever way the request went.
func IsCode(err error, code pb.ErrorCode) bool {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code == code
	}
	if e, ok := errors.AsType[*HTTPError](err); ok {
		return e.ErrorCode() == code
	}
	return false
}

// IsTemporary reports whether err is a refusal the same request may get
// past later ([Error.Temporary] or [HTTPError.Temporary]): retry it, a send
// with the same client message id. Other errors (a closed connection, a
// cancelled context) are not refusals and give false.
func IsTemporary(err error) bool {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Temporary()
	}
	if e, ok := errors.AsType[*HTTPError](err); ok {
		return e.Temporary()
	}
	return false
}

// DisconnectError is why the server closed the connection, from the
// Disconnect frame it sent just before closing. It matches [ErrClosed] with
// errors.Is.
type DisconnectError struct {
	Code   pb.DisconnectCode
	Reason string
	// ReconnectAfter is the server's suggested wait before reconnecting.
	ReconnectAfter time.Duration
}

func (e *DisconnectError) Error() string {
	if e.Reason == "" {
		return fmt.Sprintf("parley: disconnected: %s", e.Code)
	}
	return fmt.Sprintf("parley: disconnected: %s: %s", e.Code, e.Reason)
}

// Is makes errors.Is(err, ErrClosed) true: a disconnect is a closed connection.
func (e *DisconnectError) Is(target error) bool { return target == ErrClosed }

// closedError is ErrClosed with its cause (a network or protocol error).
type closedError struct{ cause error }

func (e *closedError) Error() string        { return "parley: connection closed: " + e.cause.Error() }
func (e *closedError) Is(target error) bool { return target == ErrClosed }
func (e *closedError) Unwrap() error        { return e.cause }

func errFromFrame(e *pb.Error) *Error {
	return &Error{Code: e.GetCode(), Message: e.GetMessage(), Reason: e.GetReason(), RejectCode: e.GetRejectCode(),
		temporary: e.GetTemporary(), said: e.Temporary != nil}
}

func disconnectErr(d *pb.Disconnect) *DisconnectError {
	return &DisconnectError{
		Code:           d.GetCode(),
		Reason:         d.GetReason(),
		ReconnectAfter: time.Duration(d.GetReconnectAfterMs()) * time.Millisecond,
	}
}

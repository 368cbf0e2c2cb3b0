package api

import (
	"context"
	"net/http"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/parleyim/parley/auth"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// rpc: POST /v1/rpc with a user's bearer token and one ClientFrame in its
// canonical JSON form (as sent over a WebSocket, without "id"). It runs
// through the same handlers and checks as a socket session; the answer is the
// ServerFrame's JSON, or an error body with the frame's code.
func (a *API) rpc(w http.ResponseWriter, r *http.Request, c auth.Claims, _ string) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var f pb.ClientFrame
	if err := (protojson.UnmarshalOptions{}).Unmarshal(body, &f); err != nil {
		writeError(w, http.StatusBadRequest, codeBadRequest, "malformed frame")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 15*time.Second)
	defer cancel()
	out, err := a.cfg.Chat.Call(ctx, c, &f)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "no answer in time, retry")
		return
	}
	if e := out.GetError(); e != nil {
		status, code := httpStatus(e.Code)
		writeError(w, status, code, e.Message)
		return
	}
	out.Id = 0
	writeProto(w, out)
}

// httpStatus maps a protocol error code to an HTTP status and API code.
func httpStatus(c pb.ErrorCode) (int, string) {
	switch c {
	case pb.ErrorCode_ERROR_CODE_BAD_REQUEST, pb.ErrorCode_ERROR_CODE_MALFORMED_FRAME, pb.ErrorCode_ERROR_CODE_UNKNOWN_FRAME:
		return http.StatusBadRequest, codeBadRequest
	case pb.ErrorCode_ERROR_CODE_TOO_LARGE, pb.ErrorCode_ERROR_CODE_FRAME_TOO_LARGE:
		return http.StatusBadRequest, "too_large"
	case pb.ErrorCode_ERROR_CODE_UNAUTHENTICATED:
		return http.StatusUnauthorized, codeUnauth
	case pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED:
		return http.StatusForbidden, codeDenied
	case pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS:
		return http.StatusTooManyRequests, "too_many_requests"
	case pb.ErrorCode_ERROR_CODE_UNAVAILABLE:
		return http.StatusServiceUnavailable, codeUnavailable
	case pb.ErrorCode_ERROR_CODE_MUTED:
		return http.StatusForbidden, "muted"
	case pb.ErrorCode_ERROR_CODE_RECALL_WINDOW_PASSED:
		return http.StatusConflict, "recall_window_passed"
	case pb.ErrorCode_ERROR_CODE_GROUP_FULL:
		return http.StatusConflict, "group_full"
	case pb.ErrorCode_ERROR_CODE_CONFLICT:
		return http.StatusConflict, codeConflict
	}
	return http.StatusInternalServerError, codeInternal
}

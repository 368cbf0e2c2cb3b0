package api

import (
	"context"
	"net/http"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/parleyim/parley/internal/auth"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// rpc: POST /v1/rpc with a user's bearer token and one ClientFrame in its
// canonical JSON form (as sent over a WebSocket, without "id"). It runs
// through the same handlers and checks as a socket session; the answer is the
// ServerFrame's JSON, or an error body with the frame's code. The request
// runs under the HTTP request's context, bounded by callTimeout: its store
// reads stop when the client goes away or the time is up.
func (a *API) rpc(w http.ResponseWriter, r *http.Request, c auth.Claims, _ string) {
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	var f pb.ClientFrame
	if err := (protojson.UnmarshalOptions{}).Unmarshal(body, &f); err != nil {
		writeCode(w, codeBadRequest, "malformed frame")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	out, err := a.cfg.Chat.Call(ctx, c, &f)
	if err != nil {
		writeCode(w, codeUnavailable, "no answer in time, retry")
		return
	}
	if e := out.GetError(); e != nil {
		writeFrameError(w, e)
		return
	}
	out.Id = 0
	a.writePage(w, r, out)
}

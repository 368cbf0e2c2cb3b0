package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/wire"
)

// Temporary follows the server's Error.temporary through both codecs, and
// falls back to the error table when a server does not send it.
func TestErrorTemporaryFromWire(t *testing.T) {
	yes, no := true, false
	for _, c := range []wire.Codec{wire.Proto, wire.JSON} {
		for _, tc := range []struct {
			name string
			e    *pb.Error
			want bool
		}{
			{"server says temporary", &pb.Error{Code: pb.ErrorCode_ERROR_CODE_BAD_REQUEST, Temporary: &yes}, true},
			{"server says not temporary", &pb.Error{Code: pb.ErrorCode_ERROR_CODE_UNAVAILABLE, Temporary: &no}, false},
			{"old server, UNAVAILABLE", &pb.Error{Code: pb.ErrorCode_ERROR_CODE_UNAVAILABLE}, true},
			{"old server, TOO_MANY_REQUESTS", &pb.Error{Code: pb.ErrorCode_ERROR_CODE_TOO_MANY_REQUESTS}, true},
			{"old server, PERMISSION_DENIED", &pb.Error{Code: pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED}, false},
			{"old server, QUOTA_EXCEEDED", &pb.Error{Code: pb.ErrorCode_ERROR_CODE_QUOTA_EXCEEDED}, false},
		} {
			b, err := wire.EncodeServer(c, &pb.ServerFrame{Id: 7, Body: &pb.ServerFrame_Error{Error: tc.e}})
			if err != nil {
				t.Fatal(err)
			}
			var f pb.ServerFrame
			if err := wire.DecodeServer(c, b, &f); err != nil {
				t.Fatal(err)
			}
			if got := errFromFrame(f.GetError()).Temporary(); got != tc.want {
				t.Errorf("%s, %s: Temporary() = %v, want %v (frame %s)", c, tc.name, got, tc.want, b)
			}
		}
	}
}

// HTTPError.Temporary follows the body's "temporary"; without it (an older
// server) a 503 or 429 is temporary.
func TestHTTPErrorTemporary(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/v1/logout":
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":"unavailable","message":"try again","temporary":true}}`)
		case "/v1/register":
			w.WriteHeader(http.StatusInsufficientStorage)
			fmt.Fprint(w, `{"error":{"code":"quota_exceeded","message":"full","temporary":false}}`)
		default: // an older server: no "temporary"
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"error":{"code":"unavailable","message":"try again"}}`)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	var he *HTTPError
	if err := Logout(ctx, srv.URL, "t"); !errors.As(err, &he) || !he.Temporary() {
		t.Errorf("503 with temporary:true: %v, temporary %v", err, he != nil && he.Temporary())
	}
	he = nil
	if _, err := Register(ctx, srv.URL, "a", "password"); !errors.As(err, &he) || he.Temporary() {
		t.Errorf("507 with temporary:false: %v", err)
	}
	he = nil
	if _, err := Login(ctx, srv.URL, "a", "password"); !errors.As(err, &he) || !he.Temporary() {
		t.Errorf("503 without temporary: %v", err)
	}
}

// IsTemporary and IsCode read socket and HTTP refusals alike, wrapped or not.
func TestRefusalsOfBothTransports(t *testing.T) {
	sock := fmt.Errorf("send: %w", &Error{Code: pb.ErrorCode_ERROR_CODE_UNAVAILABLE})
	web := fmt.Errorf("register: %w", &HTTPError{Status: http.StatusServiceUnavailable, Code: "unavailable"})
	for _, err := range []error{sock, web} {
		if !IsTemporary(err) || !IsCode(err, pb.ErrorCode_ERROR_CODE_UNAVAILABLE) {
			t.Errorf("%v: temporary %v, UNAVAILABLE %v", err, IsTemporary(err), IsCode(err, pb.ErrorCode_ERROR_CODE_UNAVAILABLE))
		}
	}
	taken := &HTTPError{Status: http.StatusConflict, Code: "conflict"}
	if IsTemporary(taken) || !IsCode(taken, pb.ErrorCode_ERROR_CODE_CONFLICT) || IsCode(taken, pb.ErrorCode_ERROR_CODE_UNAVAILABLE) {
		t.Errorf("conflict: %v", taken)
	}
	if IsTemporary(context.Canceled) || IsCode(ErrClosed, pb.ErrorCode_ERROR_CODE_UNSPECIFIED) {
		t.Error("errors that are not refusals")
	}
}

package blobtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tus/tusd/v2/pkg/handler"
	"golang.org/x/exp/slog"

	"github.com/parleyim/parley/internal/media/blob"
)

// tusChanges is what a pre-create hook may change about a new upload.
type tusChanges = handler.FileInfoChanges

// tusServer is tusd's handler on a store, served under /files/.
type tusServer struct {
	*httptest.Server
	busy atomic.Int64 // requests being handled
}

// idle waits until no request is being handled.
func (s *tusServer) idle(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.busy.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the tus server still handles %d requests", s.busy.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newTusServer serves tusd's handler on s under /files/ for the test's
// length. A non-nil changes is applied to every new upload by a
// pre-create hook.
func newTusServer(t *testing.T, s blob.Store, changes *tusChanges) *tusServer {
	t.Helper()
	composer := handler.NewStoreComposer()
	s.UseInTus(composer)
	cfg := handler.Config{
		BasePath:      "/files/",
		StoreComposer: composer,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if changes != nil {
		cfg.PreUploadCreateCallback = func(handler.HookEvent) (handler.HTTPResponse, handler.FileInfoChanges, error) {
			return handler.HTTPResponse{}, *changes, nil
		}
	}
	h, err := handler.NewHandler(cfg)
	if err != nil {
		t.Fatalf("tusd handler: %v", err)
	}
	srv := &tusServer{}
	files := http.StripPrefix("/files/", h)
	srv.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		srv.busy.Add(1)
		defer srv.busy.Add(-1)
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

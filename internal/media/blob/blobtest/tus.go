package blobtest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tus/tusd/v2/pkg/handler"
	"golang.org/x/exp/slog"

	"github.com/parleyim/parley/internal/media/blob"
)

// tusChanges is what a pre-create hook may change about a new upload.
type tusChanges = handler.FileInfoChanges

// newTusServer serves tusd's handler on s under /files/ for the test's
// length. A non-nil changes is applied to every new upload by a
// pre-create hook.
func newTusServer(t *testing.T, s blob.Store, changes *tusChanges) *httptest.Server {
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
	srv := httptest.NewServer(http.StripPrefix("/files/", h))
	t.Cleanup(srv.Close)
	return srv
}

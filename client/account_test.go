package client

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The account calls send the token and decode the answers; an archive
// that arrives shorter than announced is an error, not a silently cut
// file; a refusal is an HTTPError with the server's code.
func TestAccountCalls(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
		switch r.URL.Path {
		case "/v1/account/exports":
			w.WriteHeader(http.StatusAccepted)
			w.Write([]byte(`{"id":"j1","user_id":"alice","state":"pending","created_at":"2026-11-27T00:00:00Z"}`))
		case "/v1/account/exports/j1/archive":
			w.Header().Set("Content-Length", "10")
			w.Write([]byte("PK\x03\x04")) // 4 of 10 bytes, then the connection ends
		case "/v1/account/exports/nope":
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":{"code":"not_found","message":"export not found"}}`))
		case "/v1/account/delete":
			w.WriteHeader(http.StatusAccepted)
			w.Write([]byte(`{"user_id":"alice","state":"running","started_at":"2026-11-27T00:00:00Z"}`))
		}
	}))
	defer srv.Close()
	h := HTTPClient{BaseURL: srv.URL}
	ctx := context.Background()
	j, err := h.StartExport(ctx, "tok")
	if err != nil || j.ID != "j1" || j.State != "pending" {
		t.Fatalf("StartExport: %+v, %v", j, err)
	}
	var buf bytes.Buffer
	if _, err := h.DownloadExport(ctx, "tok", "j1", &buf); err == nil {
		t.Fatalf("a cut archive downloaded without an error (%d bytes)", buf.Len())
	}
	_, err = h.Export(ctx, "tok", "nope")
	if s, c := httpStatusCode(err); s != 404 || c != "not_found" {
		t.Fatalf("missing export: %v", err)
	}
	d, err := h.DeleteAccount(ctx, "tok", "pw")
	if err != nil || d.State != "running" {
		t.Fatalf("DeleteAccount: %+v, %v", d, err)
	}
	for _, g := range got {
		if !strings.HasSuffix(g, " Bearer tok") {
			t.Fatalf("request without the token: %s", g)
		}
	}
}

func httpStatusCode(err error) (int, string) {
	if he, ok := err.(*HTTPError); ok {
		return he.Status, he.Code
	}
	return 0, ""
}

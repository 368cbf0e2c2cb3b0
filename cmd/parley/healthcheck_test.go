package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// The container's HEALTHCHECK: 0 for a 200, an error naming the status
// otherwise, and an error when nothing listens.
func TestHealthcheckCmd(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	if err := healthcheckCmd([]string{"--url", srv.URL + "/healthz"}); err != nil {
		t.Fatalf("a 200 /healthz: %v", err)
	}
	status = http.StatusServiceUnavailable
	if err := healthcheckCmd([]string{"--url", srv.URL + "/healthz"}); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("a 503 /healthz: %v, want an error naming 503", err)
	}
	url := srv.URL
	srv.Close()
	if err := healthcheckCmd([]string{"--url", url + "/healthz"}); err == nil {
		t.Fatal("nothing listening, and the healthcheck passed")
	}
}

package api

import (
	_ "embed"
	"net/http"
)

// The OpenAPI document and the admin page are embedded: one binary, nothing
// to install or build.
var (
	//go:embed openapi.json
	openAPIDoc []byte
	//go:embed admin.html
	adminHTML []byte
)

// openAPI: GET /openapi.json, the OpenAPI 3 document of every route.
func (a *API) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(openAPIDoc)
}

// adminPage: GET /admin. The page holds no data: it asks for the API key and
// calls the admin API with it.
func (a *API) adminPage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	_, _ = w.Write(adminHTML)
}

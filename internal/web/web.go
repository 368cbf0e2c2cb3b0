// Package web serves Parley's browser chat client, a set of static files
// embedded in the binary (no build step on the user's machine).
package web

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var files embed.FS

// serviceWorker is the path of the client's service worker (Web Push
// notifications). A worker controls only the paths under its own, so it is
// served from the root to have scope "/".
const serviceWorker = "/sw.js"

// Handler serves the web client's files, index.html at "/".
func Handler() http.Handler {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree always has "static"
	}
	fsrv := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == serviceWorker {
			// Browsers register a worker only when it has a JavaScript type,
			// whatever the host's MIME table says; no-cache: each update check
			// revalidates, so a new version takes over promptly.
			h := w.Header()
			h.Set("Content-Type", "text/javascript; charset=utf-8")
			h.Set("Cache-Control", "no-cache")
		}
		fsrv.ServeHTTP(w, r)
	})
}

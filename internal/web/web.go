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

// Handler serves the web client's files, index.html at "/".
func Handler() http.Handler {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree always has "static"
	}
	return http.FileServerFS(sub)
}

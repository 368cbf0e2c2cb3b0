package api

import (
	"net/http"
	"strings"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/media"
	"github.com/parleyim/parley/internal/reqerr"
)

// mediaRoutes are the routes of files (docs/media.md): uploads with the
// user's token, downloads by signed URL, a user's usage for the admin.
func (a *API) mediaRoutes() []route {
	m := a.cfg.Media
	if m == nil {
		return nil
	}
	up := a.uploads.ServeHTTP
	return []route{
		{"POST /v1/files", a.user(a.uploadFile)},
		{"GET /v1/files/{id}", m.ServeFile},
		{"POST " + media.UploadsPath, up},
		{"OPTIONS " + media.UploadsPath, up},
		{"HEAD " + media.UploadsPath + "{id}", up},
		{"PATCH " + media.UploadsPath + "{id}", up},
		{"DELETE " + media.UploadsPath + "{id}", up},
		{"GET /v1/admin/users/{id}/media", a.admin(a.adminMedia)},
	}
}

// authenticate is the user of a request's bearer token (for the
// resumable uploads, served by tusd).
func (a *API) authenticate(r *http.Request) (string, error) {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || tok == "" {
		return "", reqerr.Unauth
	}
	claims, err := a.cfg.Chat.Authenticate(r.Context(), tok)
	if err != nil {
		return "", err
	}
	return claims.UserID, nil
}

// uploadFile: POST /v1/files?name=NAME with the file as the body.
func (a *API) uploadFile(w http.ResponseWriter, r *http.Request, claims auth.Claims, _ string) {
	f, err := a.cfg.Media.Upload(w, r, claims.UserID)
	if err != nil {
		writeChatError(w, err)
		return
	}
	b, err := protoJSON.Marshal(media.Attachment(f))
	if err != nil {
		writeCode(w, codeInternal, "internal error")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = w.Write(append(append([]byte(`{"file":`), b...), "}\n"...))
}

// adminMedia: GET /v1/admin/users/{id}/media: the user's files and bytes.
func (a *API) adminMedia(w http.ResponseWriter, r *http.Request) {
	uid := r.PathValue("id")
	if !auth.ValidUserID(uid) {
		writeCode(w, codeBadRequest, "invalid user id")
		return
	}
	files, bytes, quota, err := a.cfg.Media.Usage(r.Context(), uid)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user_id": uid, "files": files, "bytes": bytes, "quota_bytes": quota})
}

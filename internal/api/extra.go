package api

import (
	"net/http"

	"github.com/parleyim/parley/internal/auth"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Route is a route served by another package (Config.Extra), behind the
// same authentication, rate limits and audit log as the API's own: User
// routes need a user's bearer token, Admin routes an admin API key (and
// are audited unless GET).
type Route struct {
	Pattern string // "METHOD /path/{param}"
	User    func(w http.ResponseWriter, r *http.Request, c auth.Claims)
	Admin   http.HandlerFunc
}

func (a *API) extraRoutes() []route {
	var out []route
	for _, x := range a.cfg.Extra {
		switch {
		case x.User != nil:
			h := x.User
			out = append(out, route{x.Pattern, a.user(func(w http.ResponseWriter, r *http.Request, c auth.Claims, _ string) { h(w, r, c) })})
		case x.Admin != nil:
			out = append(out, route{x.Pattern, a.admin(x.Admin)})
		}
	}
	return out
}

// WriteCode answers with wire code c in its HTTP form and msg, as the
// API's own routes do.
func WriteCode(w http.ResponseWriter, c pb.ErrorCode, msg string) { writeCode(w, c, msg) }

// WriteNotFound answers 404 with the API's "not_found" code.
func WriteNotFound(w http.ResponseWriter, msg string) {
	writeError(w, http.StatusNotFound, codeNotFound, msg)
}

// WriteBadCredentials answers 401 with the API's "invalid_credentials" code.
func WriteBadCredentials(w http.ResponseWriter, msg string) {
	writeError(w, http.StatusUnauthorized, codeBadCreds, msg)
}

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) { writeJSON(w, status, v) }

// DecodeBody reads a JSON body as the API's own routes do (bounded,
// unknown fields refused); it has answered when false.
func DecodeBody(w http.ResponseWriter, r *http.Request, v any) bool { return decodeBody(w, r, v) }

// NoteAudit adds key=value to the audit entry of an audited admin request.
func NoteAudit(r *http.Request, key string, value any) { noteAudit(r, key, value) }

// CheckPassword checks password against hash under the API's bound on
// concurrent hashing.
func (a *API) CheckPassword(r *http.Request, hash, password string) (bool, error) {
	return a.check(r, hash, password)
}

// isDeleted reports whether uid's account was deleted; it has answered
// when ok is false.
func (a *API) isDeleted(w http.ResponseWriter, r *http.Request, uid string) (deleted, ok bool) {
	if a.cfg.Deleted == nil {
		return false, true
	}
	d, err := a.cfg.Deleted(r.Context(), uid)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return false, false
	}
	return d, true
}

// refuseDeleted answers 409 for a deleted account (a tombstone is not
// enabled or given a password again); true when it answered.
func (a *API) refuseDeleted(w http.ResponseWriter, r *http.Request, uid string) bool {
	d, ok := a.isDeleted(w, r, uid)
	if ok && d {
		writeCode(w, codeConflict, "the account was deleted")
	}
	return !ok || d
}

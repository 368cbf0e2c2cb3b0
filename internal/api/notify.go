package api

import (
	"net/http"

	"github.com/parleyim/parley/internal/auth"
)

// removePushTargets removes the push targets registered with tokenID (with
// any of uid's tokens when ""), whose tokens no longer work: their devices
// must not be notified any more. False (logged) when the store failed; a
// retry of the request removes them.
func (a *API) removePushTargets(r *http.Request, uid, tokenID string) bool {
	if a.cfg.Notify == nil {
		return true
	}
	if err := a.cfg.Notify.TokensRevoked(r.Context(), uid, tokenID); err != nil {
		a.log.Warn("push targets of revoked tokens not removed", "user", uid, "err", err)
		return false
	}
	return true
}

// webPushKey: GET /v1/push/webpush-key: the VAPID public key a browser
// subscribes with (public: it is in every subscription anyway).
func (a *API) webPushKey(w http.ResponseWriter, r *http.Request) {
	if a.cfg.WebPushKey == "" {
		writeError(w, http.StatusNotFound, codeNotFound, "web push is not enabled on this server")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"publicKey": a.cfg.WebPushKey})
}

// adminPushTargets: GET /v1/admin/users/{id}/push: the user's devices with
// a push target and each one's latest attempts (on this node).
func (a *API) adminPushTargets(w http.ResponseWriter, r *http.Request) {
	uid, ok := a.pushUser(w, r)
	if !ok {
		return
	}
	ts, err := a.cfg.Notify.Targets(r.Context(), uid)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user_id": uid, "kinds": a.cfg.Notify.Kinds(), "devices": ts})
}

// adminPushTest: POST /v1/admin/users/{id}/push/test: a test notification
// to each of the user's devices now, with each platform's answer.
func (a *API) adminPushTest(w http.ResponseWriter, r *http.Request) {
	uid, ok := a.pushUser(w, r)
	if !ok {
		return
	}
	res, err := a.cfg.Notify.Test(r.Context(), uid)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user_id": uid, "devices": res})
}

// pushUser is the {id} of a push admin route. Users minted by an app may
// have no record, so the id is not looked up: a user without targets has
// an empty list.
func (a *API) pushUser(w http.ResponseWriter, r *http.Request) (string, bool) {
	if a.cfg.Notify == nil {
		writeError(w, http.StatusNotFound, codeNotFound, "push notifications are not enabled on this server")
		return "", false
	}
	id := r.PathValue("id")
	if !auth.ValidUserID(id) {
		writeCode(w, codeBadRequest, "invalid user id")
		return "", false
	}
	return id, true
}

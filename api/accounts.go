package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/parleyim/parley/auth"
	pb "github.com/parleyim/parley/proto/parleyv1"
	"github.com/parleyim/parley/store"
)

type credentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
}

type tokenResponse struct {
	UserID    string    `json:"user_id"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// Passwords shorter than this are refused at registration.
const minPasswordLen = 8

func (a *API) register(w http.ResponseWriter, r *http.Request) {
	if a.cfg.DisableRegistration {
		writeError(w, http.StatusForbidden, codeRegisterOff, "registration is disabled on this server")
		return
	}
	var c credentials
	if !decodeBody(w, r, &c) {
		return
	}
	if len(c.Password) == 0 {
		writeError(w, http.StatusBadRequest, codeBadRequest, "password must be 8-256 bytes")
		return
	}
	if _, ok := a.createAccount(w, r, "username", c.Username, c.Password); !ok {
		return
	}
	a.issue(w, http.StatusCreated, c.Username, 0, a.cfg.TokenTTL)
}

// createAccount validates and stores a new user (field names the id in
// error messages); an empty password makes a token-only user. It has
// answered when false.
func (a *API) createAccount(w http.ResponseWriter, r *http.Request, field, id, password string) (store.User, bool) {
	if !auth.ValidUserID(id) {
		writeError(w, http.StatusBadRequest, codeBadRequest, field+" must be 1-64 characters of A-Z a-z 0-9 _ . @ -")
		return store.User{}, false
	}
	u := store.User{ID: id, CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	if password != "" {
		if len(password) < minPasswordLen || len(password) > auth.MaxPasswordBytes {
			writeError(w, http.StatusBadRequest, codeBadRequest, "password must be 8-256 bytes")
			return u, false
		}
		hash, err := a.hash(r, password)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, codeUnavailable, "try again")
			return u, false
		}
		u.PasswordHash = hash
	}
	err := a.cfg.Store.CreateUser(r.Context(), u)
	if errors.Is(err, store.ErrExists) {
		writeError(w, http.StatusConflict, codeConflict, field+" is taken")
		return u, false
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "try again")
		return u, false
	}
	return u, true
}

func (a *API) login(w http.ResponseWriter, r *http.Request) {
	var c credentials
	if !decodeBody(w, r, &c) {
		return
	}
	if len(c.Password) > auth.MaxPasswordBytes || !auth.ValidUserID(c.Username) {
		writeError(w, http.StatusUnauthorized, codeBadCreds, "invalid username or password")
		return
	}
	u, err := a.cfg.Store.GetUser(r.Context(), c.Username)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "try again")
		return
	}
	hash := u.PasswordHash
	if err != nil || hash == "" {
		hash = a.dummyHash
	}
	ok, cerr := a.check(r, hash, c.Password)
	if cerr != nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "try again")
		return
	}
	if !ok || err != nil || u.PasswordHash == "" || u.Disabled {
		writeError(w, http.StatusUnauthorized, codeBadCreds, "invalid username or password")
		return
	}
	a.issue(w, http.StatusOK, u.ID, u.TokenEpoch, a.cfg.TokenTTL)
}

// logout revokes the presented token and closes the sessions opened with it.
func (a *API) logout(w http.ResponseWriter, r *http.Request, c auth.Claims, _ string) {
	if c.TokenID != "" {
		if err := a.cfg.Store.RevokeToken(r.Context(), c.TokenID, c.ExpiresAt); err != nil {
			writeError(w, http.StatusServiceUnavailable, codeUnavailable, "try again")
			return
		}
		a.cfg.Chat.CloseUserSessions(c.UserID, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED, "logged out", "", c.TokenID)
	}
	w.WriteHeader(http.StatusNoContent)
}

type passwordChange struct {
	OldPassword string `json:"old_password"`
	NewPassword string `json:"new_password"`
}

// password changes the password, revokes every earlier token of the user
// (by raising the token epoch), closes their sessions and returns a new token.
func (a *API) password(w http.ResponseWriter, r *http.Request, c auth.Claims, _ string) {
	var p passwordChange
	if !decodeBody(w, r, &p) {
		return
	}
	if len(p.NewPassword) < minPasswordLen || len(p.NewPassword) > auth.MaxPasswordBytes || len(p.OldPassword) > auth.MaxPasswordBytes {
		writeError(w, http.StatusBadRequest, codeBadRequest, "password must be 8-256 bytes")
		return
	}
	u, err := a.cfg.Store.GetUser(r.Context(), c.UserID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && u.PasswordHash == "") {
		writeError(w, http.StatusForbidden, codeDenied, "this account has no password")
		return
	}
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "try again")
		return
	}
	ok, cerr := a.check(r, u.PasswordHash, p.OldPassword)
	if cerr != nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "try again")
		return
	}
	if !ok {
		writeError(w, http.StatusUnauthorized, codeBadCreds, "invalid password")
		return
	}
	hash, err := a.hash(r, p.NewPassword)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "try again")
		return
	}
	u.PasswordHash = hash
	u.TokenEpoch++
	if err := a.cfg.Store.UpdateUser(r.Context(), u); err != nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "try again")
		return
	}
	a.cfg.Chat.CloseUserSessions(u.ID, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED, "password changed", "", "")
	a.issue(w, http.StatusOK, u.ID, u.TokenEpoch, a.cfg.TokenTTL)
}

type mintRequest struct {
	UserID     string `json:"user_id"`
	TTLSeconds int64  `json:"ttl_seconds"`
}

// mintToken issues a token for any user id (the app server vouches for it).
func (a *API) mintToken(w http.ResponseWriter, r *http.Request) {
	var m mintRequest
	if !decodeBody(w, r, &m) {
		return
	}
	if !auth.ValidUserID(m.UserID) {
		writeError(w, http.StatusBadRequest, codeBadRequest, "user_id must be 1-64 characters of A-Z a-z 0-9 _ . @ -")
		return
	}
	ttl := a.cfg.TokenTTL
	if m.TTLSeconds != 0 {
		ttl = time.Duration(m.TTLSeconds) * time.Second
	}
	if m.TTLSeconds < 0 || ttl > a.cfg.MaxTokenTTL {
		writeError(w, http.StatusBadRequest, codeBadRequest, "ttl_seconds out of range")
		return
	}
	// A record (without password) lets the user's tokens be revoked later.
	err := a.cfg.Store.CreateUser(r.Context(), store.User{ID: m.UserID, CreatedAt: time.Now()})
	if err != nil && !errors.Is(err, store.ErrExists) {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "try again")
		return
	}
	u, err := a.cfg.Store.GetUser(r.Context(), m.UserID)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "try again")
		return
	}
	a.issue(w, http.StatusOK, u.ID, u.TokenEpoch, ttl)
}

func (a *API) issue(w http.ResponseWriter, status int, uid string, epoch uint64, ttl time.Duration) {
	tok, c, err := a.cfg.Tokens.Issue(uid, epoch, ttl)
	if err != nil {
		writeError(w, http.StatusInternalServerError, codeInternal, "internal error")
		return
	}
	writeJSON(w, status, tokenResponse{UserID: uid, Token: tok, ExpiresAt: c.ExpiresAt})
}

// hash and check run argon2id under a concurrency bound, so a burst of logins
// queues instead of starving message handling of CPU.
func (a *API) hash(r *http.Request, password string) (string, error) {
	select {
	case a.hashes <- struct{}{}:
		defer func() { <-a.hashes }()
		return auth.HashPassword(password)
	case <-r.Context().Done():
		return "", r.Context().Err()
	}
}

func (a *API) check(r *http.Request, hash, password string) (bool, error) {
	select {
	case a.hashes <- struct{}{}:
		defer func() { <-a.hashes }()
		return auth.CheckPassword(hash, password) == nil, nil
	case <-r.Context().Done():
		return false, r.Context().Err()
	}
}

package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
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

// codeUserDisabled: the admin API was asked for a token of a disabled user
// (an HTTP API code of its own, like those in api.go).
const codeUserDisabled = "user_disabled"

// usernameRule follows the field name in the answer to a refused name.
const usernameRule = " must be 1-64 characters of A-Z a-z 0-9 _ . @ -, start and end with a letter or digit, and not have two of _ . @ - in a row"

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
		writeCode(w, codeBadRequest, "password must be 8-256 bytes")
		return
	}
	if _, ok := a.createAccount(w, r, "username", c.Username, c.Password); !ok {
		return
	}
	a.issue(w, http.StatusCreated, c.Username, 0, a.cfg.TokenTTL)
}

// createAccount validates and stores a new user (field names the id in
// error messages); an empty password makes a token-only user. It has
// answered when false. The id is stored as given (the display form); its
// normalized form must be free (409 otherwise), so "alice" and "Alice"
// cannot both exist.
func (a *API) createAccount(w http.ResponseWriter, r *http.Request, field, id, password string) (store.User, bool) {
	key, ok := auth.NormalizeUsername(id)
	if !ok || !auth.ValidNewUsername(id) {
		writeCode(w, codeBadRequest, field+usernameRule)
		return store.User{}, false
	}
	u := store.User{ID: id, NameKey: key, CreatedAt: time.Now().UTC().Truncate(time.Millisecond)}
	if password != "" {
		if len(password) < minPasswordLen || len(password) > auth.MaxPasswordBytes {
			writeCode(w, codeBadRequest, "password must be 8-256 bytes")
			return u, false
		}
		hash, err := a.hash(r, password)
		if err != nil {
			writeCode(w, codeUnavailable, "try again")
			return u, false
		}
		u.PasswordHash = hash
	}
	err := a.cfg.Store.CreateUser(r.Context(), u)
	if errors.Is(err, store.ErrExists) {
		writeCode(w, codeConflict, field+" is taken")
		return u, false
	}
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
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
	u, err := a.findLogin(r, c.Username)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	hash := u.PasswordHash
	if err != nil || hash == "" {
		hash = a.dummyHash
	}
	ok, cerr := a.check(r, hash, c.Password)
	if cerr != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	if !ok || err != nil || u.PasswordHash == "" || u.Disabled {
		writeError(w, http.StatusUnauthorized, codeBadCreds, "invalid username or password")
		return
	}
	a.issue(w, http.StatusOK, u.ID, u.TokenEpoch, a.cfg.TokenTTL)
}

// findLogin finds the account a login names: the user with exactly that id
// first (so an account from before names were unique, whose look-alike
// keeps the name, still logs in by its exact id), else the user holding the
// name's normalized form ("ALICE" finds "Alice").
func (a *API) findLogin(r *http.Request, name string) (store.User, error) {
	u, err := a.cfg.Store.GetUser(r.Context(), name)
	if !errors.Is(err, store.ErrNotFound) {
		return u, err
	}
	key, _ := auth.NormalizeUsername(name) // valid: checked by the caller
	return a.cfg.Store.UserByName(r.Context(), key)
}

// logout revokes the presented token and closes the sessions opened with it.
func (a *API) logout(w http.ResponseWriter, r *http.Request, c auth.Claims, _ string) {
	if c.TokenID != "" {
		if err := a.cfg.Store.RevokeToken(r.Context(), c.TokenID, c.ExpiresAt); err != nil {
			writeCode(w, codeUnavailable, "try again")
			return
		}
		a.cfg.Chat.CloseUserSessions(c.UserID, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED, "logged out", "", c.TokenID)
		if !a.removePushTargets(r, c.UserID, c.TokenID) {
			writeCode(w, codeUnavailable, "try again")
			return
		}
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
		writeCode(w, codeBadRequest, "password must be 8-256 bytes")
		return
	}
	u, err := a.cfg.Store.GetUser(r.Context(), c.UserID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && u.PasswordHash == "") {
		writeCode(w, codeDenied, "this account has no password")
		return
	}
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	ok, cerr := a.check(r, u.PasswordHash, p.OldPassword)
	if cerr != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	if !ok {
		writeError(w, http.StatusUnauthorized, codeBadCreds, "invalid password")
		return
	}
	hash, err := a.hash(r, p.NewPassword)
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	u.PasswordHash = hash
	u.TokenEpoch++
	if err := a.cfg.Store.UpdateUser(r.Context(), u); err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	a.cfg.Chat.CloseUserSessions(u.ID, pb.DisconnectCode_DISCONNECT_CODE_TOKEN_REVOKED, "password changed", "", "")
	a.removePushTargets(r, u.ID, "") // the new token works regardless; a failure is logged
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
		writeCode(w, codeBadRequest, "user_id must be 1-64 characters of A-Z a-z 0-9 _ . @ -")
		return
	}
	ttl := a.cfg.TokenTTL
	if m.TTLSeconds != 0 {
		ttl = time.Duration(m.TTLSeconds) * time.Second
	}
	if m.TTLSeconds < 0 || ttl > a.cfg.MaxTokenTTL {
		writeCode(w, codeBadRequest, "ttl_seconds out of range")
		return
	}
	// A record (without password) lets the user's tokens be revoked later.
	// It takes the id's normalized name like any account, so the admin API
	// cannot mint "Alice" while "alice" exists (409); an existing record is
	// used as it is, whatever its name.
	u, err := a.cfg.Store.GetUser(r.Context(), m.UserID)
	if errors.Is(err, store.ErrNotFound) {
		key, _ := auth.NormalizeUsername(m.UserID)
		err = a.cfg.Store.CreateUser(r.Context(), store.User{ID: m.UserID, NameKey: key, CreatedAt: time.Now()})
		if err == nil || errors.Is(err, store.ErrExists) {
			// ErrExists: the id was created meanwhile, or the name is taken.
			u, err = a.cfg.Store.GetUser(r.Context(), m.UserID)
			if errors.Is(err, store.ErrNotFound) {
				writeCode(w, codeConflict, "another user has this name in another case")
				return
			}
		}
	}
	if err != nil {
		writeCode(w, codeUnavailable, "try again")
		return
	}
	if u.Disabled {
		// A token for a disabled user would be refused at every use anyway;
		// saying so here tells the app why.
		writeError(w, http.StatusForbidden, codeUserDisabled, "the user is disabled")
		return
	}
	a.issue(w, http.StatusOK, u.ID, u.TokenEpoch, ttl)
}

func (a *API) issue(w http.ResponseWriter, status int, uid string, epoch uint64, ttl time.Duration) {
	tok, c, err := a.cfg.Tokens.Issue(uid, epoch, ttl)
	if err != nil {
		writeCode(w, codeInternal, "internal error")
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

package server

import (
	"errors"
	"net/http"
	"time"

	"github.com/parleyim/parley/internal/account"
	"github.com/parleyim/parley/internal/api"
	"github.com/parleyim/parley/internal/auth"
	"github.com/parleyim/parley/internal/media/blob"
	"github.com/parleyim/parley/internal/store"
	pb "github.com/parleyim/parley/proto/parleyv1"
)

// Account export and deletion routes (docs/accounts.md).

func (s *Server) newAccounts() {
	var blobs blob.Store
	if s.media != nil {
		blobs = s.media.Blobs()
	}
	s.accounts = account.New(account.Config{Store: s.store, Chat: s.chat, Blobs: blobs,
		MessagePolicy: s.cfg.AccountDeletedMessages, ExportTTL: s.cfg.AccountExportTTL,
		MaxExports: s.cfg.AccountExportWorkers, MessageBytes: s.cfg.MaxFrameBytes, Purge: s.search.purge, Logger: s.log})
}

func (s *Server) accountRoutes() []api.Route {
	return []api.Route{
		{Pattern: "POST /v1/account/exports", User: s.startExport},
		{Pattern: "GET /v1/account/exports/{id}", User: s.exportStatus},
		{Pattern: "GET /v1/account/exports/{id}/archive", User: s.exportArchive},
		{Pattern: "POST /v1/account/delete", User: s.deleteOwnAccount},
		{Pattern: "POST /v1/admin/users/{id}/exports", Admin: s.adminStartExport},
		{Pattern: "GET /v1/admin/exports/{id}", Admin: s.adminExportStatus},
		{Pattern: "GET /v1/admin/exports/{id}/archive", Admin: s.adminExportArchive},
		{Pattern: "DELETE /v1/admin/users/{id}", Admin: s.adminDeleteUser},
		{Pattern: "GET /v1/admin/users/{id}/deletion", Admin: s.adminDeletion},
	}
}

// jobJSON is an export job as the API shows it.
type jobJSON struct {
	ID        string     `json:"id"`
	UserID    string     `json:"user_id"`
	State     string     `json:"state"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Size      int64      `json:"size,omitempty"`
	Error     string     `json:"error,omitempty"`
}

func jobView(j account.Job) jobJSON {
	v := jobJSON{ID: j.ID, UserID: j.UserID, State: j.State, CreatedAt: j.CreatedAt, Size: j.Size, Error: j.Error}
	if !j.ExpiresAt.IsZero() {
		v.ExpiresAt = &j.ExpiresAt
	}
	return v
}

func writeAccountErr(w http.ResponseWriter, err error, what string) {
	switch {
	case errors.Is(err, account.ErrNotFound):
		api.WriteNotFound(w, what+" not found")
	case errors.Is(err, account.ErrNoExport):
		api.WriteCode(w, pb.ErrorCode_ERROR_CODE_UNAVAILABLE, "exports need a file store (media), which this server does not have")
	default:
		api.WriteCode(w, pb.ErrorCode_ERROR_CODE_UNAVAILABLE, "try again")
	}
}

func (s *Server) startExport(w http.ResponseWriter, r *http.Request, c auth.Claims) {
	j, err := s.accounts.Export(r.Context(), c.UserID)
	if err != nil {
		writeAccountErr(w, err, "user")
		return
	}
	api.WriteJSON(w, http.StatusAccepted, jobView(j))
}

func (s *Server) exportStatus(w http.ResponseWriter, r *http.Request, c auth.Claims) {
	j, err := s.accounts.JobOf(r.Context(), c.UserID, r.PathValue("id"))
	if err != nil {
		writeAccountErr(w, err, "export")
		return
	}
	api.WriteJSON(w, http.StatusOK, jobView(j))
}

func (s *Server) exportArchive(w http.ResponseWriter, r *http.Request, c auth.Claims) {
	s.serveArchive(w, r, c.UserID)
}

// serveArchive streams a ready archive (ranges allowed) to its owner (uid
// "" for the admin API).
func (s *Server) serveArchive(w http.ResponseWriter, r *http.Request, uid string) {
	j, obj, err := s.accounts.OpenArchive(r.Context(), uid, r.PathValue("id"))
	if err != nil {
		writeAccountErr(w, err, "export")
		return
	}
	defer obj.Close()
	w.Header().Set("Content-Type", "application/zip")
	w.Header().Set("Content-Disposition", `attachment; filename="parley-export-`+j.ID+`.zip"`)
	http.ServeContent(w, r, "", j.UpdatedAt, obj)
}

type deleteRequest struct {
	Password string `json:"password"`
}

type deletionJSON struct {
	UserID     string     `json:"user_id"`
	State      string     `json:"state"`
	StartedAt  time.Time  `json:"started_at"`
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

func deletionView(d account.Deletion) deletionJSON {
	v := deletionJSON{UserID: d.UserID, State: d.State, StartedAt: d.StartedAt}
	if !d.FinishedAt.IsZero() {
		v.FinishedAt = &d.FinishedAt
	}
	return v
}

// deleteOwnAccount: the user deletes their account, giving their password
// again. A user without a password (an app's users, with minted tokens)
// is deleted by the app through the admin API: a bearer token alone is
// not a fresh proof that the person is there.
func (s *Server) deleteOwnAccount(w http.ResponseWriter, r *http.Request, c auth.Claims) {
	var body deleteRequest
	if !api.DecodeBody(w, r, &body) {
		return
	}
	u, err := s.store.GetUser(r.Context(), c.UserID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && u.PasswordHash == "") {
		api.WriteCode(w, pb.ErrorCode_ERROR_CODE_PERMISSION_DENIED, "this account has no password: the app deletes it through the admin API")
		return
	}
	if err != nil {
		api.WriteCode(w, pb.ErrorCode_ERROR_CODE_UNAVAILABLE, "try again")
		return
	}
	if len(body.Password) > auth.MaxPasswordBytes {
		api.WriteBadCredentials(w, "invalid password")
		return
	}
	ok, err := s.api.CheckPassword(r, u.PasswordHash, body.Password)
	if err != nil {
		api.WriteCode(w, pb.ErrorCode_ERROR_CODE_UNAVAILABLE, "try again")
		return
	}
	if !ok {
		api.WriteBadCredentials(w, "invalid password")
		return
	}
	d, err := s.accounts.Delete(r.Context(), c.UserID, "user")
	if err != nil {
		writeAccountErr(w, err, "user")
		return
	}
	api.WriteJSON(w, http.StatusAccepted, deletionView(d))
}

func (s *Server) adminStartExport(w http.ResponseWriter, r *http.Request) {
	uid := r.PathValue("id")
	if _, err := s.store.GetUser(r.Context(), uid); err != nil {
		writeAccountErr(w, mapNotFound(err), "user")
		return
	}
	j, err := s.accounts.Export(r.Context(), uid)
	if err != nil {
		writeAccountErr(w, err, "user")
		return
	}
	api.NoteAudit(r, "job", j.ID)
	api.WriteJSON(w, http.StatusAccepted, jobView(j))
}

func (s *Server) adminExportStatus(w http.ResponseWriter, r *http.Request) {
	j, err := s.accounts.JobOf(r.Context(), "", r.PathValue("id"))
	if err != nil {
		writeAccountErr(w, err, "export")
		return
	}
	api.WriteJSON(w, http.StatusOK, jobView(j))
}

func (s *Server) adminExportArchive(w http.ResponseWriter, r *http.Request) {
	s.serveArchive(w, r, "")
}

func (s *Server) adminDeleteUser(w http.ResponseWriter, r *http.Request) {
	d, err := s.accounts.Delete(r.Context(), r.PathValue("id"), "admin")
	if err != nil {
		writeAccountErr(w, err, "user")
		return
	}
	api.NoteAudit(r, "messages", s.cfg.AccountDeletedMessages)
	api.WriteJSON(w, http.StatusAccepted, deletionView(d))
}

func (s *Server) adminDeletion(w http.ResponseWriter, r *http.Request) {
	d, found, err := s.accounts.DeletionState(r.Context(), r.PathValue("id"))
	if err == nil && !found {
		err = account.ErrNotFound
	}
	if err != nil {
		writeAccountErr(w, err, "deletion")
		return
	}
	api.WriteJSON(w, http.StatusOK, deletionView(d))
}

func mapNotFound(err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return account.ErrNotFound
	}
	return err
}
